//go:build integration

package bmc_test

import (
	"context"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// BenchmarkInventory500 reads the inventory of 500 virtual BMCs on
// loopback, each answering every request after 0.7 s, with bounded
// concurrency (128 BMCs at once, 2 requests in flight per BMC), and compares
// it with reading them one at a time. One at a time over 500 BMCs would take
// over an hour, so that side is measured on a sample of sampleN BMCs and
// extrapolated to 500: the metric names say "extrapolated".
//
//	go test -tags integration -run '^$' -bench Inventory500 -benchtime 1x ./pkg/bmc/
func BenchmarkInventory500(b *testing.B) {
	const (
		n        = 500
		parallel = 128
		perBMC   = 2
		sampleN  = 3
		latency  = 700 * time.Millisecond
		mockup   = "supermicro-hgx-b200-partial"
	)
	for range b.N {
		ctx := context.Background()
		fleet, err := vbmc.StartFleet(ctx, n, vbmc.Config{Root: mockupDir(b, mockup), Username: testUser,
			Password: testPassword, Faults: vbmc.Faults{Latency: latency}})
		if err != nil {
			b.Fatal(err)
		}
		cfgs := make([]bmc.Config, n)
		for i, u := range fleet.URLs {
			cfgs[i] = testConfig(u)
			cfgs[i].MaxInFlight = perBMC
		}

		start := time.Now()
		seq := bmc.InventoryAll(ctx, bmc.Dial, cfgs[:sampleN], 1)
		seqPerBMC := time.Since(start) / sampleN
		check(b, seq)

		start = time.Now()
		all := bmc.InventoryAll(ctx, bmc.Dial, cfgs, parallel)
		bounded := time.Since(start)
		check(b, all)

		var maxSeen int64
		for _, bm := range fleet.BMCs {
			st := bm.Stats()
			maxSeen = max(maxSeen, st.MaxInFlight)
			if st.OpenSessions != 0 {
				b.Errorf("a BMC kept %d sessions open", st.OpenSessions)
			}
		}
		fleet.Close()
		if maxSeen > perBMC {
			b.Errorf("a BMC saw %d requests in flight, the per-BMC limit is %d", maxSeen, perBMC)
		}
		seqAll := seqPerBMC * n
		speedup := float64(seqAll) / float64(bounded)
		b.ReportMetric(bounded.Seconds(), "s-bounded-500")
		b.ReportMetric(seqAll.Seconds(), "s-one-at-a-time-500-extrapolated")
		b.ReportMetric(speedup, "speedup-x-extrapolated")
		b.ReportMetric(float64(maxSeen), "max-in-flight-per-BMC")
		if speedup < 50 {
			b.Errorf("speedup %.1fx, goal >= 50x (bounded %v, one at a time %v per BMC)", speedup, bounded, seqPerBMC)
		}
	}
}

func check(b *testing.B, rs []bmc.Result) {
	b.Helper()
	for _, r := range rs {
		if r.Err != nil {
			b.Fatalf("%s: %v", r.Endpoint, r.Err)
		}
		if len(r.Inventory.GPUs) != 2 {
			b.Fatalf("%s: %d GPUs, want 2", r.Endpoint, len(r.Inventory.GPUs))
		}
		if r.Stats.MaxInFlight > 2 {
			b.Fatalf("%s: client sent %d requests at once", r.Endpoint, r.Stats.MaxInFlight)
		}
	}
}
