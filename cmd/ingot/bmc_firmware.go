package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// runBMCFirmware implements `ingot bmc firmware plan`: the firmware plan
// of one BMC before it is enrolled, against pins given on the command line.
func runBMCFirmware(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "plan" {
		fmt.Fprint(e.stderr, "Usage: ingot bmc firmware plan --endpoint URL (--user U --password-file F | --cred REF) --pin COMPONENT=VERSION... [--allow-downgrade] [-o table|json]\n")
		return errUsage
	}
	var pins repeatedFlag
	var downgrade bool
	return bmcCommand(ctx, e, "firmware plan", "firmware plan --pin COMPONENT=VERSION... --endpoint URL ...", args[1:],
		func(fs *flag.FlagSet) {
			fs.Var(&pins, "pin", "COMPONENT=VERSION, repeatable: bios, bmc, gpu, nic (every instance of the class), or a component's name, model or SKU (NVIDIA A40, CPLD)")
			fs.BoolVar(&downgrade, "allow-downgrade", false, "plan a downgrade where a component runs a newer version than its pin")
		},
		func(ctx context.Context, c *bmc.Client, f *bmcFlags, _ []string) error {
			fw, err := parsePins(pins, downgrade)
			if err != nil {
				return fmt.Errorf("bmc firmware plan: %w", err)
			}
			us, err := c.UpdateService(ctx)
			if err != nil {
				return err
			}
			inv, err := c.Inventory(ctx)
			if err != nil {
				return err
			}
			plan := firmware.MakePlan(us.Items, inv, fw)
			if f.output == "json" {
				return e.printJSON(plan)
			}
			return writePlan(e, plan)
		})
}

// parsePins reads --pin COMPONENT=VERSION into pins a campaign would
// carry out (policy update; the package is the campaign's to name).
func parsePins(args []string, downgrade bool) (recipe.Firmware, error) {
	var fw recipe.Firmware
	if len(args) == 0 {
		return fw, errors.New("expected at least one --pin COMPONENT=VERSION, e.g. --pin bmc=1.46.0")
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return fw, fmt.Errorf("--pin %q: expected COMPONENT=VERSION", a)
		}
		p := recipe.Pin{Version: v, Policy: recipe.FirmwareUpdate, AllowDowngrade: downgrade}
		switch strings.ToLower(k) {
		case "bios":
			fw.BIOS = p
		case "bmc":
			fw.BMC = p
		case "gpu":
			fw.GPU = p
		case "nic":
			fw.NIC = p
		default:
			if fw.Other == nil {
				fw.Other = map[string]recipe.Pin{}
			}
			p.Component = k
			fw.Other[k] = p
		}
	}
	return fw, nil
}

// writePlan prints a plan as a table: one line per component instance.
func writePlan(e *env, p firmware.Plan) error {
	t := newCLITable(e.stdout, "COMPONENT", "CLASS", "FOUND", "PINNED", "ACTION", "WHY")
	for _, en := range p.Entries {
		t.row(en.Component, en.Class, dash(en.Version), dash(en.Pinned), string(en.Action), en.Reason)
	}
	return t.flush()
}

// runBMCQuirks implements `ingot bmc quirks`: the BMC deviations pkg/bmc
// knows and handles (no BMC is contacted).
func runBMCQuirks(e *env, args []string) error {
	fs := e.flagSet("bmc quirks", "bmc quirks [-o table|json]")
	output := fs.String("o", "table", "output format: table or json")
	if err := e.parse(fs, args); err != nil {
		return helpOK(err)
	}
	qs := bmc.Quirks()
	if *output == "json" {
		return e.printJSON(qs)
	}
	t := newCLITable(e.stdout, "QUIRK", "VENDOR", "BEHAVIOUR", "HANDLING")
	for _, q := range qs {
		t.row(string(q.Name), q.Vendor, q.Behaviour, q.Handling)
	}
	return t.flush()
}
