package main

import (
	"context"
	"errors"
)

// runInventory is a placeholder until its issue lands; replace this file.
func runInventory(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot inventory: not implemented yet")
}
