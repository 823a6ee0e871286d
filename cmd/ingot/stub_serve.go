package main

import (
	"context"
	"errors"
)

// runServe is a placeholder until its issue lands; replace this file.
func runServe(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot serve: not implemented yet")
}
