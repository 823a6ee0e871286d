package telemetry

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// TestSharedPolling: two instances on one store split 10 machines (even
// ones to A, odd to B): each BMC is read by one instance only, each
// alert transition is delivered once, and after a flush and a sync both
// instances list every machine's last sample and alerts and report the
// power of all ten. When B leaves (A takes every machine), B's machines
// are handed over: A keeps their firing alert firing (not delivered
// again) and polls them from then on.
func TestSharedPolling(t *testing.T) {
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	clk := &clock{t: t0}
	var ms []machine.Machine
	for i := range 10 {
		ms = append(ms, machine.Machine{ID: fmt.Sprintf("m-%d", i), Name: fmt.Sprintf("gpu-%02d", i), State: machine.StateReady,
			BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.0.0.%d", i)}})
	}
	var mu sync.Mutex
	reads, events := map[string]map[string]int{}, map[string]int{}
	var bLeft bool
	mk := func(name string, mine func(string) bool) *Service {
		s, err := New(Config{Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
			Read: func(_ context.Context, m *machine.Machine) Sample {
				mu.Lock()
				defer mu.Unlock()
				if reads[m.ID] == nil {
					reads[m.ID] = map[string]int{}
				}
				reads[m.ID][name]++
				return Sample{Up: true, PowerOn: true, Watts: 500, InletC: 40, MemCorrectable: -1, MemUncorrectable: -1}
			},
			Recipes: func(string) (*recipe.Recipe, error) { return nil, nil },
			Event:   func(_ context.Context, id, _ string) { mu.Lock(); events[id]++; mu.Unlock() },
			Store:   st, Now: clk.Now, Mine: mine})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	even := func(id string) bool { return (id[len(id)-1]-'0')%2 == 0 }
	a := mk("a", func(id string) bool { return even(id) || bLeft })
	b := mk("b", func(id string) bool { return !even(id) && !bLeft })
	ctx := context.Background()
	round := func(ss ...*Service) {
		t.Helper()
		for _, s := range ss {
			if err := s.PollAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(time.Minute)
	}
	for range 7 {
		round(a, b)
	}
	for id, by := range reads {
		if len(by) != 1 {
			t.Errorf("machine %s was read by %v; want one instance", id, by)
		}
	}
	for _, s := range []*Service{a, b} {
		if err := s.flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*Service{a, b} {
		if err := s.syncRemote(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(s.Last()); n != 10 {
			t.Errorf("an instance lists %d machines' last samples; want all 10", n)
		}
		if al := s.Alerts(); len(al) != 10 {
			t.Errorf("an instance lists %d alerts; want the inlet alert of all 10", len(al))
		}
		r, err := s.Report(ctx, time.Hour, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		measured := 0
		for _, n := range r.Nodes {
			if n.Buckets > 0 && n.MeanW == 500 {
				measured++
			}
		}
		if len(r.Nodes) != 10 || measured != 10 {
			t.Errorf("an instance's report lists %d machines, %d measured at 500 W; want 10 and 10", len(r.Nodes), measured)
		}
	}
	for id, n := range events {
		if n != 1 {
			t.Errorf("machine %s: %d alert transitions delivered; want 1", id, n)
		}
	}
	bLeft = true
	clear(reads)
	if err := a.refresh(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := b.refresh(ctx, clk.Now()); err != nil { // B hands its machines over
		t.Fatal(err)
	}
	clk.Add(time.Hour) // A polls its new machines at their own offset within the interval
	round(a, b)
	for id := range events {
		if events[id] != 1 {
			t.Errorf("machine %s: %d alert transitions after the hand-over; want the firing alert kept, not sent again", id, events[id])
		}
	}
	if len(reads) != 10 {
		t.Errorf("after B left, %d machines were read; want all 10 by A", len(reads))
	}
	for id, by := range reads {
		if by["b"] > 0 {
			t.Errorf("machine %s read by B after it left", id)
		}
	}
}
