package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/ingot-dev/ingot/pkg/client"
)

// runMachineWaive: `ingot machine waive NODE CHECK --reason TEXT`: lets one
// machine past one failed check of its recipe.
func runMachineWaive(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine waive", "machine waive NODE CHECK --reason TEXT")
	reason := fs.String("reason", "", "why this machine may pass with the check failed (recorded with your token's name)")
	c, node, check, err := waiverArgs(e, fs, args)
	if c == nil {
		return err
	}
	m, err := c.Waive(ctx, node, check, *reason)
	if err != nil {
		return fmt.Errorf("machine waive: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s: check %s waived (%d waivers); the next job lets it past when it fails\n", m.Name, check, len(m.Waivers))
	return nil
}

// runMachineUnwaive: `ingot machine unwaive NODE CHECK`.
func runMachineUnwaive(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine unwaive", "machine unwaive NODE CHECK")
	c, node, check, err := waiverArgs(e, fs, args)
	if c == nil {
		return err
	}
	m, err := c.Unwaive(ctx, node, check)
	if err != nil {
		return fmt.Errorf("machine unwaive: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s: waiver for %s withdrawn\n", m.Name, check)
	return nil
}

// waiverArgs parses NODE CHECK and the API flags; a nil client ends the
// command with err (nil after -h).
func waiverArgs(e *env, fs *flag.FlagSet, args []string) (*client.Client, string, string, error) {
	af := addAPIFlags(fs)
	rest, err := parseWithArgs(e, fs, args)
	if err != nil {
		return nil, "", "", helpOK(err)
	}
	if len(rest) != 2 {
		fs.Usage()
		return nil, "", "", fmt.Errorf("expected NODE and CHECK, got %d arguments", len(rest))
	}
	c, err := af.client(e)
	if err != nil {
		return nil, "", "", err
	}
	return c, rest[0], rest[1], nil
}
