package main

import (
	"context"
	"fmt"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// runPower: `ingot power report`, through the API.
func runPower(ctx context.Context, e *env, args []string) error {
	if len(args) == 1 && args[0] == "dashboard" {
		_, err := e.stdout.Write(telemetry.Dashboard) // a Grafana dashboard over ingot's metrics
		return err
	}
	if len(args) == 0 || args[0] != "report" {
		fmt.Fprintln(e.stderr, "Usage: ingot power report [--rack R] [--tariff EUR_PER_KWH] [--pue P] [--window 24h] [-o json]\n       ingot power dashboard > ingot-grafana.json")
		return errUsage
	}
	fs := e.flagSet("power report", "power report [--rack R] [--tariff EUR_PER_KWH] [--pue P] [--window 24h] [-o json|yaml]")
	af := addAPIFlags(fs)
	rackName := fs.String("rack", "", "only this rack")
	tariff := fs.Float64("tariff", 0, "currency per kWh (default: each rack's tariff_per_kwh in racks.yaml)")
	pue := fs.Float64("pue", 0, "power usage effectiveness (default: each rack's pue, else 1)")
	window := fs.Duration("window", 0, "the span reported (default 24h): up to 168h from 5-minute means, up to 8784h (a year) from daily summaries")
	if _, err := parseWithArgs(e, fs, args[1:]); err != nil {
		return helpOK(err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("power report: %w", err)
	}
	rep, err := c.PowerReport(ctx, *window, *rackName, *tariff, *pue)
	if err != nil {
		return fmt.Errorf("power report: %w", err)
	}
	return e.render(af.output, rep, func() error { return writePowerReport(e, rep) })
}

func writePowerReport(e *env, rep *wire.PowerReport) error {
	how := "5-minute means of each BMC's readings"
	if d, err := time.ParseDuration(rep.Window); err == nil && d > 7*24*time.Hour {
		how = "daily summaries: the median of daily medians, the p95 of daily p95s"
	}
	fmt.Fprintf(e.stdout, "window %s (%s)\n\n", rep.Window, how)
	t := newCLITable(e.stdout, "MACHINE", "RACK", "RECIPE", "MEDIAN W", "P95 W", "KWH/DAY", "COST/DAY", "COST/GPU-H", "PSU EFF", "FLAG")
	for _, n := range rep.Nodes {
		eff := "-"
		if n.PSUEfficiency > 0 {
			eff = fmt.Sprintf("%.1f%%", n.PSUEfficiency*100)
		}
		gh := "-"
		if n.GPUs > 0 {
			gh = fmt.Sprintf("%.4f", n.CostPerGPUHour)
		}
		t.row(n.Machine, n.Rack, n.Recipe, fmt.Sprintf("%.0f", n.MedianWatts), fmt.Sprintf("%.0f", n.P95Watts),
			fmt.Sprintf("%.1f", n.KWhPerDay), fmt.Sprintf("%.2f", n.CostPerDay), gh, eff, n.Inefficient)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	rt := newCLITable(e.stdout, "RACK", "NODES", "P95 W", "BUDGET W", "HEADROOM W", "KWH/DAY", "COST/DAY", "PUE", "TARIFF")
	for _, r := range rep.Racks {
		budget, head := "not in racks.yaml", "-"
		if r.BudgetWatts > 0 {
			budget, head = fmt.Sprintf("%.0f", r.BudgetWatts), fmt.Sprintf("%.0f", r.Headroom)
			if r.OverBudget {
				head += " OVER BUDGET"
			}
		}
		rt.row(r.Rack, fmt.Sprint(r.Nodes), fmt.Sprintf("%.0f", r.P95Watts), budget, head, fmt.Sprintf("%.1f", r.KWhPerDay),
			fmt.Sprintf("%.2f", r.CostPerDay), fmt.Sprintf("%.2f", r.PUE), fmt.Sprintf("%.3f", r.Tariff))
	}
	return rt.flush()
}
