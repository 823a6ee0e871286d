package telemetry

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Capacity from the class's measured draw, checked by hand; from the
// recipe's load_watts (an estimate) when nothing is measured.
func TestPlanCapacity(t *testing.T) {
	now := t0.Add(6 * time.Hour)
	ms := []machine.Machine{
		{ID: "m-1", Name: "a", Recipe: "h100", Rack: "r1", BMC: machine.BMC{Endpoint: "x"}},
		{ID: "m-2", Name: "b", Recipe: "h100", Rack: "r1", BMC: machine.BMC{Endpoint: "y"}},
	}
	h100 := &recipe.Recipe{Name: "h100", Power: recipe.Power{LoadWatts: 10200, IdleWatts: 1500},
		Hardware: recipe.Hardware{GPUs: []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 8}}}}
	svc, _ := New(Config{Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
		Read: func(context.Context, *machine.Machine) Sample { return Sample{} }, Now: func() time.Time { return now },
		Recipes: func(string) (*recipe.Recipe, error) { return h100, nil },
		Racks: func() []rack.Rack {
			return []rack.Rack{{Name: "r1", FeedVolts: 415, Phases: 3, BreakerAmps: 32, StartupMarginWatts: 2000}, {Name: "r2", FeedVolts: 230, Phases: 1, BreakerAmps: 16}}
		}})
	// Each machine: 2000 W idle for an hour, then 8000 W for two.
	for _, id := range []string{"m-1", "m-2"} {
		for m := 0; m < 180; m += 5 {
			w := 2000.0
			if m >= 60 {
				w = 8000
			}
			svc.agg.Add(Sample{Machine: id, Up: true, Time: t0.Add(time.Duration(m) * time.Minute), Watts: w})
		}
	}
	p, err := svc.PlanCapacity(context.Background(), h100, 10, 0.7, 0.2, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	// Load 8000 (p95), idle 2000 (the lowest 5-minute mean): at 70 %,
	// 2000 + 0.7 x 6000 = 6200 W a server; 10 x 6.2 kW x 730.5 h =
	// 45,291 kWh a month; x 1.3 x 0.2 = 11,775.66; per GPU-hour
	// 6.2 x 1.3 x 0.2 / 8 = 0.2015.
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-3*math.Max(1, want) {
			t.Errorf("%s = %.4f, want %.4f", what, got, want)
		}
	}
	if !p.Measured || p.Nodes != 2 {
		t.Errorf("measured %v from %d nodes", p.Measured, p.Nodes)
	}
	near("load", p.LoadWatts, 8000)
	near("idle", p.IdleWatts, 2000)
	near("kWh/month", p.KWhPerMonth, 45291)
	near("cost/month", p.CostPerMonth, 11775.66)
	near("cost per GPU-hour", p.CostPerGPUHour, 0.2015)
	// r1: 16400.9 W budget - 16000 W p95 (2 x 8000) = 400.9: no room for
	// one more; r2 (no machines, 2944 W) holds none either at 8000 W.
	if len(p.Racks) != 0 {
		t.Errorf("racks with room: %+v", p.Racks)
	}
	// Nothing measured for another class: the recipe's numbers, an estimate.
	l40 := &recipe.Recipe{Name: "l40s", Power: recipe.Power{LoadWatts: 2000, IdleWatts: 400}}
	p, err = svc.PlanCapacity(context.Background(), l40, 2, 1, 0.1, 1)
	if err != nil || p.Measured || p.LoadWatts != 2000 || len(p.Racks) != 1 || p.Racks[0].Rack != "r2" || p.Racks[0].Fits != 1 {
		t.Errorf("estimate: %+v, %v", p, err)
	}
}
