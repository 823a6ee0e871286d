package web

import (
	"context"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The fleet page judges every machine's latest inventory (GPUs, firmware
// against the pins): reading and decoding 500 of them is most of its
// cost. The facts cache keeps what the grid needs of each machine's
// inventory for factsTTL, and drops an entry at once when the machine
// record changes (a job, a state, a new recipe) or its recipe does.
// A new inventory with no change to the record (a scheduled BMC
// inspection) shows on the grid within factsTTL; a machine's own page
// always reads the latest.
const factsTTL = 30 * time.Second

// inventoryFacts is what the grid keeps of one inventory.
type inventoryFacts struct {
	serial    string
	gpus      []machine.GPU
	drift     string
	driftNote string
}

type factsEntry struct {
	at      time.Time
	updated time.Time // the machine record's, when read
	digest  string    // the recipe's
	ok      bool      // an inventory exists
	f       inventoryFacts
}

type factsCache struct {
	mu sync.Mutex
	by map[string]factsEntry
}

func newFactsCache() *factsCache { return &factsCache{by: map[string]factsEntry{}} }

// get returns a machine's inventory facts, read again when stale.
func (c *factsCache) get(ctx context.Context, fl *fleet.Service, m machine.Machine, r *recipe.Recipe, now time.Time) (inventoryFacts, bool) {
	digest := ""
	if r != nil {
		digest = r.Digest()
	}
	c.mu.Lock()
	e, hit := c.by[m.ID]
	c.mu.Unlock()
	if hit && now.Sub(e.at) < factsTTL && e.updated.Equal(m.Updated) && e.digest == digest {
		return e.f, e.ok
	}
	e = factsEntry{at: now, updated: m.Updated, digest: digest}
	if snap, err := fl.Inventory(ctx, m.ID, 0); err == nil {
		inv := snap.Inventory
		e.ok = true
		e.f = inventoryFacts{serial: inv.System.Serial, gpus: inv.GPUs, drift: "none", driftNote: "no recipe"}
		if r != nil {
			e.f.drift, e.f.driftNote = driftOf(firmware.MakePlan(nil, inv, r.Firmware))
		}
	}
	c.mu.Lock()
	c.by[m.ID] = e
	c.mu.Unlock()
	return e.f, e.ok
}

// warm reads the stale entries of ms (recipes[i] is ms[i]'s recipe) with a
// few readers at once: the store serves reads side by side, and a cold
// fleet page then waits for the slowest quarter, not the sum.
func (c *factsCache) warm(ctx context.Context, fl *fleet.Service, ms []machine.Machine, recipes []*recipe.Recipe, now time.Time) {
	const readers = 4
	next := make(chan int)
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			for i := range next {
				c.get(ctx, fl, ms[i], recipes[i], now)
			}
		})
	}
	for i := range ms {
		next <- i
	}
	close(next)
	wg.Wait()
}
