package main

import (
	"context"
	"errors"
)

// runMachineInspect is a placeholder until the Redfish inspect lands; replace this file.
func runMachineInspect(_ context.Context, _ *env, _ []string) error {
	return errors.New("ingot machine inspect: not implemented yet")
}
