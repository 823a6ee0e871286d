package rack

import (
	"math"
	"strings"
	"testing"
)

func TestBudgetByHand(t *testing.T) {
	// 415 V three phases, 32 A: 415 x 32 x 1.732 = 23,001 W; x 0.8 =
	// 18,401 W; less 2 kW for start-up: 16,401 W.
	r := Rack{Name: "r12", FeedVolts: 415, Phases: 3, BreakerAmps: 32, StartupMarginWatts: 2000}
	if got := r.BudgetWatts(); math.Abs(got-16400.9) > 1 {
		t.Errorf("three-phase budget %.1f W, want 16400.9", got)
	}
	// 230 V single phase, 16 A at 90 %: 3312 W.
	if got := (Rack{FeedVolts: 230, Phases: 1, BreakerAmps: 16, DeratingPct: 90}).BudgetWatts(); math.Abs(got-3312) > 0.01 {
		t.Errorf("single-phase budget %.1f W, want 3312", got)
	}
}

func TestParse(t *testing.T) {
	good := "racks:\n  - name: r12\n    feed_volts: 415\n    phases: 3\n    breaker_amps: 32\n    pue: 1.3\n    tariff_per_kwh: 0.21\n"
	rs, err := Parse("racks.yaml", []byte(good))
	if err != nil || len(rs) != 1 || rs[0].PUE != 1.3 {
		t.Fatalf("Parse: %+v, %v", rs, err)
	}
	for name, c := range map[string]struct{ body, want string }{
		"unknown field": {"racks:\n  - name: r1\n    feed_volts: 230\n    phases: 1\n    breaker_amps: 16\n    amps: 3\n", `racks.yaml:6: rack "r1": unknown field "amps"`},
		"bad phases":    {"racks:\n  - name: r1\n    feed_volts: 230\n    phases: 2\n    breaker_amps: 16\n", "phases 2: expected 1 or 3"},
		"duplicate":     {"racks:\n  - {name: r1, feed_volts: 230, phases: 1, breaker_amps: 16}\n  - {name: r1, feed_volts: 230, phases: 1, breaker_amps: 16}\n", `racks.yaml:3: rack "r1": declared again (first at line 2)`},
		"bad name":      {"racks:\n  - {name: R_1, feed_volts: 230, phases: 1, breaker_amps: 16}\n", "name:"},
		"no budget":     {"racks:\n  - {name: r1, feed_volts: 230, phases: 1, breaker_amps: 16, startup_margin_watts: 5000}\n", "leaves no budget"},
		"not a list":    {"racks: 3\n", "racks.yaml:"},
	} {
		if _, err := Parse("racks.yaml", []byte(c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
