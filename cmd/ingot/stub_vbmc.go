package main

import (
	"context"
	"errors"
)

// runVBMC is a placeholder until its issue lands; replace this file.
func runVBMC(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot vbmc: not implemented yet")
}
