package main

import (
	"context"
	"errors"
)

// runRollout is a placeholder until its issue lands; replace this file.
func runRollout(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot rollout: not implemented yet")
}
