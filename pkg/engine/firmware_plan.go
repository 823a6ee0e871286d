package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// NodePlan is one machine's firmware plan: per component instance what
// runs, what is pinned and what a campaign would do.
type NodePlan struct {
	Machine string
	Name    string
	Recipe  string
	Plan    firmware.Plan
	// Error says why the machine could not be planned (no recipe, its BMC
	// did not answer); Plan is then empty.
	Error string
}

// planParallel bounds the BMCs read at once for a plan.
const planParallel = 16

// FirmwarePlan plans the machines named (recipes stand for their
// machines) from each one's BMC firmware inventory and its last in-band
// inventory, against its recipe's pins. It changes nothing.
func (e *Engine) FirmwarePlan(ctx context.Context, targets []string) ([]NodePlan, error) {
	if e.fw.cfg.Dial == nil {
		return nil, fmt.Errorf("%w: firmware plan: %v", ErrPreflight, errNoFirmware)
	}
	ms, err := e.firmwareMachines(ctx, targets)
	if err != nil {
		return nil, fmt.Errorf("%w: firmware plan: %v", ErrPreflight, err)
	}
	out := make([]NodePlan, len(ms))
	sem := make(chan struct{}, planParallel)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = e.planNode(ctx, &ms[i])
		}()
	}
	wg.Wait()
	return out, nil
}

func (e *Engine) planNode(ctx context.Context, m *machine.Machine) NodePlan {
	np := NodePlan{Machine: m.ID, Name: m.Name, Recipe: m.Recipe}
	if m.Recipe == "" {
		np.Error = "no recipe: its pins say what to flash"
		return np
	}
	r, err := e.recipes(m.Recipe)
	if err != nil {
		np.Error = fmt.Sprintf("recipe %s: %v", m.Recipe, err)
		return np
	}
	if m.BMC.Endpoint == "" {
		np.Error = "no BMC endpoint"
		return np
	}
	b, err := e.fw.cfg.Dial(ctx, m)
	if err != nil {
		np.Error = fmt.Sprintf("BMC %s: %v", m.BMC.Endpoint, err)
		return np
	}
	us, err := b.UpdateService(ctx)
	if err != nil {
		np.Error = "reading the BMC's firmware inventory: " + err.Error()
		return np
	}
	np.Plan = firmware.MakePlan(us.Items, e.lastInventory(ctx, m.ID), r.Firmware)
	return np
}
