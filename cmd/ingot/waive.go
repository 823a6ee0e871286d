package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// runMachineWaive: `ingot machine waive NODE CHECK --reason TEXT`, through
// the API: lets one machine past one failed check of its recipe.
func runMachineWaive(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine waive", "machine waive NODE CHECK --reason TEXT [--server URL]")
	af := addAPIFlags(fs)
	reason := fs.String("reason", "", "why this machine may pass with the check failed (recorded with your token's name)")
	rest, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(rest) != 2 {
		fs.Usage()
		return fmt.Errorf("expected NODE and CHECK, got %d arguments", len(rest))
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	var m machine.Machine
	path := "/api/v1/machines/" + url.PathEscape(rest[0]) + "/waivers"
	if _, err := c.do(ctx, "POST", path, apiserver.WaiverRequest{Check: rest[1], Reason: *reason}, &m, 201); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: check %s waived (%d waivers); the next job lets it past when it fails\n", m.Name, rest[1], len(m.Waivers))
	return nil
}

// runMachineUnwaive: `ingot machine unwaive NODE CHECK`.
func runMachineUnwaive(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine unwaive", "machine unwaive NODE CHECK [--server URL]")
	af := addAPIFlags(fs)
	rest, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(rest) != 2 {
		fs.Usage()
		return fmt.Errorf("expected NODE and CHECK, got %d arguments", len(rest))
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	var m machine.Machine
	path := "/api/v1/machines/" + url.PathEscape(rest[0]) + "/waivers/" + url.PathEscape(rest[1])
	if _, err := c.do(ctx, "DELETE", path, nil, &m, 200); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: waiver for %s withdrawn\n", m.Name, rest[1])
	return nil
}
