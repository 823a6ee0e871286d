package storetest

import (
	"context"
	"net/netip"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Failing is a Store whose every method returns Err (store.ErrClosed if Err
// is nil), for testing how consumers report storage errors.
type Failing struct{ Err error }

var _ store.Store = Failing{}

func (f Failing) err() error {
	if f.Err == nil {
		return store.ErrClosed
	}
	return f.Err
}

func (f Failing) CreateMachine(context.Context, *machine.Machine) error { return f.err() }
func (f Failing) GetMachine(context.Context, string) (*machine.Machine, error) {
	return nil, f.err()
}
func (f Failing) MachineByMAC(context.Context, string) (*machine.Machine, error) {
	return nil, f.err()
}
func (f Failing) MachineBySerial(context.Context, string) (*machine.Machine, error) {
	return nil, f.err()
}
func (f Failing) MachineByBMC(context.Context, string) (*machine.Machine, error) {
	return nil, f.err()
}
func (f Failing) ListMachines(context.Context, store.MachineFilter) ([]machine.Machine, error) {
	return nil, f.err()
}
func (f Failing) UpdateMachine(context.Context, string, func(*machine.Machine) error) (*machine.Machine, error) {
	return nil, f.err()
}
func (f Failing) DeleteMachine(context.Context, string) error { return f.err() }
func (f Failing) GetMachineRev(context.Context, string) (*machine.Machine, uint64, error) {
	return nil, 0, f.err()
}
func (f Failing) MachineRevision(context.Context, string) (uint64, error) { return 0, f.err() }
func (f Failing) UpdateMachineRev(context.Context, string, uint64, func(*machine.Machine) error) (*machine.Machine, uint64, error) {
	return nil, 0, f.err()
}
func (f Failing) PutInventory(context.Context, string, machine.Inventory) (uint64, error) {
	return 0, f.err()
}
func (f Failing) Inventories(context.Context, string) ([]store.Snapshot, error) {
	return nil, f.err()
}
func (f Failing) Inventory(context.Context, string, uint64) (*store.Snapshot, error) {
	return nil, f.err()
}
func (f Failing) AppendEvent(_ context.Context, ev machine.Event) (machine.Event, error) {
	return ev, f.err()
}
func (f Failing) Events(context.Context, string, uint64, int) ([]machine.Event, error) {
	return nil, f.err()
}
func (f Failing) PutLease(context.Context, store.Lease) error { return f.err() }
func (f Failing) LeaseByMAC(context.Context, string) (*store.Lease, error) {
	return nil, f.err()
}
func (f Failing) LeaseByIP(context.Context, netip.Addr) (*store.Lease, error) {
	return nil, f.err()
}
func (f Failing) ListLeases(context.Context) ([]store.Lease, error)  { return nil, f.err() }
func (f Failing) DeleteLease(context.Context, string) error          { return f.err() }
func (f Failing) CreateJob(context.Context, *store.Job) error        { return f.err() }
func (f Failing) GetJob(context.Context, string) (*store.Job, error) { return nil, f.err() }
func (f Failing) ListJobs(context.Context, store.JobState) ([]store.Job, error) {
	return nil, f.err()
}
func (f Failing) UpdateJob(context.Context, string, func(*store.Job) error) (*store.Job, error) {
	return nil, f.err()
}
func (f Failing) UpdateJobRev(context.Context, string, uint64, func(*store.Job) error) (*store.Job, error) {
	return nil, f.err()
}
func (f Failing) PutToken(context.Context, store.Token) error { return f.err() }
func (f Failing) TokenByHash(context.Context, string) (*store.Token, error) {
	return nil, f.err()
}
func (f Failing) ListTokens(context.Context) ([]store.Token, error) { return nil, f.err() }

// DeleteToken fails.
func (f Failing) DeleteToken(context.Context, string) error { return f.err() }
func (f Failing) Close() error                              { return nil }
