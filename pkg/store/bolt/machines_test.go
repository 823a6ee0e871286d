package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// fixedClock returns a clock that starts at a fixed instant and advances one
// second per call, so records have distinct, predictable times.
func fixedClock() func() time.Time {
	t := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

func mustCreate(t *testing.T, s store.Store, m machine.Machine) machine.Machine {
	t.Helper()
	if err := s.CreateMachine(context.Background(), &m); err != nil {
		t.Fatalf("CreateMachine(%s): %v", m.Name, err)
	}
	return m
}

func TestCreateMachineFillsDefaults(t *testing.T) {
	s := openTest(t, store.Options{Now: fixedClock()})
	m := mustCreate(t, s, machine.Machine{Name: "gpu-01", MACs: []string{"52-54-00-AA-BB-01"}})
	if !strings.HasPrefix(m.ID, "m-") || len(m.ID) != 12 {
		t.Errorf("ID = %q, want m- and 10 hex characters", m.ID)
	}
	want := machine.Machine{ID: m.ID, Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"},
		State: machine.StateEnrolled, Created: time.Date(2026, 11, 29, 12, 0, 1, 0, time.UTC),
		Updated: time.Date(2026, 11, 29, 12, 0, 1, 0, time.UTC)}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("created machine (-want +got):\n%s", diff)
	}
	got, err := s.GetMachine(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("stored machine (-want +got):\n%s", diff)
	}
}

func TestMachineLookups(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{})
	m := mustCreate(t, s, machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01", "52:54:00:aa:bb:02"},
		Serial: "SN123", BMC: machine.BMC{Endpoint: "https://10.0.0.5/"}})
	mustCreate(t, s, machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:aa:bb:03"}})

	tests := map[string]struct {
		get     func() (*machine.Machine, error)
		wantErr error
	}{
		"by ID":               {get: func() (*machine.Machine, error) { return s.GetMachine(ctx, m.ID) }},
		"by name":             {get: func() (*machine.Machine, error) { return s.GetMachine(ctx, "gpu-01") }},
		"by MAC, dashes":      {get: func() (*machine.Machine, error) { return s.MachineByMAC(ctx, "52-54-00-AA-BB-02") }},
		"by serial":           {get: func() (*machine.Machine, error) { return s.MachineBySerial(ctx, " SN123 ") }},
		"by BMC, other case":  {get: func() (*machine.Machine, error) { return s.MachineByBMC(ctx, "HTTPS://10.0.0.5") }},
		"unknown name":        {get: func() (*machine.Machine, error) { return s.GetMachine(ctx, "gpu-99") }, wantErr: store.ErrNotFound},
		"unknown MAC":         {get: func() (*machine.Machine, error) { return s.MachineByMAC(ctx, "52:54:00:00:00:00") }, wantErr: store.ErrNotFound},
		"empty serial":        {get: func() (*machine.Machine, error) { return s.MachineBySerial(ctx, "") }, wantErr: store.ErrNotFound},
		"unknown BMC":         {get: func() (*machine.Machine, error) { return s.MachineByBMC(ctx, "https://10.0.0.6") }, wantErr: store.ErrNotFound},
		"bad MAC is an error": {get: func() (*machine.Machine, error) { return s.MachineByMAC(ctx, "zz") }, wantErr: errAny},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.get()
			if tc.wantErr != nil {
				if err == nil || (tc.wantErr != errAny && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("got (%v, %v), want error %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != m.ID {
				t.Errorf("got machine %s (%s), want %s", got.Name, got.ID, m.ID)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestCreateMachineConflicts(t *testing.T) {
	s := openTest(t, store.Options{})
	first := mustCreate(t, s, machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"},
		Serial: "SN1", BMC: machine.BMC{Endpoint: "https://10.0.0.5"}})
	tests := map[string]struct {
		m       machine.Machine
		wantErr error
		wantMsg string
	}{
		"same name":   {machine.Machine{Name: "gpu-01"}, store.ErrExists, "name gpu-01 already belongs to machine gpu-01 (" + first.ID + ")"},
		"same MAC":    {machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:AA:BB:01"}}, store.ErrConflict, "MAC 52:54:00:aa:bb:01 already belongs to machine gpu-01"},
		"same serial": {machine.Machine{Name: "gpu-02", Serial: "SN1"}, store.ErrConflict, "serial SN1 already belongs to machine gpu-01"},
		"same BMC":    {machine.Machine{Name: "gpu-02", BMC: machine.BMC{Endpoint: "https://10.0.0.5/"}}, store.ErrConflict, "BMC endpoint https://10.0.0.5 already belongs"},
		"same ID":     {machine.Machine{ID: first.ID, Name: "gpu-02"}, store.ErrExists, "machine ID " + first.ID},
		"MAC twice":   {machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:aa:bb:09", "52-54-00-aa-bb-09"}}, nil, "macs[1]: MAC 52:54:00:aa:bb:09 listed twice"},
		"bad MAC":     {machine.Machine{Name: "gpu-02", MACs: []string{"zz"}}, nil, `MAC "zz": expected six hex bytes`},
		"no name":     {machine.Machine{}, nil, "name is empty"},
		"bad state":   {machine.Machine{Name: "gpu-02", State: "sleeping"}, nil, `state "sleeping" is not one of`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := tc.m
			err := s.CreateMachine(context.Background(), &m)
			if err == nil {
				t.Fatal("CreateMachine succeeded, want an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v is not %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
	all, err := s.ListMachines(context.Background(), store.MachineFilter{})
	if err != nil || len(all) != 1 {
		t.Errorf("after failed creates: %d machines, %v; want only the first", len(all), err)
	}
}

func TestChangeMachineMovesIndexes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{})
	a := mustCreate(t, s, machine.Machine{Name: "a", MACs: []string{"52:54:00:00:00:01"}, Serial: "S1"})
	b := mustCreate(t, s, machine.Machine{Name: "b", MACs: []string{"52:54:00:00:00:02"}})

	got, err := update(ctx, s, "a", func(m *machine.Machine) error {
		m.Name = "a2"
		m.MACs = []string{"52:54:00:00:00:03"}
		m.Serial = "S2"
		m.State = machine.StateReady
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "a2" || !got.Created.Equal(a.Created) || got.ID != a.ID {
		t.Errorf("updated = %+v", got)
	}
	for _, old := range []func() error{
		func() error { _, err := s.GetMachine(ctx, "a"); return err },
		func() error { _, err := s.MachineByMAC(ctx, "52:54:00:00:00:01"); return err },
		func() error { _, err := s.MachineBySerial(ctx, "S1"); return err },
	} {
		if err := old(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("old index entry still resolves: %v", err)
		}
	}
	if m, err := s.MachineByMAC(ctx, "52:54:00:00:00:03"); err != nil || m.ID != a.ID {
		t.Errorf("new MAC: %v, %v", m, err)
	}
	// The old MAC is free again.
	mustCreate(t, s, machine.Machine{Name: "c", MACs: []string{"52:54:00:00:00:01"}})

	// Taking b's MAC fails and changes nothing.
	_, err = update(ctx, s, a.ID, func(m *machine.Machine) error {
		m.MACs = append(m.MACs, "52:54:00:00:00:02")
		m.Rack = "r9"
		return nil
	})
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "machine b ("+b.ID+")") {
		t.Errorf("stealing b's MAC: %v, want ErrConflict naming b", err)
	}
	if m, _ := s.GetMachine(ctx, a.ID); m.Rack != "" {
		t.Errorf("failed update was stored: rack %q", m.Rack)
	}
	// fn's error aborts; changing the ID is refused.
	boom := errors.New("boom")
	if _, err := update(ctx, s, a.ID, func(*machine.Machine) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fn error: %v", err)
	}
	if _, err := update(ctx, s, a.ID, func(m *machine.Machine) error { m.ID = "m-x"; return nil }); err == nil {
		t.Error("changing the ID succeeded")
	}
	if _, err := update(ctx, s, "nope", func(*machine.Machine) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown machine: %v", err)
	}
}

func TestDeleteMachine(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, store.Options{})
	a := mustCreate(t, s, machine.Machine{Name: "a", MACs: []string{"52:54:00:00:00:01"}, Serial: "S1",
		BMC: machine.BMC{Endpoint: "http://127.0.0.1:8443"}})
	if _, err := s.PutInventory(ctx, a.ID, machine.Inventory{Source: "redfish"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: "a", Kind: "enrolled"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMachine(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMachine(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	// Every name and address is free for a new machine, whose history starts empty.
	b := mustCreate(t, s, machine.Machine{Name: "a", MACs: []string{"52:54:00:00:00:01"}, Serial: "S1",
		BMC: machine.BMC{Endpoint: "http://127.0.0.1:8443"}})
	if evs, err := s.Events(ctx, b.ID, 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("events of the new machine: %v, %v", evs, err)
	}
	if _, err := s.Inventories(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inventory of the deleted machine: %v", err)
	}
}

func TestListMachinesFilter(t *testing.T) {
	s := openTest(t, store.Options{})
	for _, m := range []machine.Machine{
		{Name: "c", Recipe: "gpu-train", Rack: "r1"},
		{Name: "a", Recipe: "gpu-train", State: machine.StateReady, Rack: "r2"},
		{Name: "b", Recipe: "lab-qemu", Rack: "r1"},
	} {
		mustCreate(t, s, m)
	}
	tests := map[string]struct {
		f    store.MachineFilter
		want []string
	}{
		"all":          {store.MachineFilter{}, []string{"a", "b", "c"}},
		"recipe":       {store.MachineFilter{Recipe: "gpu-train"}, []string{"a", "c"}},
		"state":        {store.MachineFilter{State: machine.StateEnrolled}, []string{"b", "c"}},
		"rack+recipe":  {store.MachineFilter{Rack: "r1", Recipe: "gpu-train"}, []string{"c"}},
		"matches none": {store.MachineFilter{Recipe: "nope"}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ms, err := s.ListMachines(context.Background(), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestClosedAndCancelled(t *testing.T) {
	s := openTest(t, store.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.GetMachine(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListMachines(context.Background(), store.MachineFilter{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed store: %v", err)
	}
	if err := s.PutLease(context.Background(), store.Lease{MAC: "52:54:00:00:00:01", IP: mustAddr("10.0.0.1")}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed store, PutLease: %v", err)
	}
}

func TestOpenLockedByAnotherOpener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingot.db")
	s, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = bolt.Open(path, store.Options{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "database is locked by another ingot process") {
		t.Fatalf("second Open: %v; want ErrLocked naming %s", err, path)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("gave up after %s, well before the 100ms timeout", waited)
	}
}
