package storetest

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// lifecycleCases check revisions (MachineStore, JobStore) and the rules
// common to every contract: Close and a done context.
var lifecycleCases = []conformanceCase{
	{"revisions/machines: stale revision refused", machineRevisions},
	{"revisions/jobs: stale revision refused", jobRevisions},
	{"store/closed store fails with ErrClosed", closedStore},
	{"store/done context fails with its error", doneContext},
}

func machineRevisions(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01"})
	got, r1, err := e.s.GetMachineRev(e.ctx, "gpu-01")
	if err != nil || r1 == 0 || got.ID != m.ID {
		t.Fatalf("GetMachineRev = %+v, %d, %v; want the machine and a non-zero revision", got, r1, err)
	}
	if r, err := e.s.MachineRevision(e.ctx, m.ID); err != nil || r != r1 {
		t.Errorf("MachineRevision = %d, %v; want %d as GetMachineRev said", r, err, r1)
	}
	// Inventory and events leave the record, and its revision, alone.
	e.event(t, m.ID, "state")
	if _, err := e.s.PutInventory(e.ctx, m.ID, machine.Inventory{Source: "redfish"}); err != nil {
		t.Fatal(err)
	}
	up, r2, err := e.updateRev("gpu-01", r1, func(m *machine.Machine) error { m.Rack = "r1"; return nil })
	if err != nil || r2 <= r1 || up.Rack != "r1" {
		t.Fatalf("ChangeMachine with Rev at the current revision = %+v, %d, %v; want the edit and a revision above %d", up, r2, err, r1)
	}
	called := false
	_, _, err = e.updateRev(m.ID, r1, func(m *machine.Machine) error { called = true; m.Rack = "r2"; return nil })
	wantIs(t, "ChangeMachine with Rev at a stale revision", err, store.ErrStale)
	wantIs(t, "ChangeMachine with Rev at a stale revision", err, store.ErrConflict)
	if called {
		t.Error("fn ran although the revision was stale")
	}
	if got, r, _ := e.s.GetMachineRev(e.ctx, m.ID); got == nil || got.Rack != "r1" || r != r2 {
		t.Errorf("after the stale write: %+v at %d; want rack r1 at %d", got, r, r2)
	}
	// Unconditional writes move the revision too.
	if _, err := e.update(m.ID, func(m *machine.Machine) error { m.Rack = "r3"; return nil }); err != nil {
		t.Fatal(err)
	}
	r3, err := e.s.MachineRevision(e.ctx, m.ID)
	if err != nil || r3 <= r2 {
		t.Errorf("revision after ChangeMachine = %d, %v; want above %d", r3, err, r2)
	}
	_, _, err = e.updateRev(m.ID, r2, func(*machine.Machine) error { return nil })
	wantIs(t, "ChangeMachine with Rev at the revision before an unconditional write", err, store.ErrStale)
	_, _, err = e.updateRev("gpu-99", r3, func(*machine.Machine) error { return nil })
	wantIs(t, "ChangeMachine with Rev of an unknown machine", err, store.ErrNotFound)
	// A revision never comes back, even for the same ID after a delete.
	if err := e.s.DeleteMachine(e.ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	e.create(t, machine.Machine{ID: m.ID, Name: "gpu-01"})
	if r, err := e.s.MachineRevision(e.ctx, m.ID); err != nil || r <= r3 {
		t.Errorf("revision of the recreated machine = %d, %v; want above %d", r, err, r3)
	}
	_, _, err = e.updateRev(m.ID, r3, func(*machine.Machine) error { return nil })
	wantIs(t, "ChangeMachine with Rev with the deleted machine's revision", err, store.ErrStale)
}

func jobRevisions(t *testing.T, e env) {
	j := store.Job{Kind: "reimage"}
	if err := e.s.CreateJob(e.ctx, &j); err != nil {
		t.Fatal(err)
	}
	r1 := j.Revision
	up, err := e.s.UpdateJobRev(e.ctx, j.ID, r1, func(j *store.Job) error { j.Step = "power"; j.Revision = 1; return nil })
	if err != nil || up.Step != "power" || up.Revision <= r1 {
		t.Fatalf("UpdateJobRev at the current revision = %+v, %v; want the edit and a revision above %d", up, err, r1)
	}
	called := false
	_, err = e.s.UpdateJobRev(e.ctx, j.ID, r1, func(j *store.Job) error { called = true; j.Step = "boot"; return nil })
	wantIs(t, "UpdateJobRev at a stale revision", err, store.ErrStale)
	wantIs(t, "UpdateJobRev at a stale revision", err, store.ErrConflict)
	if called {
		t.Error("fn ran although the revision was stale")
	}
	if got, _ := e.s.GetJob(e.ctx, j.ID); got == nil || got.Step != "power" || got.Revision != up.Revision {
		t.Errorf("after the stale write: %+v; want step power at revision %d", got, up.Revision)
	}
	un, err := e.s.UpdateJob(e.ctx, j.ID, func(j *store.Job) error { j.Step = "boot"; return nil })
	if err != nil || un.Revision <= up.Revision {
		t.Errorf("UpdateJob = %+v, %v; want a revision above %d", un, err, up.Revision)
	}
	_, err = e.s.UpdateJobRev(e.ctx, j.ID, up.Revision, func(*store.Job) error { return nil })
	wantIs(t, "UpdateJobRev at the revision before an unconditional write", err, store.ErrStale)
	_, err = e.s.UpdateJobRev(e.ctx, "j-nope", 1, func(*store.Job) error { return nil })
	wantIs(t, "UpdateJobRev of an unknown job", err, store.ErrNotFound)
	other := store.Job{Kind: "inspect"}
	if err := e.s.CreateJob(e.ctx, &other); err != nil || other.Revision <= un.Revision {
		t.Errorf("a new job's revision %d (%v); want above every revision handed out (%d)", other.Revision, err, un.Revision)
	}
}

// calls is one read and one write of each contract.
func calls(ctx context.Context, e env) map[string]error {
	out := map[string]error{}
	_, out["GetMachine"] = e.s.GetMachine(ctx, "gpu-01")
	out["CreateMachine"] = e.s.CreateMachine(ctx, &machine.Machine{Name: "gpu-02"})
	_, out["Inventories"] = e.s.Inventories(ctx, "gpu-01")
	_, out["PutInventory"] = e.s.PutInventory(ctx, "gpu-01", machine.Inventory{})
	_, out["Events"] = e.s.Events(ctx, "gpu-01", 0, 0)
	_, out["AppendEvent"] = e.s.AppendEvent(ctx, machine.Event{Machine: "gpu-01", Kind: "x"})
	_, out["LeaseByMAC"] = e.s.LeaseByMAC(ctx, "52:54:00:aa:bb:01")
	out["PutLease"] = e.s.PutLease(ctx, bound("52:54:00:aa:bb:01", "10.0.0.9", start.Add(time.Hour)))
	_, out["ListLeases"] = e.s.ListLeases(ctx)
	_, out["LeaseByIP"] = e.s.LeaseByIP(ctx, netip.MustParseAddr("10.0.0.9"))
	_, out["ListJobs"] = e.s.ListJobs(ctx, "")
	out["CreateJob"] = e.s.CreateJob(ctx, &store.Job{Kind: "x"})
	_, out["ListTokens"] = e.s.ListTokens(ctx)
	out["DeleteToken"] = e.s.DeleteToken(ctx, "00")
	_, out["MachineRevision"] = e.s.MachineRevision(ctx, "gpu-01")
	return out
}

func closedStore(t *testing.T, e env) {
	e.create(t, machine.Machine{Name: "gpu-01"})
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range calls(e.ctx, e) {
		wantIs(t, name+" after Close", err, store.ErrClosed)
	}
	if err := e.s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func doneContext(t *testing.T, e env) {
	e.create(t, machine.Machine{Name: "gpu-01"})
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	for name, err := range calls(ctx, e) {
		wantIs(t, name+" with a cancelled context", err, context.Canceled)
	}
	if ms, err := e.s.ListMachines(e.ctx, store.MachineFilter{}); err != nil || len(ms) != 1 {
		t.Errorf("machines after cancelled writes: %d, %v; want only gpu-01", len(ms), err)
	}
	if _, err := e.s.LeaseByMAC(e.ctx, "52:54:00:aa:bb:01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a lease written with a cancelled context: %v", err)
	}
}
