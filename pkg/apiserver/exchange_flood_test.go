package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// floodExchange sends n exchanges of node1's boot credential, from the
// addresses from gives for each, and returns the answers' status counts,
// the machine's events added and the backup's size before and after.
type floodResult struct {
	codes                map[int]int
	events               int
	backupBefore, backup int64
}

func floodExchange(t *testing.T, f *fixture, n int, from func(i int) netip.Addr) floodResult {
	t.Helper()
	ctx := context.Background()
	if code, body := f.do(t, "POST", "/api/v1/reimage", f.operator, wire.ReimageRequest{Machines: []string{"node1"}}); code != 202 {
		t.Fatalf("reimage: %d %s", code, body)
	}
	m1, _ := f.s.GetMachine(ctx, "node1")
	boot, _ := f.agentCredential(t, m1)
	f.fl.FlushEvents(ctx)
	before, _ := f.s.Events(ctx, m1.ID, 0, 0)
	r := floodResult{codes: map[int]int{}, backupBefore: backupSize(t, f.s)}
	for i := range n {
		code, _ := f.doFrom(t, from(i), "POST", api.PathExchange, boot, struct{}{})
		r.codes[code]++
	}
	f.fl.FlushEvents(ctx)
	after, _ := f.s.Events(ctx, m1.ID, 0, 0)
	r.events = int(after[len(after)-1].Seq - before[len(before)-1].Seq)
	r.backup = backupSize(t, f.s)
	t.Logf("%d exchanges from the attacker: answers %v; %d events added (%d kept, %d dropped); backup %d -> %d bytes",
		n, r.codes, r.events, len(after), store.EventsDropped(after[0].Seq), r.backupBefore, r.backup)
	return r
}

func backupSize(t *testing.T, s store.Store) int64 {
	t.Helper()
	n, err := s.Backup(context.Background(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue 25: 300 refused exchanges from one attacker's address added 332
// events and grew the backup from 299 KB to 467 KB. Now the exchange
// counts against the public limit (20/s, bursts of 40: most of the flood
// is answered 429 before its credential is looked at), and the refusals
// that get through repeat one security event, written once with one
// summary of the repeats: a bounded number of events, and a backup that
// does not grow by more than a few pages.
func TestExchangeFloodBounded(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.PublicLimit = ratelimit.New(20, 40, 0, nil) })
	r := floodExchange(t, f, 300, func(int) netip.Addr { return intruderAddr })
	if r.codes[403] == 0 || r.codes[429] == 0 || r.codes[403]+r.codes[429] != 300 {
		t.Errorf("answers %v: want 403 (refused) and 429 (limited) only", r.codes)
	}
	if r.events > 2 {
		t.Errorf("%d events added, want at most 2 (the first refusal and one summary of its repeats)", r.events)
	}
	if growth := r.backup - r.backupBefore; growth > 16<<10 {
		t.Errorf("the backup grew by %d bytes, want at most 16 KiB", growth)
	}
	evs, _ := f.s.Events(context.Background(), "node1", 0, 0)
	last := evs[len(evs)-1]
	if last.Kind != "security" || last.Fields["repeats"] != fmt.Sprint(r.codes[403]-1) || last.Fields["first"] == "" || last.Fields["last"] == "" {
		t.Errorf("the summary: %+v, want repeats %d with first and last", last, r.codes[403]-1)
	}
}

// From many addresses (each its own limit and its own event: the message
// names the address) the per-machine cap holds: the machine keeps
// MaxEvents, the oldest dropped and counted.
func TestExchangeFloodCapped(t *testing.T) {
	const maxEvents = 100
	s := storetest.OpenWith(t, store.Options{Timeout: time.Second, MaxEvents: maxEvents})
	f := newFixtureOn(t, s, func(c *Config) { c.PublicLimit = ratelimit.New(20, 40, 0, nil) })
	r := floodExchange(t, f, 300, func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 1, byte(i + 1)}) })
	if r.codes[403] != 300 {
		t.Errorf("answers %v, want 300 refused", r.codes)
	}
	evs, _ := s.Events(context.Background(), "node1", 0, 0)
	if len(evs) != maxEvents || store.EventsDropped(evs[0].Seq) < uint64(r.events-maxEvents) {
		t.Errorf("%d events kept, %d dropped; want %d kept and the rest counted", len(evs), store.EventsDropped(evs[0].Seq), maxEvents)
	}
}
