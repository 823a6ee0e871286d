package bmc

import (
	"context"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Result is one BMC's inventory read by InventoryAll.
type Result struct {
	Endpoint  string
	Inventory machine.Inventory
	Err       error
	Stats     Stats         // requests and the most in flight, counted in the client's RoundTripper
	Took      time.Duration // dial, read and logout
}

// InventoryAll reads the inventory of every BMC in cfgs, at most parallel
// BMCs at once (each BMC still limited to its own MaxInFlight requests).
// Results are in cfgs order; one BMC's failure is its Result.Err only.
func InventoryAll(ctx context.Context, dial DialFunc, cfgs []Config, parallel int) []Result {
	if dial == nil {
		dial = Dial
	}
	if parallel < 1 {
		parallel = 1
	}
	out := make([]Result, len(cfgs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(parallel, len(cfgs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = inventoryOne(ctx, dial, cfgs[i])
			}
		}()
	}
	for i := range cfgs {
		select {
		case next <- i:
		case <-ctx.Done():
			out[i] = Result{Endpoint: cfgs[i].Endpoint, Err: wrapErr(cfgs[i].Endpoint, "reading inventory", ctx.Err())}
		}
	}
	close(next)
	wg.Wait()
	return out
}

func inventoryOne(ctx context.Context, dial DialFunc, cfg Config) Result {
	start := time.Now()
	r := Result{Endpoint: cfg.Endpoint}
	c, err := dial(ctx, cfg)
	if err != nil {
		r.Err, r.Took = err, time.Since(start)
		return r
	}
	r.Inventory, r.Err = c.Inventory(ctx)
	r.Inventory.Taken = time.Now().UTC()
	if err := c.Close(); err != nil && r.Err == nil {
		r.Err = err
	}
	r.Stats, r.Took = c.Stats(), time.Since(start)
	return r
}
