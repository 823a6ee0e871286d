package machine_test

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Every state is reachable and none is a dead end.
func TestLifecycleTable(t *testing.T) {
	for _, st := range machine.States {
		in := 0
		for _, from := range machine.States {
			if from != st && machine.CanTransition(from, st) {
				in++
			}
		}
		if in == 0 && st != machine.StateDiscovered && st != machine.StateEnrolled {
			t.Errorf("state %s is declared but nothing moves a machine into it", st)
		}
		if len(machine.Next(st)) == 0 {
			t.Errorf("state %s has no way out", st)
		}
		for _, to := range machine.Next(st) {
			if !to.Valid() {
				t.Errorf("%s -> %s: not a state", st, to)
			}
		}
	}
}
