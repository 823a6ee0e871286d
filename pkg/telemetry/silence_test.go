package telemetry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// countingNotifier counts what it was given.
type countingNotifier struct {
	mu    sync.Mutex
	fired int
	clear int
}

func (c *countingNotifier) Name() string { return "counting" }
func (c *countingNotifier) Notify(_ context.Context, t Transition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Fired {
		c.fired++
	} else {
		c.clear++
	}
	return nil
}

func (c *countingNotifier) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired, c.clear
}

// A silenced alert is listed with who silenced it and until when, its
// transitions reach the event log but no notifier, a cleared alert is
// remembered newest first, and a silence ends by itself.
func TestSilenceMutesNotifiersNotEvents(t *testing.T) {
	clk := &clock{t: t0}
	var mu sync.Mutex
	inlet, events := 25.0, 0
	var notes []string
	nt := &countingNotifier{}
	ms := []machine.Machine{{ID: "m-1", Name: "gpu-01", Recipe: "h100", State: machine.StateReady, BMC: machine.BMC{Endpoint: "https://10.0.0.5"}}}
	svc, err := New(Config{
		Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
		Read: func(context.Context, *machine.Machine) Sample {
			mu.Lock()
			defer mu.Unlock()
			return Sample{Up: true, PowerOn: true, Watts: 900, InletC: inlet, MemCorrectable: -1}
		},
		Recipes: func(string) (*recipe.Recipe, error) {
			return &recipe.Recipe{Name: "h100", Alerts: recipe.Alerts{InletCelsiusMax: 30, For: recipe.Duration(time.Minute)}}, nil
		},
		Event: func(context.Context, string, string) { mu.Lock(); events++; mu.Unlock() },
		Note: func(_ context.Context, id, kind, actor, msg string) {
			mu.Lock()
			notes = append(notes, strings.Join([]string{id, kind, actor, msg}, " | "))
			mu.Unlock()
		},
		Notify: []Notifier{nt},
		Now:    clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		rule string
		d    time.Duration
	}{{"no-such-rule", time.Hour}, {"inlet-temperature", 0}, {"inlet-temperature", MaxSilence + time.Second}} {
		if _, err := svc.Silence(t.Context(), "m-1", bad.rule, bad.d, "operator:alice", ""); !errors.Is(err, ErrSilence) {
			t.Errorf("Silence(%s, %s): %v, want ErrSilence", bad.rule, bad.d, err)
		}
	}
	if _, err := svc.Silence(t.Context(), "m-1", "inlet-temperature", 30*time.Minute, "operator:alice", "CRAC 3 in repair"); err != nil {
		t.Fatal(err)
	}
	wantNote := "m-1 | alert.silenced | operator:alice | alert inlet-temperature silenced until " + t0.Add(30*time.Minute).UTC().Format(time.RFC3339) + ": CRAC 3 in repair"
	if len(notes) != 1 || notes[0] != wantNote {
		t.Errorf("notes %q, want one: %q (refused silences record nothing)", notes, wantNote)
	}
	poll := func(c float64) {
		mu.Lock()
		inlet = c
		mu.Unlock()
		if err := svc.PollAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}
	for _, c := range []float64{33, 33, 33} {
		poll(c)
	}
	a := svc.Alerts()
	if len(a) != 1 || a[0].State != Firing || a[0].SilencedBy != "operator:alice" || !a[0].SilencedUntil.Equal(t0.Add(30*time.Minute)) {
		t.Fatalf("alerts: %+v, want one firing, silenced by operator:alice until +30m", a)
	}
	for _, c := range []float64{25, 25, 25} {
		poll(c)
	}
	time.Sleep(50 * time.Millisecond) // notifiers run on their own goroutines
	if f, c := nt.counts(); f != 0 || c != 0 {
		t.Errorf("notifier got %d fired and %d cleared while silenced, want none", f, c)
	}
	mu.Lock()
	if events != 2 {
		t.Errorf("%d events, want 2 (fired, cleared): a silence mutes the notifiers only", events)
	}
	mu.Unlock()
	cl := svc.RecentlyCleared()
	if len(cl) != 1 || cl[0].Rule != "inlet-temperature" || cl[0].Name != "gpu-01" || cl[0].ClearedAt.IsZero() {
		t.Errorf("recently cleared: %+v", cl)
	}
	if s := svc.Silences(); len(s) != 1 {
		t.Errorf("silences in force: %+v", s)
	}
	clk.Add(time.Hour)
	if s := svc.Silences(); len(s) != 0 {
		t.Errorf("silences after they ended: %+v", s)
	}
	for _, c := range []float64{33, 33, 33} {
		poll(c)
	}
	time.Sleep(50 * time.Millisecond)
	if f, _ := nt.counts(); f != 1 {
		t.Errorf("notifier got %d fired after the silence ended, want 1", f)
	}
}
