package telemetry

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func up(min int, f func(*Sample)) Sample {
	s := Sample{Machine: "m-1", Time: t0.Add(time.Duration(min) * time.Minute), Up: true, PowerOn: true, Watts: 3000, InletC: 25,
		MemCorrectable: -1, MemUncorrectable: -1}
	if f != nil {
		f(&s)
	}
	return s
}

// Each scripted fault fires its alert once, after the hold, and clears it
// once, after it stayed gone (past the rule's hysteresis) for the hold.
func TestRulesFireOnceClearOnce(t *testing.T) {
	l := Limits{InletMaxC: 35, GPUMaxC: 87, LoadWatts: 3000, WattsMarginPct: 10, CorrectablePerDay: 100, For: 5 * time.Minute}
	hot := func(c float64) func(*Sample) { return func(s *Sample) { s.InletC = c } }
	cases := []struct {
		rule  string
		fault func(*Sample)
		// inBand keeps the condition inside the hysteresis: no clear.
		inBand func(*Sample)
	}{
		{"inlet-temperature", hot(38), hot(34)},
		{"gpu-temperature", func(s *Sample) { s.GPUMaxC = 90 }, func(s *Sample) { s.GPUMaxC = 86 }},
		{"fan-failed", func(s *Sample) { s.FansFailed = []string{"Fan 3"} }, nil},
		{"psu-redundancy-lost", func(s *Sample) { s.PSURedundancyLost = true }, nil},
		{"watts-above-load", func(s *Sample) { s.Watts = 3400 }, func(s *Sample) { s.Watts = 3200 }},
		{"power-sensor", func(s *Sample) { s.Watts = 0 }, nil},
		{"bmc-unreachable", func(s *Sample) { *s = Sample{Machine: "m-1", Time: s.Time, Err: "timeout"} }, nil},
		{"drive-predicted-failure", func(s *Sample) { s.DrivesPredicted = []string{"nvme0"} }, nil},
		{"gpu-health", func(s *Sample) { s.GPUsUnhealthy = []string{"GPU 2"} }, nil},
		{"uncorrectable-memory", func(s *Sample) { s.MemUncorrectable = 1 }, func(s *Sample) {}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			var n nodeState
			var got []string
			poll := func(min int, f func(*Sample)) {
				for _, tr := range n.evaluate(up(min, f), l, false) {
					if tr.Alert.Rule != c.rule {
						t.Errorf("minute %d: unexpected %s %v", min, tr.Alert.Rule, tr.Fired)
					}
					got = append(got, fmt.Sprintf("%d:%v", min, tr.Fired))
				}
			}
			poll(0, nil)
			for m := 1; m <= 12; m++ { // fault from minute 1 to 12
				poll(m, c.fault)
			}
			if c.inBand != nil && c.rule != "uncorrectable-memory" {
				for m := 13; m <= 20; m++ {
					poll(m, c.inBand)
				}
			}
			for m := 21; m <= 30; m++ {
				poll(m, nil)
			}
			if want := []string{"6:true", "26:false"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("transitions %v, want %v (fire after 5m held, clear after 5m gone)", got, want)
			}
		})
	}
}

// A flapping condition that never holds for the hold time never fires.
func TestRulesFlapNeverFires(t *testing.T) {
	var n nodeState
	l := Limits{InletMaxC: 35, For: 5 * time.Minute}
	for m := 0; m < 30; m++ {
		c := 25.0
		if m%4 != 0 {
			c = 40
		}
		if tr := n.evaluate(up(m, func(s *Sample) { s.InletC = c }), l, false); len(tr) > 0 {
			t.Fatalf("minute %d: %v", m, tr)
		}
	}
}

// While silenced (in a job, in maintenance) nothing fires; a firing alert
// still clears; the hold starts again when the silence ends.
func TestRulesSilenced(t *testing.T) {
	var n nodeState
	l := Limits{InletMaxC: 35, For: 5 * time.Minute}
	hot := func(s *Sample) { s.InletC = 40 }
	for m := 0; m < 10; m++ {
		if tr := n.evaluate(up(m, hot), l, true); len(tr) > 0 {
			t.Fatalf("silenced minute %d fired: %v", m, tr)
		}
	}
	if a := n.alerts["inlet-temperature"]; a == nil || !a.Silenced || a.State != Pending {
		t.Fatalf("silenced alert: %+v", a)
	}
	var fired int
	for m := 10; m < 16; m++ {
		for _, tr := range n.evaluate(up(m, hot), l, false) {
			if tr.Fired {
				fired = m
			}
		}
	}
	if fired != 15 {
		t.Errorf("fired at minute %d, want 15 (5 m after the silence ended)", fired)
	}
}

// Correctable memory errors are judged per day of the BMC's counter.
func TestRulesCorrectableRate(t *testing.T) {
	var n nodeState
	l := LimitsOf(nil)
	l.For = 0
	var got []string
	for i, c := range []int64{1000, 1050, 1101, 1101} {
		for _, tr := range n.evaluate(up(i*60, func(s *Sample) { s.MemCorrectable = c }), l, false) {
			got = append(got, fmt.Sprintf("%d:%s:%v", i, tr.Alert.Rule, tr.Fired))
		}
	}
	if fmt.Sprint(got) != "[2:memory-errors:true]" {
		t.Errorf("transitions %v", got)
	}
	msg := Transition{Alert: *n.alerts["memory-errors"], Fired: true}.Message()
	for _, want := range []string{"memory-errors", "101 since", "100 a day", "what to do"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
