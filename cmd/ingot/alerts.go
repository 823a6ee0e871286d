package main

import (
	"context"
	"fmt"
	"strings"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// runAlerts: `ingot alerts` (the server's pending and firing alerts, over
// the API) and `ingot alerts rules` (the same rules as a Prometheus rules
// file, from the reviewed recipes, offline like lint).
func runAlerts(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "rules":
			return runAlertRules(e, args[1:])
		case "silence":
			return runSilence(ctx, e, args[1:])
		case "silences":
			return runSilences(ctx, e, args[1:])
		}
	}
	fs := e.flagSet("alerts", "alerts [-o json|yaml] | alerts silence MACHINE RULE --for 4h [--reason R] | alerts silences | alerts rules [--recipes-dir DIR]")
	af := addAPIFlags(fs)
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) != 0 {
		fs.Usage()
		return errUsage
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	as, err := c.Alerts(ctx)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	return e.render(af.output, as, func() error { return writeAlerts(e, as) })
}

func writeAlerts(e *env, as []wire.Alert) error {
	if len(as) == 0 {
		fmt.Fprintln(e.stdout, "no alerts")
		return nil
	}
	t := newCLITable(e.stdout, "MACHINE", "RACK", "ALERT", "SEVERITY", "STATE", "READING", "LIMIT", "SINCE", "WHAT TO DO")
	for _, a := range as {
		state := a.State
		if a.Silenced {
			state += " (silenced: in a job)"
		}
		if a.SilencedBy != "" {
			state += " (silenced by " + a.SilencedBy + " until " + tableTime(a.SilencedUntil) + ")"
		}
		t.row(a.Machine, a.Rack, a.Rule, a.Severity, state, a.Reading, a.Threshold, tableTime(a.Since), a.Action)
	}
	return t.flush()
}

// runSilence: `ingot alerts silence MACHINE RULE --for D [--reason R]`
// mutes one machine's alert of one rule at the notifiers (the dashboard's
// Silence button; the server records it as an event).
func runSilence(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("alerts silence", "alerts silence MACHINE RULE --for 4h [--reason TEXT] [-o json|yaml]")
	af := addAPIFlags(fs)
	d := fs.String("for", "", "how long, at most 168h (required)")
	reason := fs.String("reason", "", "why, recorded in the machine's events")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) != 2 || *d == "" {
		fs.Usage()
		return errUsage
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("alerts silence: %w", err)
	}
	sl, err := c.Silence(ctx, wire.SilenceRequest{Machine: pos[0], Rule: pos[1], For: *d, Reason: *reason})
	if err != nil {
		return fmt.Errorf("alerts silence %s %s: %w", pos[0], pos[1], err)
	}
	return e.render(af.output, sl, func() error {
		fmt.Fprintf(e.stdout, "%s on %s silenced until %s\n", sl.Rule, sl.Machine, tableTime(sl.Until))
		return nil
	})
}

// runSilences: `ingot alerts silences`, the silences in force.
func runSilences(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("alerts silences", "alerts silences [-o json|yaml]")
	af := addAPIFlags(fs)
	if _, err := parseWithArgs(e, fs, args); err != nil {
		return helpOK(err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("alerts silences: %w", err)
	}
	ss, err := c.Silences(ctx)
	if err != nil {
		return fmt.Errorf("alerts silences: %w", err)
	}
	return e.render(af.output, ss, func() error {
		if len(ss) == 0 {
			fmt.Fprintln(e.stdout, "no silences")
			return nil
		}
		t := newCLITable(e.stdout, "MACHINE", "ALERT", "BY", "UNTIL", "REASON")
		for _, sl := range ss {
			t.row(sl.Machine, sl.Rule, sl.Actor, tableTime(sl.Until), sl.Reason)
		}
		return t.flush()
	})
}

func runAlertRules(e *env, args []string) error {
	fs := e.flagSet("alerts rules", "alerts rules [--recipes-dir DIR] > ingot.rules.yml")
	dir := fs.String("recipes-dir", "recipes", "folder of recipe files")
	if err := e.parse(fs, args); err != nil || helpAsked(args) {
		return err
	}
	set, diags := recipe.LoadDir(*dir)
	if recipe.HasErrors(diags) {
		var msgs []string
		for _, d := range diags {
			if d.Severity == recipe.SeverityError {
				msgs = append(msgs, d.String())
			}
		}
		return fmt.Errorf("alerts rules: the recipes in %s do not lint:\n%s", *dir, strings.Join(msgs, "\n"))
	}
	var rs []*recipe.Recipe
	for _, n := range set.Names() {
		r, _ := set.Get(n)
		rs = append(rs, r)
	}
	b, err := telemetry.PrometheusRules(rs)
	if err != nil {
		return fmt.Errorf("alerts rules: %w", err)
	}
	fmt.Fprintf(e.stdout, "# ingot alert rules from %s (ingot alerts rules); check with: promtool check rules FILE\n", *dir)
	_, err = e.stdout.Write(b)
	return err
}

// runReadings: `ingot readings`, every polled machine's last BMC readings.
func runReadings(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("readings", "readings [-o json|yaml]")
	af := addAPIFlags(fs)
	if _, err := parseWithArgs(e, fs, args); err != nil {
		return helpOK(err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("readings: %w", err)
	}
	rs, err := c.Readings(ctx)
	if err != nil {
		return fmt.Errorf("readings: %w", err)
	}
	return e.render(af.output, rs, func() error {
		t := newCLITable(e.stdout, "MACHINE", "RACK", "BMC", "POWER", "WATTS", "INLET", "GPU MAX", "FANS FAILED", "PSU", "PATH", "POLL")
		for _, r := range rs {
			bmc, psu := "up", "ok"
			if !r.Up {
				bmc = "DOWN: " + r.Error
			}
			if r.PSURedundancyLost {
				psu = "REDUNDANCY LOST"
			}
			power := "off"
			if r.PowerOn {
				power = "on"
			}
			t.row(r.Machine, r.Rack, bmc, power, num(r.Watts, "%.0f W"), num(r.InletC, "%.1f °C"), num(r.GPUMaxC, "%.1f °C"),
				strings.Join(r.FansFailed, ","), psu, r.Path, fmt.Sprintf("%.2fs", r.PollSeconds))
		}
		return t.flush()
	})
}

func num(v float64, f string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(f, v)
}
