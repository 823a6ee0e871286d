package telemetry

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// HoursPerMonth is an average month (8766 h a year / 12).
const HoursPerMonth = 730.5

// CapacityPlan is what N more servers of a class would draw and cost.
type CapacityPlan struct {
	Recipe string
	Count  int
	// LoadWatts is one server at load: the p95 of the class's measured
	// 5-minute means (Measured, over Nodes machines), else the recipe's
	// power.load_watts (an estimate).
	LoadWatts float64
	IdleWatts float64 // measured minimum, else the recipe's idle_watts, else 0
	Measured  bool
	Nodes     int
	// Utilization blends idle and load: watts = idle + U x (load - idle).
	Utilization     float64
	KWhPerMonth     float64
	CostPerMonth    float64
	CostPerGPUHour  float64
	PUE, Tariff     float64
	Racks           []RackRoom // racks with room, most room first
	PlannedAtLoadKW float64    // Count x LoadWatts / 1000: what the racks must hold
}

// RackRoom is how many more servers of the class a rack holds at load.
type RackRoom struct {
	Rack      string
	HeadroomW float64
	Fits      int
}

// PlanCapacity plans count more servers of recipe r at utilization u
// (0-1), from the class's measured draw over the last week where there
// is one.
func (s *Service) PlanCapacity(ctx context.Context, r *recipe.Recipe, count int, u, tariff, pue float64) (CapacityPlan, error) {
	if count <= 0 || u <= 0 || u > 1 {
		return CapacityPlan{}, fmt.Errorf("count %d, utilization %g: expected a positive count and a utilization in (0, 1]", count, u)
	}
	rep, err := s.Report(ctx, Retention, "", tariff, pue)
	if err != nil {
		return CapacityPlan{}, err
	}
	p := CapacityPlan{Recipe: r.Name, Count: count, Utilization: u, PUE: first(pue, 1), Tariff: tariff}
	var loads, idles []float64
	ms, err := s.cfg.Machines(ctx)
	if err != nil {
		return p, err
	}
	byName := map[string]machine.Machine{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	to := s.cfg.Now()
	for _, n := range rep.Nodes {
		if n.Recipe != r.Name || n.Buckets == 0 {
			continue
		}
		loads = append(loads, n.P95W)
		lo := 0.0
		for _, b := range s.agg.Window(byName[n.Machine].ID, to.Add(-Retention), to) {
			if w := b.MeanWatts(); w > 0 && (lo == 0 || w < lo) {
				lo = w
			}
		}
		idles = append(idles, lo)
	}
	if len(loads) > 0 {
		p.Measured, p.Nodes = true, len(loads)
		p.LoadWatts, p.IdleWatts = quantile(loads, 0.5), quantile(idles, 0.5)
	} else {
		p.LoadWatts, p.IdleWatts = float64(r.Power.LoadWatts), float64(r.Power.IdleWatts)
	}
	if p.LoadWatts == 0 {
		return p, fmt.Errorf("recipe %s: no machine of the class has been measured and it sets no power.load_watts", r.Name)
	}
	w := p.IdleWatts + u*(p.LoadWatts-p.IdleWatts)
	p.KWhPerMonth = float64(count) * w * HoursPerMonth / 1000
	p.CostPerMonth = p.KWhPerMonth * p.PUE * tariff
	gpus := 0
	for _, g := range r.Hardware.GPUs {
		gpus += g.Count
	}
	if gpus > 0 {
		p.CostPerGPUHour = w / 1000 * p.PUE * tariff / float64(gpus)
	}
	p.PlannedAtLoadKW = float64(count) * p.LoadWatts / 1000
	for _, rk := range rep.Racks {
		if rk.BudgetW <= 0 || rk.HeadroomW < p.LoadWatts {
			continue
		}
		p.Racks = append(p.Racks, RackRoom{Rack: rk.Rack, HeadroomW: rk.HeadroomW, Fits: int(rk.HeadroomW / p.LoadWatts)})
	}
	// Racks in racks.yaml with no machine yet have their whole budget.
	if s.cfg.Racks != nil {
		for _, rk := range s.cfg.Racks() {
			if !slices.ContainsFunc(rep.Racks, func(x RackPower) bool { return x.Rack == rk.Name }) && rk.BudgetWatts() >= p.LoadWatts {
				p.Racks = append(p.Racks, RackRoom{Rack: rk.Name, HeadroomW: rk.BudgetWatts(), Fits: int(rk.BudgetWatts() / p.LoadWatts)})
			}
		}
	}
	sort.Slice(p.Racks, func(i, j int) bool { return p.Racks[i].HeadroomW > p.Racks[j].HeadroomW })
	return p, nil
}
