package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// A rollout of 20 machines across two racks: refused before it starts when
// one rack would go over its budget at the recipe's load watts (counting
// the machines already there), and otherwise staggered so that no wave
// powers on more machines in a rack than its start-up margin covers.
func TestRolloutRackPower(t *testing.T) {
	s := storetest.Open(t)
	recipes := map[string]*recipe.Recipe{
		"gpu": {Name: "gpu", Power: recipe.Power{LoadWatts: 1000}},
		"cpu": {Name: "cpu", Power: recipe.Power{LoadWatts: 500}},
	}
	// Rack a: 230 V x 80 A x 0.8 - 2500 = 12220 W, holds 10 x 1000 W; its
	// margin covers 2 machines starting at once. Rack b at 63 A: 9092 W,
	// less than 10 x 1000 W + the 2 x 500 W machines already there.
	racks := []rack.Rack{
		{Name: "a", FeedVolts: 230, Phases: 1, BreakerAmps: 80, StartupMarginWatts: 2500},
		{Name: "b", FeedVolts: 230, Phases: 1, BreakerAmps: 63, StartupMarginWatts: 2500},
	}
	source := func(n string) (*recipe.Recipe, error) {
		if r, ok := recipes[n]; ok {
			return r, nil
		}
		return nil, fmt.Errorf("no recipe %s", n)
	}
	e, err := New(Config{Machines: fleetOn(t, s, source), Jobs: s, Leases: s, DialBMC: func(context.Context, *machine.Machine) (BMC, error) { return nil, nil },
		Recipes: func(n string) (*recipe.Recipe, error) {
			return source(n)
		},
		Racks: func() []rack.Rack { return racks }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		rk := "a"
		if i >= 10 {
			rk = "b"
		}
		m := &machine.Machine{Name: fmt.Sprintf("gpu-%02d", i), MACs: []string{fmt.Sprintf("52:54:00:00:01:%02x", i)}, Recipe: "gpu", Rack: rk, State: machine.StateEnrolled}
		if err := s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		s.CreateMachine(ctx, &machine.Machine{Name: fmt.Sprintf("cpu-%d", i), MACs: []string{fmt.Sprintf("52:54:00:00:02:%02x", i)}, Recipe: "cpu", Rack: "b"})
	}
	_, err = e.StartRollout(ctx, RolloutSpec{Recipe: "gpu", Batch: 6}, "test")
	if err == nil || !strings.Contains(err.Error(), "rack b: 10 x 1000 W (gpu load_watts) + 1000 W of the machines already there = 11000 W, over its budget of 9092 W") {
		t.Fatalf("rollout over rack b's budget: %v", err)
	}
	if strings.Contains(err.Error(), "rack a") {
		t.Errorf("rack a named although it fits: %v", err)
	}
	racks[1].BreakerAmps = 80 // 12220 W: fits
	j, err := e.StartRollout(ctx, RolloutSpec{Recipe: "gpu", Batch: 6}, "test")
	if err != nil {
		t.Fatal(err)
	}
	var st RolloutStatus
	json.Unmarshal(j.Status, &st)
	ms, _ := s.ListMachines(ctx, store.MachineFilter{})
	rackOf := map[string]string{}
	for _, m := range ms {
		rackOf[m.ID] = m.Rack
	}
	total := 0
	for i, w := range st.Waves {
		per := map[string]int{}
		for _, id := range w {
			per[rackOf[id]]++
			total++
		}
		for rk, n := range per {
			if n > 2 {
				t.Errorf("wave %d powers on %d machines in rack %s; its start-up margin covers 2", i+1, n, rk)
			}
		}
	}
	if total != 20 {
		t.Errorf("waves hold %d machines, want 20", total)
	}
}

// Power-ons outside rollouts are staggered too: five jobs of one rack,
// whose start-up margin covers two machines at load, start two at a time,
// each pair a settle time after the last; a rack without a margin, or a
// machine without a rack, is not held.
func TestStartsStaggerByRack(t *testing.T) {
	s := storetest.Open(t)
	r := &recipe.Recipe{Name: "gpu", Power: recipe.Power{LoadWatts: 1000}}
	racks := []rack.Rack{{Name: "a", FeedVolts: 230, Phases: 1, BreakerAmps: 80, StartupMarginWatts: 2500}, {Name: "free", FeedVolts: 230, Phases: 1, BreakerAmps: 80}}
	const settle = 300 * time.Millisecond
	recipes := func(string) (*recipe.Recipe, error) { return r, nil }
	e, err := New(Config{Machines: fleetOn(t, s, recipes), Jobs: s, Leases: s, DialBMC: func(context.Context, *machine.Machine) (BMC, error) { return nil, nil },
		Recipes: recipes, Racks: func() []rack.Rack { return racks },
		StartupSettle: settle, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The gate's own instants: a time taken after startSlot returns adds
	// however long the goroutine waited to run (beside stress-ng, two
	// starts measured that way came 299.98 ms apart for a 300 ms settle).
	var mu sync.Mutex
	var starts []time.Time
	e.gate.granted = func(_ string, at time.Time) {
		mu.Lock()
		starts = append(starts, at)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range 5 {
		m := &machine.Machine{Name: fmt.Sprintf("gpu-%d", i), MACs: []string{fmt.Sprintf("52:54:00:00:03:%02x", i)}, Recipe: "gpu", Rack: "a"}
		if err := s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.startSlot(ctx, m, r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	e.gate.granted = nil
	if len(starts) != 5 {
		t.Fatalf("the gate counted %d starts in rack a, want 5", len(starts))
	}
	if !slices.IsSortedFunc(starts, func(a, b time.Time) int { return a.Compare(b) }) {
		t.Errorf("the gate recorded starts out of order: %v", starts)
	}
	for i := 2; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-2]); gap < settle {
			t.Errorf("starts %d and %d in rack a %s apart; its margin holds 2 within %s", i-1, i+1, gap, settle)
		}
	}
	if total := starts[4].Sub(starts[0]); total < 2*settle {
		t.Errorf("5 starts took %s, want at least 2 settle times (%s)", total, 2*settle)
	}
	waits := 0
	ms, _ := s.ListMachines(ctx, store.MachineFilter{})
	for _, m := range ms {
		evs, _ := s.Events(ctx, m.ID, 0, 0)
		for _, ev := range evs {
			if ev.Kind == "power.stagger" {
				waits++
			}
		}
	}
	if waits != 3 {
		t.Errorf("%d machines told they wait for the margin, want 3", waits)
	}
	start := time.Now()
	for _, rk := range []string{"free", ""} {
		for range 5 {
			if err := e.startSlot(ctx, &machine.Machine{Rack: rk}, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if took := time.Since(start); took > settle {
		t.Errorf("starts without a margin waited %s", took)
	}
}
