package main

import (
	"context"
	"errors"
)

// runReimage is a placeholder until its issue lands; replace this file.
func runReimage(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot reimage: not implemented yet")
}
