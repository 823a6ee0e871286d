//go:build integration

package telemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// BenchmarkStoreGrowth500Etcd measures what 500 machines write to an etcd
// store a day, against etcd's default 2 GiB quota: every 5 simulated
// minutes a sample per machine and telemetry's flush (as Run makes it);
// every simulated day an inventory refresh per machine (a 17.7 KiB
// inventory of an 8-GPU node, pkg/bmc's HPE Cray EX235n fixture) and 5
// events per machine (SEL entries, inspections, alerts); every simulated
// hour the leader's compaction (to the revision an hour before) and every
// 6 hours its defragmentation (pkg/scaleout's defaults). It reports, per
// day, the live bytes under the prefix by kind, the database file, its
// peak between compactions, and extrapolates the steady state a year on
// (power days kept 7 days, 20 inventories a machine, a year of daily
// summaries, events kept up to store.Options.MaxEvents a machine: a
// year at this rate stays under that cap, so the projection keeps them
// all). One member: the file and its growth are each member's.
//
//	go test -tags integration -run '^$' -bench 'StoreGrowth500Etcd' -benchtime 1x -v ./pkg/telemetry/
//
// INGOT_BENCH_DAYS sets the simulated days (default 2, about 6 minutes on
// this project's 2-core machine).
func BenchmarkStoreGrowth500Etcd(b *testing.B) {
	const n = 500
	days := 2
	if v := os.Getenv("INGOT_BENCH_DAYS"); v != "" {
		fmt.Sscan(v, &days)
	}
	inv := benchInventory(b)
	for range b.N {
		c := etcdtest.Single(b)
		ctx := context.Background()
		st, err := etcd.OpenURL(ctx, c.URL("growth"), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		clk := &simClock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
		ms := make([]machine.Machine, n)
		for i := range ms {
			ms[i] = machine.Machine{Name: fmt.Sprintf("gpu-%03d", i), Rack: fmt.Sprintf("r%02d", i/40), State: machine.StateReady,
				MACs: []string{fmt.Sprintf("52:54:01:00:%02x:%02x", i/256, i%256)}, BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.0.%d.%d", i/250, i%250+1)}}
			if err := st.CreateMachine(ctx, &ms[i]); err != nil {
				b.Fatal(err)
			}
		}
		svc, err := telemetry.New(telemetry.Config{Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
			Read: simRead(clk), Interval: time.Hour, Now: clk.Now, Store: noReload{st}})
		if err != nil {
			b.Fatal(err)
		}
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		g := growth{b: b, st: st, cli: c.Client(b)}
		mark := g.status().Revision
		for d := range days {
			for step := range 288 {
				clk.add(telemetry.BucketSize)
				if err := svc.PollAll(ctx); err != nil {
					b.Fatal(err)
				}
				if err := svc.Run(stopped); err != nil { // flushes on the way out
					b.Fatal(err)
				}
				if step%12 == 11 { // an hour: the leader compacts to the revision an hour before
					g.peak = max(g.peak, g.status().DBSize)
					now := g.status().Revision
					if err := st.Compact(ctx, mark); err != nil {
						b.Fatal(err)
					}
					mark = now
				}
				if step%72 == 71 {
					if _, err := st.Defragment(ctx, 64<<20); err != nil {
						b.Fatal(err)
					}
				}
			}
			g.day(ctx, ms, inv, clk.Now())
			if _, err := st.Defragment(ctx, 0); err != nil {
				b.Fatal(err)
			}
			g.measure(d + 1)
		}
		g.report(days)
	}
}

// benchInventory is an 8-GPU node's inventory as its BMC gives it.
func benchInventory(b *testing.B) machine.Inventory {
	raw, err := os.ReadFile("../bmc/testdata/inventory/hpe-cray-ex235n-a100.json")
	if err != nil {
		b.Fatal(err)
	}
	var inv machine.Inventory
	if err := json.Unmarshal(raw, &inv); err != nil {
		b.Fatal(err)
	}
	return inv
}

// growth collects the benchmark's measurements.
type growth struct {
	b     *testing.B
	st    *etcd.Store
	cli   *clientv3.Client
	peak  int64
	lines []string
	last  map[string]kindSize
	file  []float64
}

type kindSize struct{ keys, bytes int64 }

func (g *growth) status() etcd.Status {
	st := g.st.ClusterStatus(context.Background())
	if st.Err != nil && st.Reachable == 0 {
		g.b.Fatal(st.Err)
	}
	return st
}

// day is a simulated day's inventory refresh and events.
func (g *growth) day(ctx context.Context, ms []machine.Machine, inv machine.Inventory, now time.Time) {
	inv.Taken = now
	for _, m := range ms {
		if _, err := g.st.PutInventory(ctx, m.ID, inv); err != nil {
			g.b.Fatal(err)
		}
		for k, kind := range []string{"bmc.sel", "inspect", "alert", "bmc.sel", "rotate"} {
			ev := machine.Event{Machine: m.ID, Kind: kind, Actor: "telemetry", Time: now,
				Message: fmt.Sprintf("BMC event log: 2 new entries: Drive 3 predictive failure (entry %d); Fan 2 speed below threshold", k)}
			if _, err := g.st.AppendEvent(ctx, ev); err != nil {
				g.b.Fatal(err)
			}
		}
	}
}

// sizes sums the live keys and bytes under the prefix by record kind.
func (g *growth) sizes() map[string]kindSize {
	out := map[string]kindSize{}
	resp, err := g.cli.Get(context.Background(), g.st.Prefix(), clientv3.WithPrefix())
	if err != nil {
		g.b.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		kind, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), g.st.Prefix()), "/")
		s := out[kind]
		s.keys++
		s.bytes += int64(len(kv.Key) + len(kv.Value))
		out[kind] = s
	}
	return out
}

func (g *growth) measure(d int) {
	sz, st := g.sizes(), g.status()
	g.last = sz
	var live int64
	var parts []string
	for _, k := range []string{"tp", "ts", "tn", "inv", "ev", "m", "k"} {
		live += sz[k].bytes
		parts = append(parts, fmt.Sprintf("%s %.1f MiB/%d keys", k, mib(sz[k].bytes), sz[k].keys))
	}
	g.file = append(g.file, mib(st.DBSize))
	g.lines = append(g.lines, fmt.Sprintf("day %d: live %.1f MiB (%s); file %.1f MiB after defragmentation, peak %.1f MiB between compactions; %.1f%% of 2 GiB",
		d, mib(live), strings.Join(parts, ", "), mib(st.DBSize), mib(g.peak), 100*float64(g.peak)/float64(2<<30)))
	progress("%s", g.lines[len(g.lines)-1])
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// report extrapolates a year from the per-record sizes measured.
func (g *growth) report(days int) {
	per := func(k string) float64 {
		if g.last[k].keys == 0 {
			return 0
		}
		return float64(g.last[k].bytes) / float64(g.last[k].keys)
	}
	const machines = 500
	// A whole day's record: 288 buckets of 38 bytes and its key (the days
	// measured are partly filled at each flush).
	fullDay := max(per("tp"), 288*38+48)
	year := machines * (8*fullDay + 365*per("ts") + per("tn") + 20*per("inv") + 365*5*per("ev") + 2*per("invseq") + per("m") + 4*per("k"))
	history := float64(g.peak) - float64(g.last["tp"].bytes+g.last["ts"].bytes+g.last["tn"].bytes+g.last["inv"].bytes+g.last["ev"].bytes)
	for _, l := range g.lines {
		g.b.Log(l)
	}
	g.b.Logf("bytes a record: power day %.0f, summary %.0f, telemetry state %.0f, inventory %.0f, event %.0f", per("tp"), per("ts"), per("tn"), per("inv"), per("ev"))
	g.b.Logf("a year on (power days of %.0f bytes plateau at 8 days, inventories at 20, a year of summaries, 5 events a machine a day): live %.0f MiB + an hour of history and free pages %.0f MiB = %.1f%% of the 2 GiB quota; events grow %.1f MiB a year",
		fullDay, year/(1<<20), history/(1<<20), 100*(year+history)/float64(2<<30), machines*365*5*per("ev")/(1<<20))
	g.b.ReportMetric(g.file[len(g.file)-1], "file-MiB-after-defrag")
	g.b.ReportMetric(mib(g.peak), "peak-MiB-between-compactions")
	g.b.ReportMetric(year/(1<<20), "live-MiB-a-year-on")
	g.b.ReportMetric(100*(year+history)/float64(2<<30), "quota-%-a-year-on")
	if days > 1 {
		g.b.ReportMetric(g.file[days-1]-g.file[days-2], "file-growth-MiB-last-day")
	}
}
