package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// machineCases check MachineStore.
var machineCases = []conformanceCase{
	{"machines/create fills defaults, get by ID and name", machineCreateGet},
	{"machines/unique keys refused with the owner named", machineUniqueKeys},
	{"machines/MACs, serials and BMC endpoints normalized", machineNormalize},
	{"machines/update keeps the keys in step", machineUpdateKeys},
	{"machines/update aborted by fn stores nothing", machineUpdateAborts},
	{"machines/records handed in and out are copies", machineCopies},
	{"machines/delete removes keys, inventory and events", machineDelete},
	{"machines/list filters and sorts by name", machineList},
}

func machineCreateGet(t *testing.T, e env) {
	m := machine.Machine{Name: "gpu-01", Recipe: "h100"}
	if err := e.s.CreateMachine(e.ctx, &m); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.ID, "m-") || len(m.ID) != len("m-")+10 {
		t.Errorf("generated ID %q; want m- and 10 hex characters (store.NewMachineID)", m.ID)
	}
	if m.State != machine.StateEnrolled || !m.Created.Equal(start) || !m.Updated.Equal(start) {
		t.Errorf("created %+v; want state enrolled, Created and Updated from the store's clock (%s)", m, start)
	}
	for _, key := range []string{m.ID, m.Name} {
		got, err := e.s.GetMachine(e.ctx, key)
		if err != nil {
			t.Fatalf("GetMachine(%s): %v", key, err)
		}
		if diff := cmp.Diff(m, *got); diff != "" {
			t.Errorf("GetMachine(%s) (-created +got):\n%s", key, diff)
		}
	}
	_, err := e.s.GetMachine(e.ctx, "gpu-99")
	wantIs(t, "GetMachine of an unknown name", err, store.ErrNotFound)
	_, err = e.s.GetMachine(e.ctx, "")
	wantIs(t, "GetMachine of an empty key", err, store.ErrNotFound)
	given := e.create(t, machine.Machine{ID: "m-given", Name: "gpu-02", State: machine.StateReady})
	if given.ID != "m-given" || given.State != machine.StateReady {
		t.Errorf("caller's ID and state not kept: %+v", given)
	}
	if err := e.s.CreateMachine(e.ctx, &machine.Machine{Name: ""}); err == nil {
		t.Error("a machine without a name was stored")
	}
}

func machineUniqueKeys(t *testing.T, e env) {
	first := e.create(t, machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}, Serial: "SN1",
		BMC: machine.BMC{Endpoint: "https://10.0.0.5"}})
	owner := []string{"gpu-01", first.ID}
	tests := map[string]struct {
		m      machine.Machine
		update bool // give the keys to an existing machine instead
		want   error
		parts  []string
	}{
		"same ID":            {m: machine.Machine{ID: first.ID, Name: "gpu-02"}, want: store.ErrExists},
		"same name":          {m: machine.Machine{Name: "gpu-01"}, want: store.ErrExists, parts: append([]string{"name gpu-01"}, owner...)},
		"same MAC":           {m: machine.Machine{Name: "gpu-02", MACs: []string{"52-54-00-AA-BB-01"}}, want: store.ErrConflict, parts: append([]string{"MAC 52:54:00:aa:bb:01"}, owner...)},
		"same serial":        {m: machine.Machine{Name: "gpu-02", Serial: " SN1 "}, want: store.ErrConflict, parts: append([]string{"serial SN1"}, owner...)},
		"same BMC endpoint":  {m: machine.Machine{Name: "gpu-02", BMC: machine.BMC{Endpoint: "HTTPS://10.0.0.5/"}}, want: store.ErrConflict, parts: append([]string{"BMC endpoint https://10.0.0.5"}, owner...)},
		"rename onto a name": {m: machine.Machine{Name: "gpu-01"}, update: true, want: store.ErrExists, parts: owner},
		"update onto a MAC":  {m: machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:aa:bb:01"}}, update: true, want: store.ErrConflict, parts: owner},
		"update onto serial": {m: machine.Machine{Name: "gpu-02", Serial: "SN1"}, update: true, want: store.ErrConflict, parts: owner},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.update {
				other := e.create(t, machine.Machine{Name: "other-" + strings.ReplaceAll(name, " ", "-")})
				_, err = e.update(other.ID, func(m *machine.Machine) error {
					m.Name, m.MACs, m.Serial = tc.m.Name, tc.m.MACs, tc.m.Serial
					return nil
				})
				if got, gerr := e.s.GetMachine(e.ctx, other.ID); gerr != nil || got.Name != other.Name {
					t.Errorf("refused update changed the machine: %+v, %v", got, gerr)
				}
			} else {
				m := tc.m
				err = e.s.CreateMachine(e.ctx, &m)
			}
			wantIs(t, name, err, tc.want)
			wantMsg(t, name, err, tc.parts...)
			if got, gerr := e.s.GetMachine(e.ctx, first.ID); gerr != nil || got.Name != "gpu-01" {
				t.Errorf("the owner changed: %+v, %v", got, gerr)
			}
			if got, gerr := e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:01"); gerr != nil || got.ID != first.ID {
				t.Errorf("the owner lost its MAC: %+v, %v", got, gerr)
			}
		})
	}
}

func machineNormalize(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01", MACs: []string{"52-54-00-AA-BB-01", "5254.00aa.bb02"},
		Serial: "  SN1\t", BMC: machine.BMC{Endpoint: " https://BMC-01.example/ "}})
	if diff := cmp.Diff([]string{"52:54:00:aa:bb:01", "52:54:00:aa:bb:02"}, m.MACs); diff != "" {
		t.Errorf("stored MACs (-want +got):\n%s", diff)
	}
	if m.Serial != "SN1" {
		t.Errorf("stored serial %q; want it trimmed", m.Serial)
	}
	lookups := map[string]func() (*machine.Machine, error){
		"MAC, colon":            func() (*machine.Machine, error) { return e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:01") },
		"MAC, upper-case dash":  func() (*machine.Machine, error) { return e.s.MachineByMAC(e.ctx, "52-54-00-AA-BB-01") },
		"MAC, dotted":           func() (*machine.Machine, error) { return e.s.MachineByMAC(e.ctx, "5254.00aa.bb02") },
		"serial, padded":        func() (*machine.Machine, error) { return e.s.MachineBySerial(e.ctx, " SN1 ") },
		"BMC, case and slash":   func() (*machine.Machine, error) { return e.s.MachineByBMC(e.ctx, "HTTPS://bmc-01.example/") },
		"BMC, as stored":        func() (*machine.Machine, error) { return e.s.MachineByBMC(e.ctx, "https://bmc-01.example") },
		"ID through GetMachine": func() (*machine.Machine, error) { return e.s.GetMachine(e.ctx, m.ID) },
	}
	for name, lookup := range lookups {
		t.Run(name, func(t *testing.T) {
			got, err := lookup()
			if err != nil || got.ID != m.ID {
				t.Errorf("found %+v, %v; want %s", got, err, m.ID)
			}
		})
	}
	misses := map[string]func() (*machine.Machine, error){
		"other MAC":    func() (*machine.Machine, error) { return e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:03") },
		"other serial": func() (*machine.Machine, error) { return e.s.MachineBySerial(e.ctx, "SN2") },
		"empty serial": func() (*machine.Machine, error) { return e.s.MachineBySerial(e.ctx, "") },
		"other BMC":    func() (*machine.Machine, error) { return e.s.MachineByBMC(e.ctx, "https://bmc-02.example") },
	}
	for name, lookup := range misses {
		t.Run(name, func(t *testing.T) {
			_, err := lookup()
			wantIs(t, name, err, store.ErrNotFound)
		})
	}
	if _, err := e.s.MachineByMAC(e.ctx, "not-a-mac"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("MachineByMAC of a malformed MAC: %v; want a parse error, not ErrNotFound", err)
	}
	err := e.s.CreateMachine(e.ctx, &machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:aa:bb:09", "52-54-00-AA-BB-09"}})
	wantMsg(t, "a MAC listed twice in two notations", err, "listed twice")
}

func machineUpdateKeys(t *testing.T, e env) {
	old := e.create(t, machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}, Serial: "SN1",
		BMC: machine.BMC{Endpoint: "https://10.0.0.1"}})
	e.clk.Advance(time.Minute)
	got, err := e.update("gpu-01", func(m *machine.Machine) error {
		m.Name, m.MACs, m.Serial, m.BMC.Endpoint = "gpu-01b", []string{"52-54-00-AA-BB-02"}, "SN2", "https://10.0.0.2"
		m.Created = time.Time{} // the store keeps Created whatever fn does
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.MACs[0] != "52:54:00:aa:bb:02" || !got.Created.Equal(old.Created) || !got.Updated.Equal(start.Add(time.Minute)) {
		t.Errorf("updated %+v; want the MAC normalized, Created kept, Updated from the clock", got)
	}
	gone := map[string]func() (*machine.Machine, error){
		"old name":   func() (*machine.Machine, error) { return e.s.GetMachine(e.ctx, "gpu-01") },
		"old MAC":    func() (*machine.Machine, error) { return e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:01") },
		"old serial": func() (*machine.Machine, error) { return e.s.MachineBySerial(e.ctx, "SN1") },
		"old BMC":    func() (*machine.Machine, error) { return e.s.MachineByBMC(e.ctx, "https://10.0.0.1") },
	}
	for name, lookup := range gone {
		_, err := lookup()
		wantIs(t, name+" after the update", err, store.ErrNotFound)
	}
	found := map[string]func() (*machine.Machine, error){
		"new name":   func() (*machine.Machine, error) { return e.s.GetMachine(e.ctx, "gpu-01b") },
		"new MAC":    func() (*machine.Machine, error) { return e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:02") },
		"new serial": func() (*machine.Machine, error) { return e.s.MachineBySerial(e.ctx, "SN2") },
		"new BMC":    func() (*machine.Machine, error) { return e.s.MachineByBMC(e.ctx, "https://10.0.0.2") },
	}
	for name, lookup := range found {
		if m, err := lookup(); err != nil || m.ID != old.ID {
			t.Errorf("%s after the update: %+v, %v; want %s", name, m, err, old.ID)
		}
	}
	// The keys given up are free for another machine.
	e.create(t, machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}, Serial: "SN1",
		BMC: machine.BMC{Endpoint: "https://10.0.0.1"}})
	_, err = e.update("gpu-99", func(*machine.Machine) error { return nil })
	wantIs(t, "ChangeMachine of an unknown machine", err, store.ErrNotFound)
}

func machineUpdateAborts(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}})
	rev, err := e.s.MachineRevision(e.ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("refused by fn")
	tests := map[string]struct {
		fn   func(*machine.Machine) error
		want error // nil: any error
	}{
		"fn fails":          {func(m *machine.Machine) error { m.Name = "changed"; m.MACs = nil; return boom }, boom},
		"fn changes ID":     {func(m *machine.Machine) error { m.ID = "m-other"; return nil }, nil},
		"fn breaks a MAC":   {func(m *machine.Machine) error { m.MACs = []string{"zz"}; return nil }, nil},
		"fn empties name":   {func(m *machine.Machine) error { m.Name = ""; return nil }, nil},
		"fn sets bad state": {func(m *machine.Machine) error { m.State = "sleepy"; return nil }, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := e.update(m.ID, tc.fn)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("ChangeMachine: %v; want %v", err, tc.want)
			}
			got, gerr := e.s.GetMachine(e.ctx, m.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if diff := cmp.Diff(m, *got); diff != "" {
				t.Errorf("aborted update stored something (-before +after):\n%s", diff)
			}
			if r, _ := e.s.MachineRevision(e.ctx, m.ID); r != rev {
				t.Errorf("aborted update moved the revision from %d to %d", rev, r)
			}
			if found, err := e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:01"); err != nil || found.ID != m.ID {
				t.Errorf("aborted update lost the MAC index: %v, %v", found, err)
			}
		})
	}
}

func machineCopies(t *testing.T, e env) {
	in := machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}}
	if err := e.s.CreateMachine(e.ctx, &in); err != nil {
		t.Fatal(err)
	}
	in.MACs[0] = "52:54:00:aa:bb:99" // the caller's slice, after the call
	in.Name = "edited"
	out, err := e.s.GetMachine(e.ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	out.MACs[0] = "52:54:00:aa:bb:98"
	out.Rack = "edited"
	var seen *machine.Machine
	_, err = e.update(in.ID, func(m *machine.Machine) error { seen = m; return nil })
	if err != nil {
		t.Fatal(err)
	}
	seen.MACs[0] = "52:54:00:aa:bb:97" // fn's argument, after the call
	got, err := e.s.GetMachine(e.ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "gpu-01" || got.Rack != "" || got.MACs[0] != "52:54:00:aa:bb:01" {
		t.Errorf("stored %+v; edits of records handed in or out reached the store", got)
	}
	// A refused create leaves the caller's record as it was.
	refused := machine.Machine{Name: "gpu-02", MACs: []string{"52-54-00-AA-BB-02", "52:54:00:aa:bb:02"}}
	before := refused
	before.MACs = []string{"52-54-00-AA-BB-02", "52:54:00:aa:bb:02"}
	if err := e.s.CreateMachine(e.ctx, &refused); err == nil {
		t.Fatal("a machine listing one MAC twice was stored")
	}
	if diff := cmp.Diff(before, refused); diff != "" {
		t.Errorf("a refused create edited the caller's record (-before +after):\n%s", diff)
	}
}

func machineDelete(t *testing.T, e env) {
	m := e.create(t, machine.Machine{ID: "m-again", Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}, Serial: "SN1",
		BMC: machine.BMC{Endpoint: "https://10.0.0.1"}})
	keep := e.create(t, machine.Machine{Name: "gpu-02"})
	for range 2 {
		e.event(t, m.ID, "state")
		if _, err := e.s.PutInventory(e.ctx, m.ID, machine.Inventory{Source: "redfish"}); err != nil {
			t.Fatal(err)
		}
	}
	e.event(t, keep.ID, "state")
	if err := e.s.DeleteMachine(e.ctx, "gpu-01"); err != nil {
		t.Fatal(err)
	}
	gone := map[string]error{}
	_, gone["GetMachine by ID"] = e.s.GetMachine(e.ctx, m.ID)
	_, gone["GetMachine by name"] = e.s.GetMachine(e.ctx, "gpu-01")
	_, gone["MachineByMAC"] = e.s.MachineByMAC(e.ctx, "52:54:00:aa:bb:01")
	_, gone["MachineBySerial"] = e.s.MachineBySerial(e.ctx, "SN1")
	_, gone["MachineByBMC"] = e.s.MachineByBMC(e.ctx, "https://10.0.0.1")
	_, gone["Inventories"] = e.s.Inventories(e.ctx, m.ID)
	_, gone["Inventory"] = e.s.Inventory(e.ctx, m.ID, 0)
	_, gone["Events"] = e.s.Events(e.ctx, m.ID, 0, 0)
	_, gone["MachineRevision"] = e.s.MachineRevision(e.ctx, m.ID)
	gone["DeleteMachine again"] = e.s.DeleteMachine(e.ctx, m.ID)
	for what, err := range gone {
		wantIs(t, what+" after delete", err, store.ErrNotFound)
	}
	if evs, err := e.s.Events(e.ctx, keep.ID, 0, 0); err != nil || len(evs) != 1 {
		t.Errorf("another machine's events after the delete: %v, %v", evs, err)
	}
	// The same ID and keys again: a new machine with nothing of the old one.
	again := e.create(t, machine.Machine{ID: "m-again", Name: "gpu-01", MACs: []string{"52:54:00:aa:bb:01"}, Serial: "SN1",
		BMC: machine.BMC{Endpoint: "https://10.0.0.1"}})
	if snaps, err := e.s.Inventories(e.ctx, again.ID); err != nil || len(snaps) != 0 {
		t.Errorf("the recreated machine has inventory %v, %v; want none", snaps, err)
	}
	if evs, err := e.s.Events(e.ctx, again.ID, 0, 0); err != nil || len(evs) != 0 {
		t.Errorf("the recreated machine has events %v, %v; want none", evs, err)
	}
}

func machineList(t *testing.T, e env) {
	for _, m := range []machine.Machine{
		{Name: "gpu-03", Recipe: "h100", Rack: "r1", State: machine.StateReady},
		{Name: "gpu-01", Recipe: "h100", Rack: "r2"},
		{Name: "gpu-02", Recipe: "a100", Rack: "r1"},
	} {
		e.create(t, m)
	}
	tests := map[string]struct {
		f    store.MachineFilter
		want []string
	}{
		"all":              {store.MachineFilter{}, []string{"gpu-01", "gpu-02", "gpu-03"}},
		"recipe":           {store.MachineFilter{Recipe: "h100"}, []string{"gpu-01", "gpu-03"}},
		"rack":             {store.MachineFilter{Rack: "r1"}, []string{"gpu-02", "gpu-03"}},
		"state":            {store.MachineFilter{State: machine.StateEnrolled}, []string{"gpu-01", "gpu-02"}},
		"recipe and rack":  {store.MachineFilter{Recipe: "h100", Rack: "r1"}, []string{"gpu-03"}},
		"none":             {store.MachineFilter{Recipe: "b200"}, []string{}},
		"first page":       {store.MachineFilter{Limit: 2}, []string{"gpu-01", "gpu-02"}},
		"next page":        {store.MachineFilter{After: "gpu-02", Limit: 2}, []string{"gpu-03"}},
		"after a gap":      {store.MachineFilter{After: "gpu-01a"}, []string{"gpu-02", "gpu-03"}},
		"after the last":   {store.MachineFilter{After: "gpu-03"}, []string{}},
		"page of a recipe": {store.MachineFilter{Recipe: "h100", After: "gpu-01", Limit: 1}, []string{"gpu-03"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ms, err := e.s.ListMachines(e.ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			names := []string{}
			for _, m := range ms {
				names = append(names, m.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
