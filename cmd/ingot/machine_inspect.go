package main

import (
	"context"
	"fmt"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// runMachineInspect asks the server to read an enrolled machine's inventory
// from its BMC (with the credentials its reference names, on the server),
// keep it as a snapshot, judge it against the machine's recipe and record
// an "inspect" event with the drift summary.
func runMachineInspect(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine inspect", "machine inspect NODE [-o table|json|yaml]")
	af := addAPIFlags(fs)
	node, c, err := parseNode(e, fs, af, "machine inspect", args)
	if err != nil {
		return helpOK(err)
	}
	res, err := c.Inspect(ctx, node)
	if err != nil {
		return fmt.Errorf("machine inspect: %w", err)
	}
	return e.render(af.output, res, func() error { return writeInspection(e, res) })
}

func writeInspection(e *env, res *wire.Inspection) error {
	snap := &wire.Snapshot{Seq: res.Snapshot, Taken: res.Inventory.Taken, Inventory: res.Inventory}
	if err := writeInventorySummary(e.stdout, snap); err != nil {
		return err
	}
	if res.Recipe == "" {
		fmt.Fprintf(e.stdout, "Drift: not checked (%s; assign a recipe that lints: ingot machine set-recipe %s RECIPE)\n", res.Note, res.Machine)
		return nil
	}
	fmt.Fprintf(e.stdout, "Drift against %s: %s\n", res.Recipe, res.Summary)
	if len(res.Findings) == 0 {
		return nil
	}
	t := newCLITable(e.stdout, "  SEVERITY", "PART", "FINDING", "EXPECTED", "FOUND")
	for _, f := range res.Findings {
		t.row("  "+f.Severity, f.Part, f.Message, f.Expected, f.Found)
	}
	return t.flush()
}
