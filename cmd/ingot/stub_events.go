package main

import (
	"context"
	"errors"
)

// runEvents is a placeholder until its issue lands; replace this file.
func runEvents(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot events: not implemented yet")
}
