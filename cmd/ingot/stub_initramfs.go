package main

import (
	"context"
	"errors"
)

// runInitramfs is a placeholder until its issue lands; replace this file.
func runInitramfs(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot initramfs: not implemented yet")
}
