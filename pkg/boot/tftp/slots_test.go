package tftp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSlots drives the admission rules step by step: max 2 running, 2 per
// client, 2 waiting, a waiting client quiet for more than 4 s dropped.
// Each step is "admit CLIENT" (a new request, from a new port of the
// client's address), "again CLIENT" (the client's last request sent
// again), "release CLIENT" (its oldest running job) or "close"; the outcome
// lists what happened, and the step's time is its index in seconds.
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
		"a repeat keeps its place and starts no second transfer": {
			[]string{"admit a", "admit b", "admit c", "again c", "release a", "release b"},
			[]string{"a run", "b run", "c wait", "c repeat", "release a: next c", "release b: idle"},
		},
		"a repeated request goes before older ones never repeated": {
			[]string{"admit a", "admit b", "admit c", "admit d", "again d", "release a", "release b"},
			[]string{"a run", "b run", "c wait", "d wait", "d repeat", "release a: next d", "release b: next c"},
		},
		"list full: a new request pushes out the oldest never repeated": {
			[]string{"admit a", "admit b", "admit c", "admit d", "again c", "admit e", "release a"},
			[]string{"a run", "b run", "c wait", "d wait", "c repeat", "e wait: dropped d", "release a: next c"},
		},
		"list full of repeated requests: a new one is dropped": {
			[]string{"admit a", "admit b", "admit c", "admit d", "again c", "again d", "admit e", "release a"},
			[]string{"a run", "b run", "c wait", "d wait", "c repeat", "d repeat", "e full", "release a: next c"},
		},
		"a repeat keeps a long wait alive": {
			// c waits from 2 s and asks again at 4 s: at 7 s it has been
			// quiet for 3 s, not more than 4.
			[]string{"admit a", "admit b", "admit c", "release x", "again c", "release x", "release x", "release a"},
			[]string{"a run", "b run", "c wait", "release x: none running", "c repeat", "release x: none running",
				"release x: none running", "release a: next c"},
		},
		"a repeat does not count toward the per-client limit": {
			[]string{"admit a", "admit b", "admit c", "again c", "again c", "admit c", "admit c"},
			[]string{"a run", "b run", "c wait", "c repeat", "c repeat", "c wait", "c client_limit"},
		},
		"close refuses and returns the waiting": {
			[]string{"admit a", "admit b", "admit c", "close", "admit d", "release a"},
			[]string{"a run", "b run", "c wait", "close: c", "d closed", "release a: idle"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSlots(2, 2, 2, 4*time.Second)
			t0 := time.Unix(0, 0)
			running := map[string][]*job{}
			last := map[string]*job{}
			var got []string
			for i, step := range tc.steps {
				now := t0.Add(time.Duration(i) * time.Second)
				var verb, c string
				fmt.Sscan(step, &verb, &c)
				switch verb {
				case "admit", "again":
					j := &job{client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, c[0]}), uint16(1000+i)), since: now}
					if verb == "again" {
						j = &job{client: last[c].client, req: last[c].req, since: now}
					}
					last[c] = j
					v, dropped := s.admit(j)
					out := c + " " + map[verdict]string{admitRun: "run", admitWait: "wait", admitRepeat: "repeat", admitFull: "full",
						admitClientLimit: "client_limit", admitClosed: "closed"}[v]
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
	s := newSlots(3, 2, 3, time.Second)
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

// TestSlotsStorm plays a boot storm against the admission rules, on a
// simulated clock: 500 machines ask for their first stage within a second
// (as their DHCP ends), each transfer takes 0.25-0.75 s (what pkg/storm's
// BenchmarkTFTPStorm measured with 64 at once on this machine), and each
// machine, unanswered, asks again every 4 s and gives up after 7 requests,
// as EDK2 does. The slots must stay busy while requests wait: every
// machine has its file within twice the time 64 slots need for 500
// transfers. When a new request pushed out the oldest waiting one (at most
// MaxTransfers waiting, dropped after 2 x FirstACKWait), the slots went
// idle between the machines' retransmissions: the last machine started at
// 9 s here, and BenchmarkTFTPStorm measured 728 resent requests and 13.2
// s for the storm against 0 and 5.0 s now.
func TestSlotsStorm(t *testing.T) {
	const (
		n, slots = 500, 64
		xfer     = 500 * time.Millisecond
		resend   = 4 * time.Second
		sends    = 7
		tick     = 50 * time.Millisecond
	)
	s := slotsFor(withDefaults(Config{MaxTransfers: slots}))
	type machine struct {
		req    *job
		sent   int
		next   time.Duration
		served time.Duration // -1: not yet
	}
	ms := make([]*machine, n)
	rnd := rand.New(rand.NewPCG(1, 2)) // the same storm every run
	for i := range ms {
		// Their DHCP ends within a second of each other.
		ms[i] = &machine{served: -1, next: time.Duration(rnd.Int64N(int64(time.Second))), req: &job{client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 77, byte(16 + i/256), byte(i)}), 1024),
			req: request{name: "undionly.kpxe"}}}
	}
	type run struct {
		j   *job
		end time.Duration
	}
	var running []run
	byClient := map[netip.AddrPort]*machine{}
	for _, m := range ms {
		byClient[m.req.client] = m
	}
	start := func(j *job, now time.Duration) {
		byClient[j.client].served = now
		running = append(running, run{j, now + xfer/2 + time.Duration(rnd.Int64N(int64(xfer)))})
	}
	t0 := time.Unix(0, 0)
	for now := time.Duration(0); now < sends*resend+xfer; now += tick {
		var ended []*job
		kept := running[:0]
		for _, r := range running {
			if r.end > now {
				kept = append(kept, r)
			} else {
				ended = append(ended, r.j)
			}
		}
		running = kept
		for _, j := range ended {
			if next, _ := s.release(j, t0.Add(now)); next != nil {
				start(next, now)
			}
		}
		for _, m := range ms {
			if m.served >= 0 || m.sent == sends || now < m.next {
				continue
			}
			m.sent, m.next = m.sent+1, now+resend
			j := &job{client: m.req.client, req: m.req.req, since: t0.Add(now)}
			if v, _ := s.admit(j); v == admitRun {
				start(j, now)
			}
		}
	}
	failed := 0
	var latest time.Duration
	for _, m := range ms {
		if m.served < 0 {
			failed++
		}
		latest = max(latest, m.served)
	}
	busy := n * xfer / slots // 500 transfers on 64 slots, none idle
	t.Logf("%d of %d machines served, the last starting its transfer at %v (%v of transfers on %d slots)", n-failed, n, latest, busy, slots)
	if failed > 0 {
		t.Errorf("%d of %d machines never got a transfer within their %d requests %v apart", failed, n, sends, resend)
	}
	if latest > 2*busy {
		t.Errorf("the last machine started its transfer at %v, want within %v: the slots sat idle while machines waited to ask again", latest, 2*busy)
	}
}
