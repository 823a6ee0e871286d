package main

import (
	"context"
	"errors"
)

// runLab is a placeholder until its issue lands; replace this file.
func runLab(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot lab: not implemented yet")
}
