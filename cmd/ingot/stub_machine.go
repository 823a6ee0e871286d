package main

import (
	"context"
	"errors"
)

// runMachine is a placeholder until its issue lands; replace this file.
func runMachine(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot machine: not implemented yet")
}
