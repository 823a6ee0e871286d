package fleet

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Repeats of a security event within the window are counted, not written:
// the first is written as it comes, one summary (repeats, first, last) per
// window while they go on, nothing for a run that went quiet; a different
// message, machine or field is a run of its own, and other kinds are never
// coalesced.
func TestSecurityEventsCoalesced(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	clk := &testClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	s, err := New(Config{Store: st, Recipes: func(string) (*recipe.Recipe, error) { return nil, nil }, Now: clk.now, EventWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := st.CreateMachine(ctx, &machine.Machine{ID: "m-" + n, Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(id, addr string) machine.Event {
		return machine.Event{Machine: id, Kind: "security", Actor: "agentauth", Message: "refused a use from " + addr,
			Fields: map[string]string{"address": addr}}
	}
	for range 50 {
		s.Record(ctx, refused("m-n1", "10.0.0.9"))
		clk.advance(time.Second)
	}
	s.Record(ctx, refused("m-n1", "10.0.0.10"))                                // another address: its own run
	s.Record(ctx, refused("m-n2", "10.0.0.9"))                                 // another machine
	s.Record(ctx, machine.Event{Machine: "m-n1", Kind: "state", Message: "x"}) // not a security event
	s.Record(ctx, machine.Event{Machine: "m-n1", Kind: "state", Message: "x"})
	clk.advance(20 * time.Second) // the first run's window (60 s) ends
	s.Record(ctx, refused("m-n1", "10.0.0.9"))
	for range 3 {
		s.Record(ctx, refused("m-n1", "10.0.0.9")) // the next window
	}
	clk.advance(2 * time.Minute)
	s.FlushEvents(ctx)
	s.FlushEvents(ctx) // nothing left: writes nothing
	clk.advance(2 * time.Minute)
	s.FlushEvents(ctx) // the quiet run is forgotten
	s.Record(ctx, refused("m-n1", "10.0.0.9"))

	evs, _ := st.Events(ctx, "m-n1", 0, 0)
	var got []string
	for _, e := range evs {
		got = append(got, e.Kind+" "+e.Fields["address"]+" repeats="+e.Fields["repeats"])
	}
	want := []string{
		"security 10.0.0.9 repeats=",  // the first, as it came
		"security 10.0.0.10 repeats=", // another run
		"state  repeats=", "state  repeats=",
		"security 10.0.0.9 repeats=49", // the first window's summary, written when the next repeat came after it
		"security 10.0.0.9 repeats=4",  // the next window's, at the flush
		"security 10.0.0.9 repeats=",   // after a quiet window: a new run
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("n1's events (-want +got):\n%s", diff)
	}
	sum := evs[4]
	if !sum.Time.Equal(time.Date(2026, 12, 2, 10, 0, 49, 0, time.UTC)) || sum.Fields["first"] != "2026-12-02T10:00:00Z" ||
		sum.Fields["last"] != "2026-12-02T10:00:49Z" || !strings.Contains(sum.Message, "refused a use from 10.0.0.9 (repeated 49 more times") {
		t.Errorf("summary: %+v", sum)
	}
	if evs[5].Fields["first"] != "2026-12-02T10:00:00Z" || !strings.Contains(evs[5].Message, "53 since the first") {
		t.Errorf("the second summary counts from the run's first event: %+v", evs[5])
	}
	if n2, _ := st.Events(ctx, "m-n2", 0, 0); len(n2) != 1 {
		t.Errorf("n2: %d events, want 1", len(n2))
	}
}

// RunEvents writes a window's summary when it ends, without another event
// coming, and every pending one when it stops. (The fleet's clock decides
// when a window ends; the ticker only looks.)
func TestRunEventsFlushes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	clk := &testClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	s, err := New(Config{Store: st, Recipes: func(string) (*recipe.Recipe, error) { return nil, nil }, Now: clk.now, EventWindow: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st.CreateMachine(ctx, &machine.Machine{ID: "m-n1", Name: "n1"})
	ev := machine.Event{Machine: "m-n1", Kind: "security", Message: "refused"}
	done := make(chan error)
	go func() { done <- s.RunEvents(ctx) }()
	for range 5 {
		s.Record(ctx, ev)
	}
	clk.advance(time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for evs, _ := st.Events(ctx, "m-n1", 0, 0); len(evs) < 2; evs, _ = st.Events(ctx, "m-n1", 0, 0) {
		if time.Now().After(deadline) {
			t.Fatalf("no summary after the window: %+v", evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Record(ctx, ev)
	s.Record(ctx, ev)
	cancel()
	<-done
	evs, _ := st.Events(context.Background(), "m-n1", 0, 0)
	if len(evs) != 3 || evs[1].Fields["repeats"] != "4" || evs[2].Fields["repeats"] != "2" {
		t.Errorf("events: %+v; want the first, a summary of 4 and, at the stop, one of 2", evs)
	}
}
