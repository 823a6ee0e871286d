package main

import (
	"context"
	"errors"
)

// runToken is a placeholder until its issue lands; replace this file.
func runToken(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot token: not implemented yet")
}
