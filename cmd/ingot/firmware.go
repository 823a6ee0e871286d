package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/firmware"
)

const firmwareUsage = `Usage: ingot firmware COMMAND [flags]

Commands:
  import FILE [--data DIR] [--name NAME]
              put a firmware package (a vendor update file or bundle) into the
              content store; a recipe pin names it by the sha256 printed:
                firmware:
                  bmc: {version: 1.46.0, package: SHA256, policy: update}
  plan RECIPE|NODE... [-o table|json|yaml]
              per node and component: the version found (the BMC's
              FirmwareInventory, the in-band inventory where the BMC lists
              none of a class), the pinned one and the action; read now
  apply RECIPE|NODE... [--rollback] [--per-rack N] [--total N] [--pause D]
              [--window W]... [--reason TEXT] [--wait]
              a campaign (a job): every node brought to its recipe's update
              pins, one update at a time per BMC, at most N per rack and in
              total, D between starts, only inside the maintenance windows
              that name a node's rack or recipe:
                --window 'racks=r1,r2 days=sat,sun 22:00-04:00 tz=Europe/Berlin'
                --window 'recipes=gpu-a100 02:00+3h'
              follow it with ingot job show JOB; ingot job cancel JOB stops it
              before the next package (an update in flight finishes)

The plan of one BMC before it is enrolled: ingot bmc firmware plan --endpoint URL ... --pin COMPONENT=VERSION
`

// runFirmware implements `ingot firmware import|plan|apply`.
func runFirmware(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || wantsHelp(args[:1]) {
		fmt.Fprint(e.stderr, firmwareUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "import":
		return firmwareImport(ctx, e, args[1:])
	case "plan":
		return firmwarePlan(ctx, e, args[1:])
	case "apply":
		return firmwareApply(ctx, e, args[1:])
	}
	fmt.Fprintf(e.stderr, "ingot firmware: unknown command %q\n\n%s", args[0], firmwareUsage)
	return errUsage
}

func firmwareImport(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("firmware import", "firmware import FILE [--data DIR] [--name NAME]")
	data := fs.String("data", defaultDataDir, "content store folder")
	name := fs.String("name", "", "human name for the package (default: the file's base name)")
	if err := e.parse(fs, flagsFirst(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	res, err := firmware.Import(ctx, *data, fs.Arg(0), *name)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s  %s  %d bytes\n", res.SHA256, res.Name, res.Size)
	return nil
}

// firmwarePlan implements `ingot firmware plan RECIPE|NODE...`: the
// server reads each node's BMC and plans it against its recipe.
func firmwarePlan(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("firmware plan", "firmware plan RECIPE|NODE... [-o table|json|yaml]")
	af := addAPIFlags(fs)
	targets, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(targets) == 0 {
		fs.Usage()
		return fmt.Errorf("firmware plan: expected at least one RECIPE or NODE")
	}
	c, err := af.client(e)
	if err != nil {
		return err
	}
	plans, err := c.FirmwarePlan(ctx, targets)
	if err != nil {
		return fmt.Errorf("firmware plan: %w", err)
	}
	return e.render(af.output, plans, func() error {
		t := newCLITable(e.stdout, "NODE", "COMPONENT", "FOUND", "PINNED", "ACTION", "PACKAGE", "WHY")
		for _, p := range plans {
			if p.Error != "" {
				t.row(p.Name, "-", "-", "-", "error", "-", p.Error)
				continue
			}
			for _, en := range p.Entries {
				t.row(p.Name, en.Component, dash(en.Found), dash(en.Pinned), en.Action, dash(shortSHA(en.Package)), en.Reason)
			}
		}
		return t.flush()
	})
}

// firmwareApply implements `ingot firmware apply RECIPE|NODE...`.
func firmwareApply(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("firmware apply", "firmware apply RECIPE|NODE... [--rollback] [--per-rack N] [--total N] [--pause D] [--window W]... [--wait]")
	af := addAPIFlags(fs)
	rollback := fs.Bool("rollback", false, "restore the previous image of a component whose update fails, where the BMC keeps one")
	perRack := fs.Int("per-rack", 0, "updates in flight per rack (0: no limit); never more than one at a BMC")
	total := fs.Int("total", 0, "updates in flight in all (0: no limit)")
	pause := fs.Duration("pause", 0, "least time between two starts (large pushes exhaust BMC memory and the management network)")
	var windows repeatedFlag
	fs.Var(&windows, "window", "maintenance window, repeatable: [racks=R,..] [recipes=N,..] [days=sat,sun] HH:MM-HH:MM|HH:MM+DURATION [tz=ZONE]")
	reason := fs.String("reason", "", "why, recorded in the machines' events")
	wait := fs.Bool("wait", false, "follow the campaign until it ends")
	timeout := fs.Duration("timeout", 24*time.Hour, "with --wait: give up waiting after this long (the campaign goes on)")
	targets, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(targets) == 0 {
		fs.Usage()
		return fmt.Errorf("firmware apply: expected at least one RECIPE or NODE")
	}
	for _, w := range windows {
		if _, err := firmware.ParseWindow(w); err != nil {
			return fmt.Errorf("firmware apply: --window: %w", err)
		}
	}
	c, err := af.client(e)
	if err != nil {
		return err
	}
	req := wire.FirmwareApplyRequest{Targets: targets, Rollback: *rollback, PerRack: *perRack, Total: *total, Windows: windows, Reason: *reason}
	if *pause > 0 {
		req.Pause = pause.String()
	}
	j, err := c.FirmwareApply(ctx, req)
	if err != nil {
		return fmt.Errorf("firmware apply: %w", err)
	}
	fmt.Fprintf(e.stdout, "firmware campaign %s started over %d machine(s); ingot job show %s\n", j.ID, len(j.Machines), j.ID)
	if !*wait {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return followCampaign(wctx, e, c, j.ID)
}

// followCampaign prints the campaign's counts whenever they change, then
// how it ended; a campaign that did not succeed exits 1.
func followCampaign(ctx context.Context, e *env, c *client.Client, id string) error {
	last := ""
	jobs, err := c.Follow(ctx, map[string]string{id: id}, time.Second, func(_ string, j *wire.Job) {
		if j.Firmware == nil {
			return
		}
		if line := j.Firmware.Counts(); line != last {
			fmt.Fprintf(e.stdout, "%s: %s\n", id, line)
			last = line
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped waiting (%v); the campaign goes on: ingot job show %s", ctx.Err(), id)
		}
		return err
	}
	j := jobs[id]
	fmt.Fprintf(e.stdout, "%s %s: %s\n", id, strings.ToUpper(j.State), j.Reason)
	if j.State != wire.JobSucceeded {
		return exitError(1)
	}
	return nil
}

// writeFirmware prints a campaign (job show): its counts, then each node
// with its packages.
func writeFirmware(e *env, st wire.FirmwareStatus) {
	fmt.Fprintf(e.stdout, "Firmware: %s\n", st.Counts())
	if st.Cancel != "" {
		fmt.Fprintf(e.stdout, "Cancel:   %s\n", st.Cancel)
	}
	for _, n := range st.Nodes {
		writeFirmwareNode(e, n)
	}
}

func writeFirmwareNode(e *env, n wire.FirmwareNodeStatus) {
	line := fmt.Sprintf("  %-16s rack %-8s %-9s", n.Name, dash(n.Rack), n.State)
	if n.Message != "" {
		line += " " + n.Message
	}
	fmt.Fprintln(e.stdout, line)
	for _, s := range n.Steps {
		var want []string
		for _, t := range s.Targets {
			want = append(want, t[strings.LastIndex(t, "/")+1:]+" "+s.Want[t])
		}
		fmt.Fprintf(e.stdout, "    package %s -> %s: %s", shortSHA(s.Package), strings.Join(want, ", "), s.Phase)
		if s.Waits > 0 {
			fmt.Fprintf(e.stdout, " (BMC away %d times)", s.Waits)
		}
		fmt.Fprintln(e.stdout)
	}
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
