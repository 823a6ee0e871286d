package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// fakeStore is an in-memory Store for unit tests only; the integration
// tests use the real bbolt store.
type fakeStore struct {
	mu       sync.Mutex
	leases   map[string]store.Lease // by MAC
	byIP     map[netip.Addr]string
	machines map[string]*machine.Machine // by MAC
	fail     error                       // returned by every call when set
}

func newFakeStore(ms ...*machine.Machine) *fakeStore {
	f := &fakeStore{leases: map[string]store.Lease{}, byIP: map[netip.Addr]string{}, machines: map[string]*machine.Machine{}}
	for _, m := range ms {
		for _, mac := range m.MACs {
			f.machines[mac] = m
		}
	}
	return f
}

func (f *fakeStore) LeaseByMAC(_ context.Context, mac string) (*store.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	l, ok := f.leases[mac]
	if !ok {
		return nil, fmt.Errorf("lease %s: %w", mac, store.ErrNotFound)
	}
	return &l, nil
}

func (f *fakeStore) LeaseByIP(_ context.Context, ip netip.Addr) (*store.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	mac, ok := f.byIP[ip]
	if !ok {
		return nil, fmt.Errorf("lease %s: %w", ip, store.ErrNotFound)
	}
	l := f.leases[mac]
	return &l, nil
}

func (f *fakeStore) PutLease(_ context.Context, l store.Lease) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if old, ok := f.leases[l.MAC]; ok && f.byIP[old.IP] == l.MAC {
		delete(f.byIP, old.IP)
	}
	f.leases[l.MAC] = l
	f.byIP[l.IP] = l.MAC
	return nil
}

func (f *fakeStore) ListLeases(context.Context) ([]store.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Lease
	for _, l := range f.leases {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MAC < out[j].MAC })
	return out, f.fail
}

func (f *fakeStore) DeleteLease(_ context.Context, mac string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.leases[mac]; ok && f.byIP[l.IP] == mac {
		delete(f.byIP, l.IP)
	}
	delete(f.leases, mac)
	return f.fail
}

func (f *fakeStore) MachineByMAC(_ context.Context, mac string) (*machine.Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	m, ok := f.machines[mac]
	if !ok {
		return nil, fmt.Errorf("machine %s: %w", mac, store.ErrNotFound)
	}
	c := *m
	return &c, nil
}

// Discover records an unknown client as the fleet service does.
func (f *fakeStore) Discover(ctx context.Context, mac, arch, _ string) (*machine.Machine, error) {
	if m, err := f.MachineByMAC(ctx, mac); err == nil {
		return m, nil
	}
	id := "mac-" + strings.ReplaceAll(mac, ":", "")
	m := &machine.Machine{ID: id, Name: id, MACs: []string{mac}, Arch: arch, State: machine.StateDiscovered}
	return m, f.CreateMachine(ctx, m)
}

func (f *fakeStore) CreateMachine(_ context.Context, m *machine.Machine) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	for _, mac := range m.MACs {
		if _, ok := f.machines[mac]; ok {
			return fmt.Errorf("machine %s: %w", mac, store.ErrExists)
		}
	}
	c := *m
	for _, mac := range m.MACs {
		f.machines[mac] = &c
	}
	return nil
}

// dump renders the store's state for golden files.
func (f *fakeStore) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	var macs []string
	for mac := range f.leases {
		macs = append(macs, mac)
	}
	sort.Strings(macs)
	for _, mac := range macs {
		l := f.leases[mac]
		fmt.Fprintf(&b, "lease %s %s %s subnet=%s machine=%s host=%q expires=%s\n", l.MAC, l.IP, l.State, l.Subnet,
			l.MachineID, l.Hostname, l.Expires.Format("2006-01-02T15:04:05Z"))
	}
	macs = macs[:0]
	for mac := range f.machines {
		macs = append(macs, mac)
	}
	sort.Strings(macs)
	for _, mac := range macs {
		m := f.machines[mac]
		fmt.Fprintf(&b, "machine %s id=%s state=%s arch=%s ipv4=%s\n", mac, m.ID, m.State, m.Arch, m.IPv4)
	}
	return b.String()
}
