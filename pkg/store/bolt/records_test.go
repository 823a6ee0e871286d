package bolt_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestInventoryHistoryKeepsNewest(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{History: 3, Now: fixedClock()})
	m := mustCreate(t, s, machine.Machine{Name: "gpu-01"})
	for i := 1; i <= 5; i++ {
		seq, err := s.PutInventory(ctx, "gpu-01", machine.Inventory{Source: "redfish", DIMMs: make([]machine.DIMM, i)})
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i) {
			t.Errorf("snapshot %d got seq %d", i, seq)
		}
	}
	snaps, err := s.Inventories(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, sn := range snaps {
		seqs = append(seqs, sn.Seq)
		if sn.MachineID != m.ID || len(sn.Inventory.DIMMs) != int(sn.Seq) || sn.Taken.IsZero() {
			t.Errorf("snapshot %d = %+v", sn.Seq, sn)
		}
	}
	if diff := cmp.Diff([]uint64{3, 4, 5}, seqs); diff != "" {
		t.Errorf("kept seqs (-want +got):\n%s", diff)
	}
	latest, err := s.Inventory(ctx, m.ID, 0)
	if err != nil || latest.Seq != 5 {
		t.Errorf("latest = %v, %v; want seq 5", latest, err)
	}
	if _, err := s.Inventory(ctx, m.ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("trimmed snapshot 1: %v, want ErrNotFound", err)
	}
	if _, err := s.PutInventory(ctx, "nope", machine.Inventory{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown machine: %v", err)
	}
	other := mustCreate(t, s, machine.Machine{Name: "gpu-02"})
	if snaps, err := s.Inventories(ctx, other.ID); err != nil || len(snaps) != 0 {
		t.Errorf("machine without inventory: %v, %v", snaps, err)
	}
	if _, err := s.Inventory(ctx, other.ID, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("latest of machine without inventory: %v", err)
	}
}

func TestEvents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{Now: fixedClock()})
	m := mustCreate(t, s, machine.Machine{Name: "gpu-01"})
	for i := 0; i < 10; i++ {
		ev, err := s.AppendEvent(ctx, machine.Event{Machine: "gpu-01", Kind: "state", Actor: "engine"})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq != uint64(i+1) || ev.Machine != m.ID || ev.Time.IsZero() {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	seqsOf := func(evs []machine.Event) (out []uint64) {
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	tests := map[string]struct {
		after uint64
		limit int
		want  []uint64
	}{
		"all":             {0, 0, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		"after 7":         {7, 0, []uint64{8, 9, 10}},
		"after 2 limit 3": {2, 3, []uint64{3, 4, 5}},
		"after the last":  {10, 0, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			evs, err := s.Events(ctx, m.ID, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, seqsOf(evs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	last, err := s.LastEvents(ctx, "gpu-01", 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{8, 9, 10}, seqsOf(last)); diff != "" {
		t.Errorf("LastEvents (-want +got):\n%s", diff)
	}
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: "nope", Kind: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("event of unknown machine: %v", err)
	}
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID}); err == nil || !strings.Contains(err.Error(), "kind is empty") {
		t.Errorf("event without kind: %v", err)
	}
}

// Concurrent appends share commits (db.Batch) yet every event gets its own seq.
func TestAppendEventConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{})
	m := mustCreate(t, s, machine.Machine{Name: "gpu-01"})
	const n = 200
	var wg sync.WaitGroup
	seen := make([]uint64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "x"})
			if err != nil {
				t.Error(err)
			}
			seen[i] = ev.Seq
		}()
	}
	// One event for a machine that does not exist fails alone.
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: "nope", Kind: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown machine: %v", err)
	}
	wg.Wait()
	uniq := map[uint64]bool{}
	for _, seq := range seen {
		uniq[seq] = true
	}
	evs, err := s.Events(ctx, m.ID, 0, 0)
	if err != nil || len(evs) != n || len(uniq) != n {
		t.Errorf("stored %d events (%v), %d distinct seqs; want %d", len(evs), err, len(uniq), n)
	}
}

func TestLeases(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := openTest(t, store.Options{Now: func() time.Time { return now }})
	bound := func(mac, ip string, until time.Duration) store.Lease {
		return store.Lease{MAC: mac, IP: mustAddr(ip), State: "bound", Expires: now.Add(until)}
	}
	if err := s.PutLease(ctx, bound("52-54-00-00-00-01", "10.0.0.10", time.Hour)); err != nil {
		t.Fatal(err)
	}
	l, err := s.LeaseByMAC(ctx, "52:54:00:00:00:01")
	if err != nil {
		t.Fatal(err)
	}
	want := store.Lease{MAC: "52:54:00:00:00:01", IP: mustAddr("10.0.0.10"), State: "bound", Expires: now.Add(time.Hour), Updated: now}
	if diff := cmp.Diff(want, *l, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("lease (-want +got):\n%s", diff)
	}
	// Another MAC cannot take a live lease's IP ...
	err = s.PutLease(ctx, bound("52:54:00:00:00:02", "10.0.0.10", time.Hour))
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "leased to 52:54:00:00:00:01") {
		t.Errorf("taking a live IP: %v", err)
	}
	// ... but can take an expired one.
	if err := s.PutLease(ctx, bound("52:54:00:00:00:03", "10.0.0.11", -time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLease(ctx, bound("52:54:00:00:00:02", "10.0.0.11", time.Hour)); err != nil {
		t.Errorf("taking an expired IP: %v", err)
	}
	if l, err := s.LeaseByIP(ctx, mustAddr("10.0.0.11")); err != nil || l.MAC != "52:54:00:00:00:02" {
		t.Errorf("LeaseByIP after takeover: %v, %v", l, err)
	}
	// Moving a MAC to a new IP frees the old one.
	if err := s.PutLease(ctx, bound("52:54:00:00:00:01", "10.0.0.12", time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseByIP(ctx, mustAddr("10.0.0.10")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old IP still indexed: %v", err)
	}
	all, err := s.ListLeases(ctx)
	if err != nil || len(all) != 3 {
		t.Errorf("ListLeases: %d, %v", len(all), err)
	}
	if err := s.DeleteLease(ctx, "52:54:00:00:00:01"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseByIP(ctx, mustAddr("10.0.0.12")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted lease's IP still indexed: %v", err)
	}
	if err := s.DeleteLease(ctx, "52:54:00:00:00:01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	for name, l := range map[string]store.Lease{
		"bad MAC": {MAC: "zz", IP: mustAddr("10.0.0.1")},
		"no IP":   {MAC: "52:54:00:00:00:09"},
	} {
		if err := s.PutLease(ctx, l); err == nil {
			t.Errorf("%s: PutLease succeeded", name)
		}
	}
}

func TestJobs(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{Now: fixedClock()})
	a := &store.Job{Kind: "reimage", Machines: []string{"gpu-01"}}
	if err := s.CreateJob(ctx, a); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "j-") || a.State != store.JobPending || a.Created.IsZero() {
		t.Errorf("created job = %+v", a)
	}
	b := &store.Job{ID: "j-fixed", Kind: "rollout"}
	if err := s.CreateJob(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateJob(ctx, &store.Job{ID: "j-fixed", Kind: "rollout"}); !errors.Is(err, store.ErrExists) {
		t.Errorf("duplicate job: %v", err)
	}
	if err := s.CreateJob(ctx, &store.Job{}); err == nil {
		t.Error("job without kind was created")
	}
	got, err := s.UpdateJob(ctx, a.ID, func(j *store.Job) error { j.State = store.JobRunning; j.Step = "power-off"; return nil })
	if err != nil || got.State != store.JobRunning || !got.Updated.After(got.Created) {
		t.Errorf("UpdateJob: %+v, %v", got, err)
	}
	running, err := s.ListJobs(ctx, store.JobRunning)
	if err != nil || len(running) != 1 || running[0].ID != a.ID {
		t.Errorf("running jobs: %+v, %v", running, err)
	}
	all, err := s.ListJobs(ctx, "")
	if err != nil || len(all) != 2 || all[0].ID != a.ID {
		t.Errorf("all jobs, oldest first: %+v, %v", all, err)
	}
	if _, err := s.GetJob(ctx, "j-nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{})
	hash := strings.Repeat("ab", 32)
	if err := s.PutToken(ctx, store.Token{ID: "t1", Name: "ci", Hash: hash, Scope: "operator"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, store.Token{Name: "bad", Hash: "xyz"}); err == nil || !strings.Contains(err.Error(), "expected 64 hex") {
		t.Errorf("bad hash: %v", err)
	}
	tok, err := s.TokenByHash(ctx, hash)
	if err != nil || tok.Name != "ci" || tok.Created.IsZero() {
		t.Errorf("TokenByHash: %+v, %v", tok, err)
	}
	tok.Revoked = true
	if err := s.PutToken(ctx, *tok); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListTokens(ctx)
	if err != nil || len(all) != 1 || !all[0].Revoked {
		t.Errorf("ListTokens: %+v, %v", all, err)
	}
	if _, err := s.TokenByHash(ctx, strings.Repeat("00", 32)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown token: %v", err)
	}
	if err := s.DeleteToken(ctx, hash); err != nil {
		t.Fatalf("DeleteToken: %v", err)
	}
	if _, err := s.TokenByHash(ctx, hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted token still found: %v", err)
	}
	if err := s.DeleteToken(ctx, hash); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting twice: %v, want ErrNotFound", err)
	}
}
