package etcd

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/store"
)

func TestKeys(t *testing.T) {
	k := keys{"/ingot/a/"}
	tests := map[string]struct{ got, want string }{
		"machine":       {k.machine("m-1"), "/ingot/a/m/m-1"},
		"MAC key":       {k.unique(store.UniqueKey{Kind: store.KeyMAC, Value: "52:54:00:00:00:01"}), "/ingot/a/k/mac/52:54:00:00:00:01"},
		"BMC key":       {k.unique(store.UniqueKey{Kind: store.KeyBMC, Value: "https://10.0.0.1"}), "/ingot/a/k/bmc/https://10.0.0.1"},
		"event":         {k.event("m-1", 255), "/ingot/a/ev/m-1/00000000000000ff"},
		"inventory":     {k.inventory("m-1", 1), "/ingot/a/inv/m-1/0000000000000001"},
		"power day":     {day(k.powerDays(), "m-1", "2025-03-01"), "/ingot/a/tp/m-1/2025-03-01"},
		"prefix end":    {prefixEnd("/ingot/a/ev/m-1/"), "/ingot/a/ev/m-10"},
		"prefix end ff": {prefixEnd("a\xff"), "b"},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %q; want %q", name, tc.got, tc.want)
		}
	}
	// Seq keys sort as numbers, and read back.
	if !(k.event("m", 9) < k.event("m", 10) && k.event("m", 255) < k.event("m", 256)) {
		t.Error("seq keys do not sort numerically")
	}
	if seq, err := parseSeqKey(k.event("m-1", 1<<40)); err != nil || seq != 1<<40 {
		t.Errorf("parseSeqKey = %d, %v", seq, err)
	}
	// A machine's prefix never holds another machine's keys.
	if p := k.events("m-1"); len(k.event("m-10", 1)) > len(p) && k.event("m-10", 1)[:len(p)] == p {
		t.Error("m-10's events are under m-1's prefix")
	}
}
