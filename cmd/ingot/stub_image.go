package main

import (
	"context"
	"errors"
)

// runImage is a placeholder until its issue lands; replace this file.
func runImage(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot image: not implemented yet")
}
