package storetest

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"sync"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Faulty is a Store that passes every call on to Store, except the calls
// Fail refuses: Fail sees the method's name and whether it writes, and an
// error it returns is the call's answer (the call does not reach Store).
// Store may be nil when Fail refuses everything.
type Faulty struct {
	Store store.Store
	Fail  func(method string, write bool) error
}

var _ store.Store = (*Faulty)(nil)

// FailAll refuses every call with err (store.ErrClosed when nil).
func FailAll(err error) *Faulty {
	if err == nil {
		err = store.ErrClosed
	}
	return &Faulty{Fail: func(string, bool) error { return err }}
}

// FailEveryNthWrite wraps s so that every nth write call (counting all
// writes, 1-based) fails with err: with n 2 the second write of any pair
// is lost, as a crash between two writes would lose it.
func FailEveryNthWrite(s store.Store, n int, err error) *Faulty {
	var mu sync.Mutex
	count := 0
	return &Faulty{Store: s, Fail: func(_ string, write bool) error {
		if !write {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		count++
		if count%n == 0 {
			return err
		}
		return nil
	}}
}

// ErrInjected is what the tests of this package inject.
var ErrInjected = errors.New("storetest: injected failure")

func (f *Faulty) r(method string) error { return f.Fail(method, false) }
func (f *Faulty) w(method string) error { return f.Fail(method, true) }

func (f *Faulty) CreateMachine(ctx context.Context, m *machine.Machine, evs ...machine.Event) error {
	if err := f.w("CreateMachine"); err != nil {
		return err
	}
	return f.Store.CreateMachine(ctx, m, evs...)
}

func (f *Faulty) GetMachine(ctx context.Context, idOrName string) (*machine.Machine, error) {
	if err := f.r("GetMachine"); err != nil {
		return nil, err
	}
	return f.Store.GetMachine(ctx, idOrName)
}

func (f *Faulty) MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error) {
	if err := f.r("MachineByMAC"); err != nil {
		return nil, err
	}
	return f.Store.MachineByMAC(ctx, mac)
}

func (f *Faulty) MachineBySerial(ctx context.Context, serial string) (*machine.Machine, error) {
	if err := f.r("MachineBySerial"); err != nil {
		return nil, err
	}
	return f.Store.MachineBySerial(ctx, serial)
}

func (f *Faulty) MachineByBMC(ctx context.Context, endpoint string) (*machine.Machine, error) {
	if err := f.r("MachineByBMC"); err != nil {
		return nil, err
	}
	return f.Store.MachineByBMC(ctx, endpoint)
}

func (f *Faulty) ListMachines(ctx context.Context, flt store.MachineFilter) ([]machine.Machine, error) {
	if err := f.r("ListMachines"); err != nil {
		return nil, err
	}
	return f.Store.ListMachines(ctx, flt)
}

func (f *Faulty) ChangeMachine(ctx context.Context, idOrName string, c store.Change) (*store.Changed, error) {
	if err := f.w("ChangeMachine"); err != nil {
		return nil, err
	}
	return f.Store.ChangeMachine(ctx, idOrName, c)
}

func (f *Faulty) DeleteMachine(ctx context.Context, idOrName string) error {
	if err := f.w("DeleteMachine"); err != nil {
		return err
	}
	return f.Store.DeleteMachine(ctx, idOrName)
}

func (f *Faulty) GetMachineRev(ctx context.Context, idOrName string) (*machine.Machine, uint64, error) {
	if err := f.r("GetMachineRev"); err != nil {
		return nil, 0, err
	}
	return f.Store.GetMachineRev(ctx, idOrName)
}

func (f *Faulty) MachineRevision(ctx context.Context, idOrName string) (uint64, error) {
	if err := f.r("MachineRevision"); err != nil {
		return 0, err
	}
	return f.Store.MachineRevision(ctx, idOrName)
}

func (f *Faulty) PutInventory(ctx context.Context, id string, inv machine.Inventory) (uint64, error) {
	if err := f.w("PutInventory"); err != nil {
		return 0, err
	}
	return f.Store.PutInventory(ctx, id, inv)
}

func (f *Faulty) Inventories(ctx context.Context, id string) ([]store.Snapshot, error) {
	if err := f.r("Inventories"); err != nil {
		return nil, err
	}
	return f.Store.Inventories(ctx, id)
}

func (f *Faulty) Inventory(ctx context.Context, id string, seq uint64) (*store.Snapshot, error) {
	if err := f.r("Inventory"); err != nil {
		return nil, err
	}
	return f.Store.Inventory(ctx, id, seq)
}

func (f *Faulty) AppendEvent(ctx context.Context, ev machine.Event) (machine.Event, error) {
	if err := f.w("AppendEvent"); err != nil {
		return ev, err
	}
	return f.Store.AppendEvent(ctx, ev)
}

func (f *Faulty) Events(ctx context.Context, id string, after uint64, limit int) ([]machine.Event, error) {
	if err := f.r("Events"); err != nil {
		return nil, err
	}
	return f.Store.Events(ctx, id, after, limit)
}

func (f *Faulty) PutLease(ctx context.Context, l store.Lease) error {
	if err := f.w("PutLease"); err != nil {
		return err
	}
	return f.Store.PutLease(ctx, l)
}

func (f *Faulty) LeaseByMAC(ctx context.Context, mac string) (*store.Lease, error) {
	if err := f.r("LeaseByMAC"); err != nil {
		return nil, err
	}
	return f.Store.LeaseByMAC(ctx, mac)
}

func (f *Faulty) LeaseByIP(ctx context.Context, ip netip.Addr) (*store.Lease, error) {
	if err := f.r("LeaseByIP"); err != nil {
		return nil, err
	}
	return f.Store.LeaseByIP(ctx, ip)
}

func (f *Faulty) ListLeases(ctx context.Context) ([]store.Lease, error) {
	if err := f.r("ListLeases"); err != nil {
		return nil, err
	}
	return f.Store.ListLeases(ctx)
}

func (f *Faulty) DeleteLease(ctx context.Context, mac string) error {
	if err := f.w("DeleteLease"); err != nil {
		return err
	}
	return f.Store.DeleteLease(ctx, mac)
}

func (f *Faulty) CreateJob(ctx context.Context, j *store.Job) error {
	if err := f.w("CreateJob"); err != nil {
		return err
	}
	return f.Store.CreateJob(ctx, j)
}

func (f *Faulty) GetJob(ctx context.Context, id string) (*store.Job, error) {
	if err := f.r("GetJob"); err != nil {
		return nil, err
	}
	return f.Store.GetJob(ctx, id)
}

func (f *Faulty) ListJobs(ctx context.Context, state store.JobState) ([]store.Job, error) {
	if err := f.r("ListJobs"); err != nil {
		return nil, err
	}
	return f.Store.ListJobs(ctx, state)
}

func (f *Faulty) UpdateJob(ctx context.Context, id string, fn func(*store.Job) error) (*store.Job, error) {
	if err := f.w("UpdateJob"); err != nil {
		return nil, err
	}
	return f.Store.UpdateJob(ctx, id, fn)
}

func (f *Faulty) UpdateJobRev(ctx context.Context, id string, rev uint64, fn func(*store.Job) error) (*store.Job, error) {
	if err := f.w("UpdateJobRev"); err != nil {
		return nil, err
	}
	return f.Store.UpdateJobRev(ctx, id, rev, fn)
}

func (f *Faulty) PutToken(ctx context.Context, t store.Token) error {
	if err := f.w("PutToken"); err != nil {
		return err
	}
	return f.Store.PutToken(ctx, t)
}

func (f *Faulty) TokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	if err := f.r("TokenByHash"); err != nil {
		return nil, err
	}
	return f.Store.TokenByHash(ctx, hash)
}

func (f *Faulty) ListTokens(ctx context.Context) ([]store.Token, error) {
	if err := f.r("ListTokens"); err != nil {
		return nil, err
	}
	return f.Store.ListTokens(ctx)
}

func (f *Faulty) FindTokens(ctx context.Context, flt store.TokenFilter) ([]store.Token, error) {
	if err := f.r("FindTokens"); err != nil {
		return nil, err
	}
	return f.Store.FindTokens(ctx, flt)
}

func (f *Faulty) DeleteToken(ctx context.Context, hash string) error {
	if err := f.w("DeleteToken"); err != nil {
		return err
	}
	return f.Store.DeleteToken(ctx, hash)
}

func (f *Faulty) PutSecret(ctx context.Context, s store.Secret) error {
	if err := f.w("PutSecret"); err != nil {
		return err
	}
	return f.Store.PutSecret(ctx, s)
}

func (f *Faulty) GetSecret(ctx context.Context, name string) (*store.Secret, error) {
	if err := f.r("GetSecret"); err != nil {
		return nil, err
	}
	return f.Store.GetSecret(ctx, name)
}

func (f *Faulty) ListSecrets(ctx context.Context) ([]store.Secret, error) {
	if err := f.r("ListSecrets"); err != nil {
		return nil, err
	}
	return f.Store.ListSecrets(ctx)
}

func (f *Faulty) DeleteSecret(ctx context.Context, name string) error {
	if err := f.w("DeleteSecret"); err != nil {
		return err
	}
	return f.Store.DeleteSecret(ctx, name)
}

func (f *Faulty) ReplaceSecrets(ctx context.Context, sealed []store.Secret) error {
	if err := f.w("ReplaceSecrets"); err != nil {
		return err
	}
	return f.Store.ReplaceSecrets(ctx, sealed)
}

func (f *Faulty) PutTelemetry(ctx context.Context, nodes []store.NodeTelemetry, days []store.PowerDay) error {
	if err := f.w("PutTelemetry"); err != nil {
		return err
	}
	return f.Store.PutTelemetry(ctx, nodes, days)
}

func (f *Faulty) ListNodeTelemetry(ctx context.Context) ([]store.NodeTelemetry, error) {
	if err := f.r("ListNodeTelemetry"); err != nil {
		return nil, err
	}
	return f.Store.ListNodeTelemetry(ctx)
}

func (f *Faulty) PowerDays(ctx context.Context, id, from string) ([]store.PowerDay, error) {
	if err := f.r("PowerDays"); err != nil {
		return nil, err
	}
	return f.Store.PowerDays(ctx, id, from)
}

func (f *Faulty) DeletePowerDaysBefore(ctx context.Context, day string) (int, error) {
	if err := f.w("DeletePowerDaysBefore"); err != nil {
		return 0, err
	}
	return f.Store.DeletePowerDaysBefore(ctx, day)
}

func (f *Faulty) PutPowerSummaries(ctx context.Context, days []store.PowerDay) error {
	if err := f.w("PutPowerSummaries"); err != nil {
		return err
	}
	return f.Store.PutPowerSummaries(ctx, days)
}

func (f *Faulty) PowerSummaries(ctx context.Context, id, from string) ([]store.PowerDay, error) {
	if err := f.r("PowerSummaries"); err != nil {
		return nil, err
	}
	return f.Store.PowerSummaries(ctx, id, from)
}

func (f *Faulty) DeletePowerSummariesBefore(ctx context.Context, day string) (int, error) {
	if err := f.w("DeletePowerSummariesBefore"); err != nil {
		return 0, err
	}
	return f.Store.DeletePowerSummariesBefore(ctx, day)
}

func (f *Faulty) DeleteTelemetry(ctx context.Context, id string) error {
	if err := f.w("DeleteTelemetry"); err != nil {
		return err
	}
	return f.Store.DeleteTelemetry(ctx, id)
}

func (f *Faulty) SwapFence(ctx context.Context, key, old, value string) error {
	if err := f.w("SwapFence"); err != nil {
		return err
	}
	return f.Store.SwapFence(ctx, key, old, value)
}

func (f *Faulty) Fence(ctx context.Context, key string) (string, error) {
	if err := f.r("Fence"); err != nil {
		return "", err
	}
	return f.Store.Fence(ctx, key)
}

func (f *Faulty) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := f.r("Backup"); err != nil {
		return 0, err
	}
	return f.Store.Backup(ctx, w)
}

func (f *Faulty) Check(ctx context.Context) error {
	if err := f.r("Check"); err != nil {
		return err
	}
	return f.Store.Check(ctx)
}

// Location names the wrapped store ("faulty" without one).
func (f *Faulty) Location() string {
	if f.Store == nil {
		return "faulty"
	}
	return f.Store.Location()
}

// Stats are the wrapped store's (none without one).
func (f *Faulty) Stats() []store.Stat {
	if f.Store == nil {
		return nil
	}
	return f.Store.Stats()
}

// Close closes the wrapped store, if any.
func (f *Faulty) Close() error {
	if f.Store == nil {
		return nil
	}
	return f.Store.Close()
}
