package main

import (
	"context"
	"fmt"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// runDrill: `ingot drill RECIPE [--machine M] [--force]`, through the API:
// reimage one drill candidate of the class from its recipe and time it.
func runDrill(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("drill", "drill RECIPE [--machine M] [--force] [--wait=false]")
	af := addAPIFlags(fs)
	mach := fs.String("machine", "", "drill this machine (default: the class's candidate drilled longest ago)")
	force := fs.Bool("force", false, "drill --machine although it is not a drill candidate (it is wiped)")
	wait := fs.Bool("wait", true, "follow the drill until the machine is ready or failed")
	timeout := fs.Duration("timeout", 2*time.Hour, "give up waiting after this long (the drill goes on)")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "RECIPE"); err != nil {
		return fmt.Errorf("drill: %w", err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("drill: %w", err)
	}
	j, err := c.StartDrill(ctx, wire.DrillRequest{Recipe: pos[0], Machine: *mach, Force: *force})
	if err != nil {
		return fmt.Errorf("drill: %w", err)
	}
	fmt.Fprintf(e.stdout, "restore drill of %s: job %s on %s started\n", pos[0], j.ID, j.Machines[0])
	if !*wait {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if n, err := follow(wctx, c, map[string]string{j.Machines[0]: j.ID}, e.stdout); err != nil {
		return err
	} else if n > 0 {
		return exitError(1)
	}
	rs, err := c.Readiness(ctx)
	if err != nil {
		return fmt.Errorf("drill: %w", err)
	}
	for _, r := range rs {
		if r.Recipe == pos[0] {
			writeReadinessLine(e, r)
		}
	}
	return nil
}

// runMachineDrillCandidate: `ingot machine drill-candidate NODE [--off]`.
func runMachineDrillCandidate(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("machine drill-candidate", "machine drill-candidate NODE [--off]")
	af := addAPIFlags(fs)
	off := fs.Bool("off", false, "no longer a candidate")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "NODE"); err != nil {
		return fmt.Errorf("machine drill-candidate: %w", err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("machine drill-candidate: %w", err)
	}
	m, err := c.SetDrillCandidate(ctx, pos[0], !*off)
	if err != nil {
		return fmt.Errorf("machine drill-candidate: %w", err)
	}
	return e.render(af.output, m, func() error {
		if m.DrillCandidate {
			fmt.Fprintf(e.stdout, "%s: drill candidate (ingot drill %s may wipe it)\n", m.Name, firstNonEmpty(m.Recipe, "RECIPE"))
		} else {
			fmt.Fprintf(e.stdout, "%s: not a drill candidate\n", m.Name)
		}
		return nil
	})
}

// runRecipeLs: `ingot recipe ls`, each class's last drill and readiness.
func runRecipeLs(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("recipe ls", "recipe ls [-o json|yaml]")
	af := addAPIFlags(fs)
	if _, err := parseWithArgs(e, fs, args); err != nil {
		return helpOK(err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("recipe ls: %w", err)
	}
	rs, err := c.Readiness(ctx)
	if err != nil {
		return fmt.Errorf("recipe ls: %w", err)
	}
	return e.render(af.output, rs, func() error {
		t := newCLITable(e.stdout, "RECIPE", "LAST DRILL", "MACHINE", "TIME TO RESTORE", "TARGET", "SCALE-READY")
		for _, r := range rs {
			last, mach, took, target, ready := "never", "-", "-", "-", "yes"
			if d := r.LastDrill; d != nil {
				last, mach, took = tableTime(d.At), d.Machine, (time.Duration(d.RestoreSeconds * float64(time.Second))).Round(time.Second).String()
				if !d.Passed {
					took += " FAILED"
				}
			}
			if r.TargetSeconds > 0 {
				target = (time.Duration(r.TargetSeconds * float64(time.Second))).String()
			}
			if !r.ScaleReady {
				ready = "NO: " + r.Why
			}
			t.row(r.Recipe, last, mach, took, target, ready)
		}
		return t.flush()
	})
}

func writeReadinessLine(e *env, r wire.RecipeReadiness) {
	if r.ScaleReady {
		fmt.Fprintf(e.stdout, "%s is scale-ready: restored from its recipe in %s\n", r.Recipe,
			(time.Duration(r.LastDrill.RestoreSeconds * float64(time.Second))).Round(time.Second))
		return
	}
	fmt.Fprintf(e.stdout, "%s is NOT scale-ready: %s\n", r.Recipe, r.Why)
}
