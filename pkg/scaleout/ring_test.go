package scaleout

import (
	"fmt"
	"testing"
)

// TestRingSplitsAndRebalances: 3,000 machines over three instances land
// within 10 % of a third each; every instance computes the same owner;
// when one leaves, only its machines move (spread over the other two),
// and when it comes back they return to it.
func TestRingSplitsAndRebalances(t *testing.T) {
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = fmt.Sprintf("m-%010x", i*7919)
	}
	rings := map[string]*Ring{}
	for _, n := range []string{"a", "b", "c"} {
		rings[n] = newRing(n)
		rings[n].set([]string{"a/1", "b/2", "c/3", "c/4"}) // c joined twice: counts once
	}
	owner := func() map[string]string {
		out := map[string]string{}
		for _, id := range ids {
			o := rings["a"].Owner(id)
			mine := 0
			for n, r := range rings {
				if r.Mine(id) {
					mine++
					if n != o {
						t.Fatalf("%s: instance %s says mine, owner says %s", id, n, o)
					}
				}
			}
			if mine != 1 {
				t.Fatalf("%s: %d instances say mine; want 1", id, mine)
			}
			out[id] = o
		}
		return out
	}
	before := owner()
	count := map[string]int{}
	for _, o := range before {
		count[o]++
	}
	for n, c := range count {
		if c < 900 || c > 1100 {
			t.Errorf("instance %s polls %d of 3000; want about 1000", n, c)
		}
	}
	for _, r := range rings {
		r.set([]string{"a/1", "c/3"}) // b leaves
	}
	delete(rings, "b")
	after := owner()
	moved := 0
	for id, o := range after {
		if before[id] != o {
			moved++
			if before[id] != "b" {
				t.Errorf("%s moved from %s to %s; only b's machines may move", id, before[id], o)
			}
		}
	}
	if moved != count["b"] {
		t.Errorf("%d machines moved; want b's %d", moved, count["b"])
	}
	rings["b"] = newRing("b")
	for _, r := range rings {
		r.set([]string{"a/1", "b/5", "c/3"})
	}
	for id, o := range owner() {
		if before[id] != o {
			t.Errorf("%s: %s after b came back; want %s as before", id, o, before[id])
		}
	}
}

// TestRingNotHeldPollsNothing: an instance whose membership does not hold
// (etcd unreachable) polls nothing, and a group of one polls everything.
func TestRingNotHeldPollsNothing(t *testing.T) {
	r := newRing("a")
	r.set([]string{"a/1"})
	r.held = func() bool { return false }
	if r.Mine("m-1") {
		t.Error("an instance whose membership lapsed says a machine is its own")
	}
	solo := &Ring{self: "a", solo: true}
	if !solo.Mine("m-1") || solo.Owner("m-1") != "a" {
		t.Error("a group of one does not poll its machine")
	}
}
