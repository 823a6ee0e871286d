package fleet

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// TestLifecycleWalk moves a machine along every pair of states through a
// store that fails every second write, as a crash between two writes
// would: every move the table allows ends in its state with exactly one
// state event naming from, to, actor and reason (a failed attempt leaves
// neither); every move it does not list is refused and leaves none.
func TestLifecycleWalk(t *testing.T) {
	ctx := context.Background()
	real := storetest.Open(t)
	s, err := New(Config{Store: storetest.FailEveryNthWrite(real, 2, storetest.ErrInjected), Recipes: noRecipe})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, from := range machine.States {
		for _, to := range machine.States {
			if from == to {
				continue
			}
			n++
			m := &machine.Machine{ID: fmt.Sprintf("m-%d", n), Name: fmt.Sprintf("n-%d", n), State: from}
			if err := real.CreateMachine(ctx, m); err != nil {
				t.Fatal(err)
			}
			reason := "walk " + string(from) + " -> " + string(to)
			for attempt := 1; attempt <= 2; attempt++ {
				err = s.Transition(ctx, m.ID, to, "walker", reason, map[string]string{"n": "1"})
				evs, _ := real.Events(ctx, m.ID, 0, 0)
				got, _ := real.GetMachine(ctx, m.ID)
				moved := got.State != from
				if moved != (len(evs) == 1) || len(evs) > 1 {
					t.Fatalf("%s -> %s, attempt %d (err %v): state %s with events %+v; want the state and its one event together", from, to, attempt, err, got.State, evs)
				}
				if !errors.Is(err, storetest.ErrInjected) {
					break // the write was tried by the store
				}
			}
			evs, _ := real.Events(ctx, m.ID, 0, 0)
			got, _ := real.GetMachine(ctx, m.ID)
			if !machine.CanTransition(from, to) {
				if err == nil || len(evs) != 0 || got.State != from {
					t.Errorf("%s -> %s is not in the table but err=%v, events %+v, state %s", from, to, err, evs, got.State)
				}
				continue
			}
			if err != nil || got.State != to {
				t.Errorf("%s -> %s: err=%v, state %s", from, to, err, got.State)
				continue
			}
			if len(evs) != 1 || evs[0].Kind != "state" || evs[0].From != from || evs[0].To != to || evs[0].Actor != "walker" ||
				evs[0].Message != reason || evs[0].Fields["n"] != "1" {
				t.Errorf("%s -> %s: events %+v, want exactly one state event with actor and reason", from, to, evs)
			}
		}
	}
	plain, _ := New(Config{Store: real, Recipes: noRecipe})
	if err := plain.Transition(ctx, "nope", machine.StateReady, "walker", "x", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Transition of an unknown machine: %v; want ErrNotFound", err)
	}
}

func noRecipe(name string) (*recipe.Recipe, error) { return nil, fmt.Errorf("no recipe %s", name) }

// Operator tokens live at most TokenMaxTTL: a longer one is refused at
// creation, and one stored with a longer life ends there (refused and
// removed at its use).
func TestTokenMaxLifetime(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := New(Config{Store: st, Recipes: noRecipe, Now: clock, TokenMaxTTL: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateToken(ctx, "century", ScopeOperator, 100*365*24*time.Hour, "test"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a 100-year token: %v; want ErrInvalid", err)
	}
	_, def, err := s.CreateToken(ctx, "default", ScopeOperator, 0, "test")
	if err != nil || !def.Expires.Equal(now.Add(7*24*time.Hour)) {
		t.Errorf("a default token under a 7-day maximum: %+v, %v; want it to end in 7 days", def, err)
	}
	// A token made before the limit (by the package function: a year).
	secret, old, err := CreateToken(ctx, st, "old", ScopeOperator, 300*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(8 * 24 * time.Hour)
	if _, err := s.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a token past the maximum (expires %s): %v; want it refused", old.Expires, err)
	}
	if _, err := st.TokenByHash(ctx, old.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the ended token is still stored: %v", err)
	}
}
