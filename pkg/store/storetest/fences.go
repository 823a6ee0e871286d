package storetest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// fenceCases check FenceStore: SwapFence and every write's fence check.
var fenceCases = []conformanceCase{
	{"fences/swap sets only from the expected value", fenceSwap},
	{"fences/every write checks the fences of its context", fenceWrites},
}

func fenceSwap(t *testing.T, e env) {
	if v, err := e.s.Fence(e.ctx, "job/j-1"); v != "" || err != nil {
		t.Fatalf("Fence of an unset key = %q, %v; want \"\", nil", v, err)
	}
	if err := e.s.SwapFence(e.ctx, "job/j-1", "", "a"); err != nil {
		t.Fatalf("claiming a free fence: %v", err)
	}
	err := e.s.SwapFence(e.ctx, "job/j-1", "", "b")
	wantIs(t, "claiming a held fence", err, store.ErrStale)
	wantMsg(t, "claiming a held fence", err, "job/j-1", `"a"`)
	wantIs(t, "swapping from a wrong value", e.s.SwapFence(e.ctx, "job/j-1", "c", "b"), store.ErrStale)
	if err := e.s.SwapFence(e.ctx, "job/j-1", "a", "b"); err != nil {
		t.Fatalf("taking the fence over: %v", err)
	}
	if v, _ := e.s.Fence(e.ctx, "job/j-1"); v != "b" {
		t.Errorf("Fence = %q; want b", v)
	}
	if err := e.s.SwapFence(e.ctx, "job/j-1", "b", ""); err != nil {
		t.Fatalf("releasing: %v", err)
	}
	if v, _ := e.s.Fence(e.ctx, "job/j-1"); v != "" {
		t.Errorf("Fence after release = %q; want none", v)
	}
}

// fencedWrite is one write of the contracts, made under ctx.
type fencedWrite struct {
	name string
	do   func(ctx context.Context, e env, m machine.Machine, j store.Job) error
}

var fencedWrites = []fencedWrite{
	{"CreateMachine", func(ctx context.Context, e env, _ machine.Machine, _ store.Job) error {
		return e.s.CreateMachine(ctx, &machine.Machine{Name: "gpu-new"})
	}},
	{"ChangeMachine", func(ctx context.Context, e env, m machine.Machine, _ store.Job) error {
		_, err := e.s.ChangeMachine(ctx, m.ID, store.Change{Edit: store.Edit(func(m *machine.Machine) error { m.Rack = "fenced"; return nil })})
		return err
	}},
	{"PutInventory", func(ctx context.Context, e env, m machine.Machine, _ store.Job) error {
		_, err := e.s.PutInventory(ctx, m.ID, machine.Inventory{Source: "fenced"})
		return err
	}},
	{"AppendEvent", func(ctx context.Context, e env, m machine.Machine, _ store.Job) error {
		_, err := e.s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "fenced"})
		return err
	}},
	{"CreateJob", func(ctx context.Context, e env, _ machine.Machine, _ store.Job) error {
		return e.s.CreateJob(ctx, &store.Job{Kind: "fenced"})
	}},
	{"UpdateJob", func(ctx context.Context, e env, _ machine.Machine, j store.Job) error {
		_, err := e.s.UpdateJob(ctx, j.ID, func(j *store.Job) error { j.Step = "fenced"; return nil })
		return err
	}},
	{"UpdateJobRev", func(ctx context.Context, e env, _ machine.Machine, j store.Job) error {
		cur, err := e.s.GetJob(e.ctx, j.ID)
		if err != nil {
			return err
		}
		_, err = e.s.UpdateJobRev(ctx, j.ID, cur.Revision, func(j *store.Job) error { j.Step = "fenced"; return nil })
		return err
	}},
	{"PutToken", func(ctx context.Context, e env, _ machine.Machine, _ store.Job) error {
		return e.s.PutToken(ctx, store.Token{ID: "t-f", Name: "fenced", Hash: strings.Repeat("f", 64), Scope: "operator"})
	}},
	{"PutSecret", func(ctx context.Context, e env, _ machine.Machine, _ store.Job) error {
		return e.s.PutSecret(ctx, store.Secret{Name: "fenced", KeyID: "k", Sealed: []byte("x")})
	}},
	{"PutTelemetry", func(ctx context.Context, e env, m machine.Machine, _ store.Job) error {
		return e.s.PutTelemetry(ctx, []store.NodeTelemetry{{Machine: m.ID, State: []byte("fenced")}}, nil)
	}},
	{"PutPowerSummaries", func(ctx context.Context, e env, m machine.Machine, _ store.Job) error {
		return e.s.PutPowerSummaries(ctx, []store.PowerDay{{Machine: m.ID, Day: "2025-03-01", Buckets: []byte("fenced")}})
	}},
	{"DeleteMachine", func(ctx context.Context, e env, m machine.Machine, _ store.Job) error {
		return e.s.DeleteMachine(ctx, m.ID)
	}},
}

func fenceWrites(t *testing.T, e env) {
	if err := e.s.SwapFence(e.ctx, "job/j-1", "", "owner-a"); err != nil {
		t.Fatal(err)
	}
	m := e.create(t, machine.Machine{Name: "gpu-01", Rack: "r1"})
	j := store.Job{Kind: "reimage"}
	if err := e.s.CreateJob(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	stale := store.WithFence(e.ctx, "job/j-1", "owner-b")
	gone := store.WithFence(e.ctx, "job/j-9", "owner-a")
	for _, w := range fencedWrites {
		before := snapshot(e)
		for what, ctx := range map[string]context.Context{"a fence held by another": stale, "a fence that is not set": gone} {
			err := w.do(ctx, e, m, j)
			wantIs(t, w.name+" under "+what, err, store.ErrFenced)
		}
		if after := snapshot(e); before != after {
			t.Errorf("%s under a stale fence changed the store:\nbefore %s\nafter  %s", w.name, before, after)
		}
	}
	// A lease answers DHCP, not a job: its fence is not checked.
	l := store.Lease{MAC: "52:54:00:aa:00:01", IP: netip.MustParseAddr("10.0.0.5"), State: store.LeaseBound, Expires: e.clk.Now().Add(time.Hour)}
	if err := e.s.PutLease(stale, l); err != nil {
		t.Errorf("PutLease under a stale fence: %v; want it written", err)
	}
	// Under the fence as it stands, every write goes through.
	held := store.WithFence(e.ctx, "job/j-1", "owner-a")
	for _, w := range fencedWrites {
		if err := w.do(held, e, m, j); err != nil {
			t.Errorf("%s under a held fence: %v", w.name, err)
		}
	}
}

// snapshot renders what the fenced writes could change, to compare.
func snapshot(e env) string {
	var b strings.Builder
	ms, _ := e.s.ListMachines(e.ctx, store.MachineFilter{})
	for _, m := range ms {
		r, _ := e.s.MachineRevision(e.ctx, m.ID)
		evs, _ := e.s.Events(e.ctx, m.ID, 0, 0)
		invs, _ := e.s.Inventories(e.ctx, m.ID)
		sums, _ := e.s.PowerSummaries(e.ctx, m.ID, "")
		fmt.Fprintf(&b, "machine %s rack=%s rev=%d events=%d inventories=%d summaries=%d\n", m.Name, m.Rack, r, len(evs), len(invs), len(sums))
	}
	jobs, _ := e.s.ListJobs(e.ctx, "")
	for _, j := range jobs {
		fmt.Fprintf(&b, "job %s step=%q rev=%d\n", j.ID, j.Step, j.Revision)
	}
	toks, _ := e.s.ListTokens(e.ctx)
	secs, _ := e.s.ListSecrets(e.ctx)
	tel, _ := e.s.ListNodeTelemetry(e.ctx)
	fmt.Fprintf(&b, "tokens=%d secrets=%d telemetry=%d\n", len(toks), len(secs), len(tel))
	return b.String()
}
