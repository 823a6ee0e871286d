package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// A restart keeps a firing alert firing (it is not delivered again), the
// last sample and the aggregates; a machine removed meanwhile is forgotten.
func TestStateSurvivesRestart(t *testing.T) {
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	clk := &clock{t: t0}
	ms := []machine.Machine{{ID: "m-1", Name: "a", State: machine.StateReady, BMC: machine.BMC{Endpoint: "x"}}}
	fired := 0
	mk := func() *Service {
		s, err := New(Config{Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
			Read: func(context.Context, *machine.Machine) Sample {
				return Sample{Up: true, PowerOn: true, Watts: 700, InletC: 40, MemCorrectable: -1, MemUncorrectable: -1}
			},
			Recipes: func(string) (*recipe.Recipe, error) { return nil, nil },
			Event:   func(context.Context, string, string) { fired++ },
			Store:   st, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	s1 := mk()
	for range 7 {
		s1.PollAll(ctx)
		clk.Add(time.Minute)
	}
	if fired != 1 {
		t.Fatalf("%d transitions before the restart, want 1 (inlet firing)", fired)
	}
	if err := s1.flush(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := mk()
	if err := s2.load(ctx); err != nil {
		t.Fatal(err)
	}
	s2.PollAll(ctx)
	if fired != 1 {
		t.Errorf("the restart delivered the firing alert again (%d transitions)", fired)
	}
	if a := s2.Alerts(); len(a) != 1 || a[0].State != Firing || !a[0].Since.Equal(t0) {
		t.Errorf("alerts after the restart: %+v", a)
	}
	if bs := s2.Aggregates().Window("m-1", t0, clk.Now().Add(time.Minute)); len(bs) != 2 || bs[0].MeanWatts() != 700 {
		t.Errorf("aggregates after the restart: %d buckets %+v", len(bs), bs)
	}
	ms = nil
	s2.PollAll(ctx)
	if recs, _ := st.ListNodeTelemetry(ctx); len(recs) != 0 {
		t.Errorf("a removed machine's state is still stored: %+v", recs)
	}
}

func TestBucketEncoding(t *testing.T) {
	in := []Bucket{{start: 1764662400, n: 5, nw: 4, npw: 3, sumW: 4000.5, maxW: 1100, maxInlet: 31.5, maxGPU: 77, psuIn: 3300, psuOut: 3100}}
	out, err := decodeBuckets(encodeBuckets(in))
	if err != nil || len(out) != 1 || out[0] != in[0] {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	if _, err := decodeBuckets(make([]byte, bucketBytes+1)); err == nil {
		t.Error("a damaged record decoded")
	}
}

// FuzzDecodeBuckets: a damaged stored day (or daily summary) decodes or is
// refused, never a panic, and what decodes encodes back to the same bytes.
func FuzzDecodeBuckets(f *testing.F) {
	f.Add(encodeBuckets([]Bucket{{start: 1764662400, n: 1, nw: 1, sumW: 100, maxW: 100}}))
	f.Add([]byte{1, 2, 3})
	f.Add(encodeSummary(Summary{day: 1764633600, buckets: 288, meanW: 700, p50W: 690, p95W: 900, maxW: 950}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if sm, err := decodeSummary(b); err == nil {
			if got := encodeSummary(sm); string(got) != string(b) {
				t.Fatalf("summary round trip changed %x to %x", b, got)
			}
		}
		bs, err := decodeBuckets(b)
		if err != nil {
			return
		}
		if got := encodeBuckets(bs); string(got) != string(b) {
			t.Fatalf("round trip changed %x to %x", b, got)
		}
	})
}

// countingStore counts the power day records each flush writes.
type countingStore struct {
	store.TelemetryStore
	puts map[string]int // day -> records written
}

func (c *countingStore) PutTelemetry(ctx context.Context, nodes []store.NodeTelemetry, days []store.PowerDay) error {
	for _, d := range days {
		c.puts[d.Day]++
	}
	return c.TelemetryStore.PutTelemetry(ctx, nodes, days)
}

// A finished day's record is written once more after midnight (its last
// buckets), not at every flush: only today's changes.
func TestFlushWritesAFinishedDayOnce(t *testing.T) {
	st := &countingStore{TelemetryStore: storetest.OpenWith(t, store.Options{Timeout: time.Second}), puts: map[string]int{}}
	clk := &clock{t: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}
	ms := []machine.Machine{{ID: "m-1", Name: "a", State: machine.StateReady, BMC: machine.BMC{Endpoint: "x"}}}
	s, err := New(Config{Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
		Read: func(context.Context, *machine.Machine) Sample {
			return Sample{Up: true, PowerOn: true, Watts: 500, MemCorrectable: -1, MemUncorrectable: -1}
		},
		Store: st, Now: clk.Now, Interval: BucketSize})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 48 { // 22:00 to 02:00, a flush every 5 minutes
		s.PollAll(ctx)
		if err := s.flush(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Add(BucketSize)
	}
	if st.puts["2026-12-01"] != 24+1 || st.puts["2026-12-02"] != 24 {
		t.Errorf("records written: %v; want 2026-12-01 at its 24 flushes and once after midnight, 2026-12-02 at each of its 24", st.puts)
	}
}
