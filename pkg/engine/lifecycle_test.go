package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Every transition of the lifecycle table leaves exactly one state event
// naming from, to, actor and reason; every move the table does not list is
// refused and leaves none.
func TestLifecycleWalk(t *testing.T) {
	ctx := context.Background()
	e, s := poolEngine(t, "off")
	n := 0
	for _, from := range machine.States {
		for _, to := range machine.States {
			if from == to {
				continue
			}
			n++
			m := &machine.Machine{ID: fmt.Sprintf("m-%d", n), Name: fmt.Sprintf("n-%d", n), State: from}
			if err := s.CreateMachine(ctx, m); err != nil {
				t.Fatal(err)
			}
			err := e.setState(ctx, m.ID, to, "walk "+string(from)+" -> "+string(to), nil)
			evs, _ := s.Events(ctx, m.ID, 0, 0)
			got, _ := s.GetMachine(ctx, m.ID)
			if !CanTransition(from, to) {
				if err == nil || len(evs) != 0 || got.State != from {
					t.Errorf("%s -> %s is not in the table but err=%v, events %+v, state %s", from, to, err, evs, got.State)
				}
				continue
			}
			if err != nil || got.State != to {
				t.Errorf("%s -> %s: err=%v, state %s", from, to, err, got.State)
				continue
			}
			if len(evs) != 1 || evs[0].Kind != "state" || evs[0].From != from || evs[0].To != to || evs[0].Actor == "" ||
				evs[0].Message != "walk "+string(from)+" -> "+string(to) {
				t.Errorf("%s -> %s: events %+v, want exactly one state event with actor and reason", from, to, evs)
			}
		}
	}
	// Every state is reachable and none is a dead end but ready, failed
	// and discovered's way in.
	for _, st := range machine.States {
		in, out := 0, len(transitions[st])
		for _, from := range machine.States {
			if from != st && CanTransition(from, st) {
				in++
			}
		}
		if in == 0 && st != machine.StateDiscovered && st != machine.StateEnrolled {
			t.Errorf("state %s is declared but nothing moves a machine into it", st)
		}
		if out == 0 {
			t.Errorf("state %s has no way out", st)
		}
	}
}
