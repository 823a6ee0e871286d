package store_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

func TestLeaseLive(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		state   string
		expires time.Time
		want    bool
	}{
		"bound, not expired":     {store.LeaseBound, now.Add(time.Second), true},
		"offered, not expired":   {store.LeaseOffered, now.Add(time.Hour), true},
		"bound, expires now":     {store.LeaseBound, now, false},
		"bound, expired":         {store.LeaseBound, now.Add(-time.Second), false},
		"released, not expired":  {store.LeaseReleased, now.Add(time.Hour), false},
		"declined, not expired":  {store.LeaseDeclined, now.Add(time.Hour), false},
		"unknown state":          {"", now.Add(time.Hour), false},
		"bound, zero expiry set": {store.LeaseBound, time.Time{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := store.Lease{MAC: "52:54:00:00:00:01", State: tc.state, Expires: tc.expires}
			if got := store.LeaseLive(l, now); got != tc.want {
				t.Errorf("LeaseLive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLeaseConflict(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	ip := netip.MustParseAddr("10.0.0.5")
	put := store.Lease{MAC: "52:54:00:00:00:02", IP: ip, State: store.LeaseBound, Expires: now.Add(time.Hour)}
	live := store.Lease{MAC: "52:54:00:00:00:01", IP: ip, State: store.LeaseBound, Expires: now.Add(time.Minute)}
	with := func(f func(*store.Lease)) *store.Lease { l := live; f(&l); return &l }
	tests := map[string]struct {
		holder   *store.Lease
		conflict bool
	}{
		"no holder":              {nil, false},
		"live lease of another":  {&live, true},
		"same MAC":               {with(func(l *store.Lease) { l.MAC = put.MAC }), false},
		"holder moved elsewhere": {with(func(l *store.Lease) { l.IP = netip.MustParseAddr("10.0.0.6") }), false},
		"holder expired":         {with(func(l *store.Lease) { l.Expires = now.Add(-time.Minute) }), false},
		"holder released":        {with(func(l *store.Lease) { l.State = store.LeaseReleased }), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := store.LeaseConflict(tc.holder, put, now)
			if got := errors.Is(err, store.ErrConflict); got != tc.conflict {
				t.Fatalf("LeaseConflict = %v; want conflict %v", err, tc.conflict)
			}
			if tc.conflict && !strings.Contains(err.Error(), "IP 10.0.0.5 is leased to 52:54:00:00:00:01 until 2025-01-01T12:01:00Z") {
				t.Errorf("message %q does not name the holder and its expiry", err)
			}
		})
	}
}

func TestOldestKept(t *testing.T) {
	tests := map[string]struct {
		newest uint64
		keep   int
		want   uint64
	}{
		"fewer than keep":  {3, 5, 1},
		"exactly keep":     {5, 5, 1},
		"one over":         {6, 5, 2},
		"many over":        {100, 20, 81},
		"keep one":         {9, 1, 9},
		"keep zero: all":   {9, 0, 1},
		"nothing yet kept": {0, 5, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := store.OldestKept(tc.newest, tc.keep); got != tc.want {
				t.Errorf("OldestKept(%d, %d) = %d, want %d", tc.newest, tc.keep, got, tc.want)
			}
		})
	}
}

func TestMachineKeys(t *testing.T) {
	m := machine.Machine{Name: "gpu-01", MACs: []string{"52-54-00-AA-BB-01", "52:54:00:aa:bb:02"}, Serial: " SN1 ",
		BMC: machine.BMC{Endpoint: " HTTPS://10.0.0.5/ "}}
	if err := store.NormalizeMachine(&m); err != nil {
		t.Fatal(err)
	}
	want := []store.UniqueKey{{Kind: store.KeyName, Value: "gpu-01"}, {Kind: store.KeyMAC, Value: "52:54:00:aa:bb:01"}, {Kind: store.KeyMAC, Value: "52:54:00:aa:bb:02"},
		{Kind: store.KeySerial, Value: "SN1"}, {Kind: store.KeyBMC, Value: "https://10.0.0.5"}}
	if diff := cmp.Diff(want, store.MachineKeys(&m)); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	bare := machine.Machine{Name: "gpu-02"}
	if diff := cmp.Diff([]store.UniqueKey{{Kind: store.KeyName, Value: "gpu-02"}}, store.MachineKeys(&bare)); diff != "" {
		t.Errorf("keys of a bare machine (-want +got):\n%s", diff)
	}
	dup := machine.Machine{Name: "gpu-03", MACs: []string{"52:54:00:aa:bb:01", "52-54-00-AA-BB-01"}}
	if err := store.NormalizeMachine(&dup); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("a MAC listed twice in two notations: %v", err)
	}
}

func TestKeyTaken(t *testing.T) {
	tests := map[store.KeyKind]error{store.KeyName: store.ErrExists, store.KeyMAC: store.ErrConflict,
		store.KeySerial: store.ErrConflict, store.KeyBMC: store.ErrConflict}
	for kind, want := range tests {
		t.Run(string(kind), func(t *testing.T) {
			err := store.KeyTaken(store.UniqueKey{Kind: kind, Value: "v"}, "gpu-01 (m-1)")
			if !errors.Is(err, want) || !strings.Contains(err.Error(), string(kind)+" v already belongs to machine gpu-01 (m-1)") {
				t.Errorf("KeyTaken = %v; want %v naming the owner", err, want)
			}
		})
	}
}

func TestCheckRevision(t *testing.T) {
	if err := store.CheckRevision("job j-1", 4, 4); err != nil {
		t.Errorf("same revision: %v", err)
	}
	err := store.CheckRevision("job j-1", 5, 4)
	if !errors.Is(err, store.ErrStale) || !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "job j-1 is at revision 5, not 4") {
		t.Errorf("stale revision: %v; want ErrStale (and ErrConflict) naming both revisions", err)
	}
}

func TestUpdatedRecordsKeepWhatTheStoreOwns(t *testing.T) {
	created := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	old := &machine.Machine{ID: "m-1", Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}, Created: created}
	m, err := store.UpdatedMachineRecord(old, func(m *machine.Machine) error {
		m.Created = time.Time{}
		m.MACs[0] = "52-54-00-AA-BB-09"
		return nil
	}, now)
	if err != nil || !m.Created.Equal(created) || !m.Updated.Equal(now) || m.MACs[0] != "52:54:00:aa:bb:09" {
		t.Errorf("updated machine = %+v, %v", m, err)
	}
	if old.MACs[0] != "52:54:00:aa:bb:01" {
		t.Errorf("fn edited the old record's MACs: %v", old.MACs)
	}
	if _, err := store.UpdatedMachineRecord(old, func(m *machine.Machine) error { m.ID = "m-2"; return nil }, now); err == nil {
		t.Error("an ID change was allowed")
	}
	oldJob := &store.Job{ID: "j-1", Kind: "reimage", Created: created, Revision: 7}
	j, err := store.UpdatedJobRecord(oldJob, func(j *store.Job) error { j.Revision = 99; j.Step = "x"; return nil }, now)
	if err != nil || j.Revision != 7 || j.Step != "x" || !j.Created.Equal(created) || !j.Updated.Equal(now) {
		t.Errorf("updated job = %+v, %v; want the revision left for the backend", j, err)
	}
}
