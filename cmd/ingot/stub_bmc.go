package main

import (
	"context"
	"errors"
)

// runBMC is a placeholder until its issue lands; replace this file.
func runBMC(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot bmc: not implemented yet")
}
