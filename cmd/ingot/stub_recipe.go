package main

import (
	"context"
	"errors"
)

// runRecipe is a placeholder until its issue lands; replace this file.
func runRecipe(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot recipe: not implemented yet")
}
