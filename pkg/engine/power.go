package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// rackPower checks a rollout of ms (recipe r) against racks.yaml before it
// starts: every rack it touches must hold, at load, the machines already
// there (at their recipes' load_watts) plus these at r's, within its
// budget; and no more of them may power on in one wave than the rack's
// start-up margin covers (each at load_watts while it starts). It returns
// the per-rack wave cap to use (perRack, lowered where a margin asks).
// Racks not in racks.yaml, and recipes without load_watts, are not judged.
func (e *Engine) rackPower(ctx context.Context, r *recipe.Recipe, ms []machine.Machine, perRack int) (int, error) {
	if e.racks == nil || r.Power.LoadWatts == 0 {
		return perRack, nil
	}
	racks := map[string]rack.Rack{}
	for _, rk := range e.racks() {
		racks[rk.Name] = rk
	}
	in := map[string]bool{}
	count := map[string]int{}
	for _, m := range ms {
		in[m.ID] = true
		count[m.Rack]++
	}
	all, err := e.machines.List(ctx, store.MachineFilter{})
	if err != nil {
		return perRack, err
	}
	other := map[string]int{} // watts of the machines already in each rack
	for _, m := range all {
		if in[m.ID] || m.Rack == "" || count[m.Rack] == 0 {
			continue
		}
		if or, err := e.recipes(m.Recipe); err == nil && m.Recipe != "" {
			other[m.Rack] += or.Power.LoadWatts
		}
	}
	load := r.Power.LoadWatts
	var over []string
	for name, n := range count {
		rk, ok := racks[name]
		if !ok {
			continue
		}
		need := float64(n*load + other[name])
		if budget := rk.BudgetWatts(); need > budget {
			over = append(over, fmt.Sprintf("rack %s: %d x %d W (%s load_watts) + %d W of the machines already there = %.0f W, over its budget of %.0f W",
				name, n, load, r.Name, other[name], need, budget))
		}
		// Powering on, a machine draws up to its load: the start-up margin
		// bounds how many start together.
		if rk.StartupMarginWatts > 0 {
			if cap := max(1, int(rk.StartupMarginWatts)/load); perRack == 0 || cap < perRack {
				e.log.Info("rollout waves capped by a rack's start-up margin", "rack", name, "per_rack", cap, "margin_watts", rk.StartupMarginWatts, "load_watts", load)
				perRack = cap
			}
		}
	}
	if len(over) > 0 {
		return perRack, fmt.Errorf("%w: %s (racks.yaml: feed x breaker x derating - start-up margin); roll out fewer machines, move some to another rack, or raise the budget in a reviewed change",
			ErrPreflight, strings.Join(over, "; "))
	}
	return perRack, nil
}
