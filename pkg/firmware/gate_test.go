package firmware_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/firmware"
)

// TestGate: the limits, table-tested. Each case admits (+) or finishes (-)
// nodes in order at the given times and checks each answer.
func TestGate(t *testing.T) {
	t0 := time.Date(2026, 3, 7, 1, 0, 0, 0, time.UTC) // a Saturday, 01:00 UTC
	n := func(name, bmcURL, rack, recipe string) firmware.Node {
		return firmware.Node{Name: name, BMC: bmcURL, Rack: rack, Recipe: recipe}
	}
	a1, a2, a3 := n("a1", "bmc-a1", "A", "gpu"), n("a2", "bmc-a2", "A", "gpu"), n("a3", "bmc-a3", "A", "gpu")
	b1 := n("b1", "bmc-b1", "B", "cpu")
	a1twin := n("a1-node2", "bmc-a1", "A", "gpu") // a second node behind the same BMC (a blade chassis)
	type op struct {
		at       time.Duration
		done     bool
		node     firmware.Node
		ok       bool
		wait     time.Duration
		whyWords string
	}
	for name, tc := range map[string]struct {
		limits firmware.Limits
		ops    []op
	}{
		"one update per BMC": {firmware.Limits{}, []op{
			{node: a1, ok: true}, {node: a1twin, whyWords: "in flight at its BMC bmc-a1"},
			{done: true, node: a1}, {node: a1twin, ok: true}}},
		"per rack": {firmware.Limits{PerRack: 2}, []op{
			{node: a1, ok: true}, {node: a2, ok: true}, {node: a3, whyWords: "rack A has 2 updates in flight (limit 2)"},
			{node: b1, ok: true}, {done: true, node: a2}, {node: a3, ok: true}}},
		"total": {firmware.Limits{Total: 2}, []op{
			{node: a1, ok: true}, {node: b1, ok: true}, {node: a2, whyWords: "2 updates in flight (limit 2)"},
			{done: true, node: b1}, {node: a2, ok: true}}},
		"pause between starts": {firmware.Limits{Pause: 30 * time.Second}, []op{
			{node: a1, ok: true}, {at: 10 * time.Second, node: b1, wait: 20 * time.Second, whyWords: "pausing 30s"},
			{at: 30 * time.Second, node: b1, ok: true}}},
		"a window for rack A": {firmware.Limits{Windows: []firmware.Window{{Racks: []string{"A"}, Start: 2 * time.Hour, Length: 2 * time.Hour}}}, []op{
			{node: a1, wait: time.Hour, whyWords: "outside its maintenance windows"}, {node: b1, ok: true},
			{at: time.Hour, node: a1, ok: true}, {at: 3 * time.Hour, node: a2, wait: 22 * time.Hour}}},
		"a weekday window by recipe": {firmware.Limits{Windows: []firmware.Window{{Recipes: []string{"gpu"}, Days: []time.Weekday{time.Monday},
			Start: 22 * time.Hour, Length: 4 * time.Hour}}}, []op{
			{node: a1, wait: 2*24*time.Hour + 21*time.Hour}, {node: b1, ok: true},
			{at: 2*24*time.Hour + 23*time.Hour, node: a1, ok: true},                             // Tuesday 00:00: inside Monday 22:00 + 4h
			{at: 3*24*time.Hour + 30*time.Minute, node: a2, ok: true},                           // Tuesday 01:30: still inside
			{at: 3*24*time.Hour + 2*time.Hour, node: a3, wait: 6*24*time.Hour + 19*time.Hour}}}, // Tuesday 03:00: next Monday 22:00
		"a window in another time zone": {firmware.Limits{Windows: []firmware.Window{{Start: 3 * time.Hour, Length: time.Hour,
			Location: time.FixedZone("UTC+2", 2*3600)}}}, []op{
			{node: a1, ok: true}, // 01:00 UTC is 03:00 at UTC+2
			{at: time.Hour, node: b1, wait: 23 * time.Hour}}},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := firmware.NewGate(tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range tc.ops {
				if o.done {
					g.Done(o.node)
					continue
				}
				ok, wait, why := g.Admit(t0.Add(o.at), o.node)
				if ok != o.ok || wait != o.wait || !strings.Contains(why, o.whyWords) {
					t.Errorf("op %d: Admit(%s at +%s) = %v, %s, %q; want %v, %s, %q", i, o.node.Name, o.at, ok, wait, why, o.ok, o.wait, o.whyWords)
				}
			}
		})
	}
}

func TestGateRefusesNonsense(t *testing.T) {
	for _, l := range []firmware.Limits{{PerRack: -1}, {Windows: []firmware.Window{{Start: time.Hour}}},
		{Windows: []firmware.Window{{Start: 25 * time.Hour, Length: time.Hour}}}} {
		if _, err := firmware.NewGate(l); err == nil {
			t.Errorf("NewGate(%+v) accepted", l)
		}
	}
}
