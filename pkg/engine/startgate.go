package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// startGate staggers power-ons by rack, for every job that powers a
// machine on (provision, reimage, drill, the hand-off into the installed
// OS), not only rollout waves: a machine starting draws up to its recipe's
// load_watts while it POSTs (fans at full, GPUs initialising), so no more
// machines of one rack start within settle of each other than the rack's
// start-up margin covers. Ten `ingot reimage` commands typed at once then
// power on two at a time where the margin holds two.
type startGate struct {
	mu     sync.Mutex
	starts map[string][]time.Time // rack -> power-ons within settle
	settle time.Duration
	// granted, when set, is told each start as it is counted (under the
	// lock, at the instant recorded): tests judge the stagger by the
	// gate's own instants, not by when a goroutine ran after.
	granted func(rack string, at time.Time)
}

// startSlot waits until m's rack has room for one more start, then counts
// m's. Machines without a rack, racks not in racks.yaml or without a
// margin, and recipes without load_watts are not staggered.
func (e *Engine) startSlot(ctx context.Context, m *machine.Machine, r *recipe.Recipe) error {
	if e.racks == nil || m.Rack == "" || r == nil || r.Power.LoadWatts <= 0 {
		return nil
	}
	var margin float64
	for _, rk := range e.racks() {
		if rk.Name == m.Rack {
			margin = rk.StartupMarginWatts
		}
	}
	if margin <= 0 {
		return nil
	}
	slots := max(1, int(margin)/r.Power.LoadWatts)
	told := false
	for {
		wait, ok := e.gate.take(m.Rack, slots, e.now)
		if ok {
			return nil
		}
		if !told {
			e.event(ctx, m.ID, "power.stagger", fmt.Sprintf("waiting up to %s: rack %s's start-up margin (%.0f W) covers %d machine(s) starting at %d W at once",
				wait.Round(time.Second), m.Rack, margin, slots, r.Power.LoadWatts), nil)
			told = true
		}
		t := time.NewTimer(min(wait, e.tick))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for rack %s's start-up margin: %w", m.Rack, ctx.Err())
		case <-t.C:
		}
	}
}

// take counts a start in rack when fewer than slots started within settle
// of now; else it says how long until the oldest of them settles. The
// clock is read under the lock: a start is recorded at the instant it is
// granted, in order (read before, a caller held up on the lock recorded an
// earlier instant than the start it made).
func (g *startGate) take(rack string, slots int, clock func() time.Time) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := clock()
	if g.starts == nil {
		g.starts = map[string][]time.Time{}
	}
	kept := g.starts[rack][:0]
	for _, t := range g.starts[rack] {
		if now.Sub(t) < g.settle {
			kept = append(kept, t)
		}
	}
	g.starts[rack] = kept
	if len(kept) >= slots {
		return g.settle - now.Sub(kept[0]), false
	}
	g.starts[rack] = append(kept, now)
	if g.granted != nil {
		g.granted(rack, now)
	}
	return 0, true
}
