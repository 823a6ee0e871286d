package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// inspectResult is what `machine inspect -o json` prints.
type inspectResult struct {
	Machine   string            `json:"machine"`
	Snapshot  uint64            `json:"snapshot"`
	Recipe    string            `json:"recipe,omitempty"`
	Findings  []drift.Finding   `json:"findings"`
	Summary   string            `json:"summary"`
	Inventory machine.Inventory `json:"inventory"`
}

// runMachineInspect reads an enrolled machine's inventory from its BMC
// (machine.BMC.Endpoint, credentials from its CredentialRef: file:PATH with
// username=/password= lines or one NAME:SECRET line, or env:VAR holding
// NAME:SECRET), stores it as a snapshot, compares it with the machine's
// recipe and appends an "inspect" event with the drift summary.
func runMachineInspect(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine inspect", "machine inspect NODE [--db FILE] [--recipes DIR] [--insecure] [--timeout D] [-o table|json]")
	sf := addStoreCLIFlags(fs)
	recipes := fs.String("recipes", "recipes", "folder holding RECIPE.yaml files (for the drift check)")
	insecure := fs.Bool("insecure", false, "do not verify the BMC's TLS certificate (also set per machine at enrollment)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	node, err := parseNode(e, fs, sf, "machine inspect", args)
	if err != nil {
		return helpOK(err)
	}
	st, m, err := sf.openMachine(ctx, node)
	if err != nil {
		return fmt.Errorf("machine inspect %s: %w", node, err)
	}
	defer st.Close()
	if m.BMC.Endpoint == "" || m.BMC.CredentialRef == "" {
		return fmt.Errorf("machine inspect %s: no BMC endpoint or credential reference; enroll it with --bmc URL --bmc-cred file:PATH|env:VAR", m.Name)
	}
	user, pass, err := credential.Resolve(m.BMC.CredentialRef, e.getenv)
	if err != nil {
		return fmt.Errorf("machine inspect %s: %w", m.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	inv, err := readInventory(ctx, bmc.Dial, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass,
		Insecure: m.BMC.Insecure || *insecure, Logger: e.logger(*logLevel)})
	if err != nil {
		return fmt.Errorf("machine inspect %s: %w", m.Name, err)
	}
	res := inspectResult{Machine: m.Name, Recipe: m.Recipe, Inventory: inv, Findings: []drift.Finding{}}
	if m.Recipe != "" {
		r, err := loadRecipe(*recipes, m.Recipe)
		if err != nil {
			fmt.Fprintf(e.stderr, "ingot: machine inspect %s: no drift check: %v\n", m.Name, err)
			res.Recipe = "" // the snapshot is stored; the event says no drift was checked
		} else {
			res.Findings = drift.Check(inv, r)
		}
	}
	res.Summary = drift.Summary(res.Findings)
	if res.Snapshot, err = recordInspection(ctx, st, m, res.Recipe, inv, res.Findings, operatorActor(e)); err != nil {
		return fmt.Errorf("machine inspect %s: %w", m.Name, err)
	}
	if sf.output == "json" {
		return e.printJSON(res)
	}
	if err := writeInventorySummary(e.stdout, &store.Snapshot{Seq: res.Snapshot, MachineID: m.ID, Taken: inv.Taken, Inventory: inv}); err != nil {
		return err
	}
	if res.Recipe == "" {
		fmt.Fprintf(e.stdout, "Drift: not checked (assign a recipe that lints: ingot machine set-recipe %s RECIPE)\n", m.Name)
		return nil
	}
	fmt.Fprintf(e.stdout, "Drift against %s: %s\n", m.Recipe, res.Summary)
	if len(res.Findings) > 0 {
		t := newCLITable(e.stdout, "  SEVERITY", "PART", "FINDING", "EXPECTED", "FOUND")
		for _, f := range res.Findings {
			t.row("  "+string(f.Severity), f.Part, f.Message, f.Expected, f.Found)
		}
		return t.flush()
	}
	return nil
}

// readInventory dials, reads and logs out.
func readInventory(ctx context.Context, dial bmc.DialFunc, cfg bmc.Config) (machine.Inventory, error) {
	c, err := dial(ctx, cfg)
	if err != nil {
		return machine.Inventory{}, err
	}
	inv, err := c.Inventory(ctx)
	inv.Taken = time.Now().UTC()
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	return inv, err
}

// loadRecipe reads the recipes folder and returns name, extends resolved.
// Errors in other recipes of the folder do not matter here.
func loadRecipe(dir, name string) (*recipe.Recipe, error) {
	set, diags := recipe.LoadDir(dir)
	var errs []string
	file := ""
	if set != nil {
		file = set.File(name)
	}
	for _, d := range diags {
		if d.Severity == recipe.SeverityError && (d.File == file || file == "") {
			errs = append(errs, d.String())
		}
	}
	var r *recipe.Recipe
	ok := false
	if set != nil {
		r, ok = set.Get(name)
	}
	switch {
	case len(errs) > 0:
		return nil, fmt.Errorf("recipe %s does not lint: %s (run ingot recipe lint)", name, errs[0])
	case !ok || r == nil:
		return nil, fmt.Errorf("recipe %q not found in %s", name, dir)
	}
	return r, nil
}

// recordInspection stores the snapshot and an "inspect" event carrying the
// drift summary.
func recordInspection(ctx context.Context, st store.Store, m *machine.Machine, checked string, inv machine.Inventory, fs []drift.Finding, actor string) (uint64, error) {
	seq, err := st.PutInventory(ctx, m.ID, inv)
	if err != nil {
		return 0, fmt.Errorf("storing the inventory: %w", err)
	}
	n := map[drift.Severity]int{}
	for _, f := range fs {
		n[f.Severity]++
	}
	msg := fmt.Sprintf("inventory #%d from BMC %s: %d GPU, %d CPU, %d DIMM, %d PSU", seq, m.BMC.Endpoint,
		len(inv.GPUs), len(inv.CPUs), len(inv.DIMMs), len(inv.PSUs))
	if checked != "" {
		msg += fmt.Sprintf("; drift against %s: %s", checked, drift.Summary(fs))
	} else {
		msg += "; no drift check (no usable recipe)"
	}
	if w := drift.Worst(fs); w == drift.Critical {
		msg += "; worst: " + firstOf(fs, w)
	}
	_, err = st.AppendEvent(ctx, machine.Event{Machine: m.ID, Actor: actor, Kind: "inspect", Message: msg,
		Fields: map[string]string{"snapshot": strconv.FormatUint(seq, 10), "source": "redfish", "bmc": m.BMC.Endpoint,
			"critical": strconv.Itoa(n[drift.Critical]), "warning": strconv.Itoa(n[drift.Warning]),
			"info": strconv.Itoa(n[drift.Info]), "problems": strconv.Itoa(len(inv.Problems))}})
	if err != nil {
		return seq, fmt.Errorf("appending the inspect event: %w", err)
	}
	return seq, nil
}

func firstOf(fs []drift.Finding, sev drift.Severity) string {
	for _, f := range fs {
		if f.Severity == sev {
			return f.String()
		}
	}
	return ""
}
