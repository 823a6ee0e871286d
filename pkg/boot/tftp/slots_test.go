package tftp

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSlots drives the admission rules step by step: max 2 running, 2 per
// client, waiting for at most 4 s. Each step is "admit CLIENT", "release
// CLIENT" (its oldest running job) or "close"; the outcome lists what
// happened, and the step's time is its index in seconds.
func TestSlots(t *testing.T) {
	tests := map[string]struct {
		steps []string
		want  []string
	}{
		"under the limits every request runs": {
			[]string{"admit a", "admit b"},
			[]string{"a run", "b run"},
		},
		"per-client limit refuses, others are not refused": {
			[]string{"admit a", "admit a", "admit a", "admit b", "release a"},
			[]string{"a run", "a run", "a client_limit", "b wait", "release a: next b"},
		},
		"full: wait, then take the slot released": {
			[]string{"admit a", "admit b", "admit c", "release a"},
			[]string{"a run", "b run", "c wait", "release a: next c"},
		},
		"waiting counts toward the per-client limit": {
			[]string{"admit a", "admit b", "admit c", "admit c", "admit c"},
			[]string{"a run", "b run", "c wait", "c wait", "c client_limit"},
		},
		"waiting list full: the oldest waiting is dropped": {
			[]string{"admit a", "admit b", "admit c", "admit d", "admit e", "release a"},
			[]string{"a run", "b run", "c wait", "d wait", "e wait: dropped c", "release a: next d"},
		},
		"a request that waited too long is dropped, the next one runs": {
			// c waits from 2 s, d from 3 s; at 7 s c has waited 5 s (> 4 s).
			[]string{"admit a", "admit b", "admit c", "admit d", "release x", "release x", "release x", "release a"},
			[]string{"a run", "b run", "c wait", "d wait", "release x: none running", "release x: none running",
				"release x: none running", "release a: expired c, next d"},
		},
		"every waiter too old: the slot is freed": {
			[]string{"admit a", "admit b", "admit c", "release x", "release x", "release x", "release x", "release a", "admit d"},
			[]string{"a run", "b run", "c wait", "release x: none running", "release x: none running",
				"release x: none running", "release x: none running", "release a: expired c, idle", "d run"},
		},
		"close refuses and returns the waiting": {
			[]string{"admit a", "admit b", "admit c", "close", "admit d", "release a"},
			[]string{"a run", "b run", "c wait", "close: c", "d closed", "release a: idle"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSlots(2, 2, 4*time.Second)
			t0 := time.Unix(0, 0)
			running := map[string][]*job{}
			var got []string
			for i, step := range tc.steps {
				now := t0.Add(time.Duration(i) * time.Second)
				var verb, c string
				fmt.Sscan(step, &verb, &c)
				switch verb {
				case "admit":
					j := &job{client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, c[0]}), 69), since: now}
					v, dropped := s.admit(j)
					out := c + " " + map[verdict]string{admitRun: "run", admitWait: "wait", admitClientLimit: "client_limit", admitClosed: "closed"}[v]
					if dropped != nil {
						out += ": dropped " + name4(dropped)
					}
					if v == admitRun {
						running[c] = append(running[c], j)
					}
					got = append(got, out)
				case "release":
					if len(running[c]) == 0 {
						got = append(got, "release "+c+": none running")
						continue
					}
					j := running[c][0]
					running[c] = running[c][1:]
					next, expired := s.release(j, now)
					out := "release " + c + ":"
					for _, e := range expired {
						out += " expired " + name4(e) + ","
					}
					if next != nil {
						out += " next " + name4(next)
						running[name4(next)] = append(running[name4(next)], next)
					} else {
						out += " idle"
					}
					got = append(got, out)
				case "close":
					out := "close:"
					for _, j := range s.close() {
						out += " " + name4(j)
					}
					got = append(got, out)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}

// name4 is the one-letter client name a TestSlots job was made from.
func name4(j *job) string { return string(j.client.Addr().As4()[3]) }

// TestSlotsCountsBalance: whatever happens, every admitted or waiting job
// released or dropped leaves no count behind.
func TestSlotsCountsBalance(t *testing.T) {
	s := newSlots(3, 2, time.Second)
	now := time.Unix(0, 0)
	var run []*job
	for i := range 20 {
		j := &job{client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i % 5)}), 69), since: now}
		if v, _ := s.admit(j); v == admitRun {
			run = append(run, j)
		}
	}
	for len(run) > 0 {
		j := run[0]
		run = run[1:]
		if next, _ := s.release(j, now.Add(500*time.Millisecond)); next != nil {
			run = append(run, next)
		}
	}
	if r, w := s.counts(); r != 0 || w != 0 || len(s.byClient) != 0 {
		t.Fatalf("after releasing everything: %d running, %d waiting, per client %v; want nothing", r, w, s.byClient)
	}
}
