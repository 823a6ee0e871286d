package main

import (
	"context"
	"fmt"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// runPlan: `ingot plan capacity`, through the API.
func runPlan(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "capacity" {
		fmt.Fprintln(e.stderr, "Usage: ingot plan capacity --recipe R --count N [--tariff EUR_PER_KWH] [--utilization 0.8] [--pue P]")
		return errUsage
	}
	fs := e.flagSet("plan capacity", "plan capacity --recipe R --count N [--tariff T] [--utilization U] [--pue P] [-o json|yaml]")
	af := addAPIFlags(fs)
	rcp := fs.String("recipe", "", "the server class (required)")
	count := fs.Int("count", 0, "how many more servers (required)")
	tariff := fs.Float64("tariff", 0, "currency per kWh")
	util := fs.Float64("utilization", 0, "share of the time at load, 0-1 (default 0.8: conservative for a training fleet)")
	pue := fs.Float64("pue", 0, "power usage effectiveness (default 1)")
	if _, err := parseWithArgs(e, fs, args[1:]); err != nil {
		return helpOK(err)
	}
	if *rcp == "" || *count <= 0 {
		fs.Usage()
		return errUsage
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("plan capacity: %w", err)
	}
	p, err := c.PlanCapacity(ctx, *rcp, *count, *util, *tariff, *pue)
	if err != nil {
		return fmt.Errorf("plan capacity: %w", err)
	}
	return e.render(af.output, p, func() error { return writeCapacityPlan(e, p) })
}

func writeCapacityPlan(e *env, p *wire.CapacityPlan) error {
	source := fmt.Sprintf("measured on %d %s machines over the last week", p.Nodes, p.Recipe)
	if !p.Measured {
		source = "ESTIMATE from the recipe's power.load_watts and idle_watts: no machine of the class has been measured yet"
	}
	fmt.Fprintf(e.stdout, "%d more %s: %.0f W each at load, %.0f W idle (%s)\n", p.Count, p.Recipe, p.LoadWatts, p.IdleWatts, source)
	fmt.Fprintf(e.stdout, "at %.0f %% utilization: %.0f kWh a month, %.2f a month (PUE %.2f, tariff %.3f), %.4f per GPU-hour\n",
		p.Utilization*100, p.KWhPerMonth, p.CostPerMonth, p.PUE, p.Tariff, p.CostPerGPUHour)
	fmt.Fprintf(e.stdout, "the racks must hold %.1f kW at load\n", p.PlannedAtLoadKW)
	if len(p.Racks) == 0 {
		fmt.Fprintln(e.stdout, "no rack in racks.yaml has room for one at load")
		return nil
	}
	t := newCLITable(e.stdout, "RACK", "HEADROOM W", "FITS")
	for _, r := range p.Racks {
		t.row(r.Rack, fmt.Sprintf("%.0f", r.Headroom), fmt.Sprint(r.Fits))
	}
	return t.flush()
}
