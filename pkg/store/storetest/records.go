package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// recordCases check InventoryStore and EventStore.
var recordCases = []conformanceCase{
	{"inventory/history trimmed to the limit, newest kept", inventoryHistory},
	{"inventory/unknown machine and empty history", inventoryMissing},
	{"events/seq starts at 1 and increases per machine", eventSeq},
	{"events/after and limit", eventWindow},
	{"events/concurrent appends get distinct consecutive seqs", eventConcurrent},
	{"events/capped per machine, oldest dropped and counted", eventCap},
}

// eventCap: with MaxEvents 4, every kind of write that adds events (an
// append, a create and a change with events, concurrent appends) keeps
// the newest 4 of the machine, dropping the oldest in the same write; seqs
// go on, so the dropped ones are counted by the oldest kept; other
// machines keep theirs, and Events' after and limit read what is kept.
func eventCap(t *testing.T, e env) {
	const max = 4
	s := e.reopen(func(o *store.Options) { o.MaxEvents = max })
	e.s = s
	a := machine.Machine{Name: "gpu-01"}
	evs := []machine.Event{{Kind: "enrolled"}, {Kind: "a"}, {Kind: "b"}, {Kind: "c"}, {Kind: "d"}, {Kind: "e"}}
	if err := s.CreateMachine(e.ctx, &a, evs...); err != nil {
		t.Fatal(err)
	}
	b := e.create(t, machine.Machine{Name: "gpu-02"})
	e.event(t, b.ID, "x")
	check := func(what string, want []uint64) {
		t.Helper()
		got, err := s.Events(e.ctx, a.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, seqs(got)); diff != "" {
			t.Errorf("%s: kept seqs (-want +got):\n%s", what, diff)
		}
		if len(got) > 0 && store.EventsDropped(got[0].Seq) != want[0]-1 {
			t.Errorf("%s: EventsDropped(%d) = %d, want %d", what, got[0].Seq, store.EventsDropped(got[0].Seq), want[0]-1)
		}
	}
	check("a create with 6 events", []uint64{3, 4, 5, 6})
	e.event(t, a.ID, "f")
	check("one more append", []uint64{4, 5, 6, 7})
	_, err := s.ChangeMachine(e.ctx, a.ID, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		m.Rack = "r1"
		return []machine.Event{{Kind: "g"}, {Kind: "h"}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	check("a change with 2 events", []uint64{6, 7, 8, 9})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := s.AppendEvent(e.ctx, machine.Event{Machine: a.ID, Kind: "flood"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	check("8 concurrent appends", []uint64{14, 15, 16, 17})
	if got, _ := s.Events(e.ctx, a.ID, 2, 2); fmt.Sprint(seqs(got)) != "[14 15]" {
		t.Errorf("Events(after 2, limit 2) = %v, want [14 15]: after a dropped seq, from the oldest kept", seqs(got))
	}
	if got, _ := s.Events(e.ctx, b.ID, 0, 0); fmt.Sprint(seqs(got)) != "[1]" {
		t.Errorf("the other machine's events: %v, want [1]", seqs(got))
	}
	if store.EventsDropped(0) != 0 {
		t.Error("EventsDropped(0) for a machine without events")
	}
}

func inventoryHistory(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01"})
	taken := start.Add(-time.Hour)
	for i := 1; i <= History+2; i++ {
		inv := machine.Inventory{Source: "redfish", DIMMs: make([]machine.DIMM, i)}
		if i == 1 {
			inv.Taken = taken
		}
		seq, err := e.s.PutInventory(e.ctx, "gpu-01", inv) // by name
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i) {
			t.Errorf("snapshot %d got seq %d; want %d", i, seq, i)
		}
	}
	snaps, err := e.s.Inventories(e.ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := []uint64{}
	for _, sn := range snaps {
		got = append(got, sn.Seq)
		if sn.MachineID != m.ID || len(sn.Inventory.DIMMs) != int(sn.Seq) || !sn.Taken.Equal(start) {
			t.Errorf("snapshot %d = %+v; want machine %s, its own inventory, Taken from the store's clock", sn.Seq, sn, m.ID)
		}
	}
	want := []uint64{3, 4, 5} // History newest of 5, oldest first (store.OldestKept)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept seqs (-want +got):\n%s", diff)
	}
	tests := map[string]struct {
		seq     uint64
		wantSeq uint64 // 0: ErrNotFound
	}{
		"latest":        {0, 5},
		"kept":          {4, 4},
		"trimmed":       {1, 0},
		"oldest kept":   {3, 3},
		"never written": {6, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sn, err := e.s.Inventory(e.ctx, m.ID, tc.seq)
			if tc.wantSeq == 0 {
				wantIs(t, "Inventory", err, store.ErrNotFound)
				return
			}
			if err != nil || sn.Seq != tc.wantSeq {
				t.Errorf("Inventory(%d) = %+v, %v; want seq %d", tc.seq, sn, err, tc.wantSeq)
			}
		})
	}
	// A snapshot that brings its own Taken keeps it.
	other := e.create(t, machine.Machine{Name: "gpu-02"})
	if _, err := e.s.PutInventory(e.ctx, other.ID, machine.Inventory{Source: "agent", Taken: taken}); err != nil {
		t.Fatal(err)
	}
	if sn, err := e.s.Inventory(e.ctx, other.ID, 0); err != nil || !sn.Taken.Equal(taken) || sn.Seq != 1 {
		t.Errorf("second machine's snapshot = %+v, %v; want seq 1 taken at %s", sn, err, taken)
	}
}

func inventoryMissing(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01"})
	if snaps, err := e.s.Inventories(e.ctx, m.ID); err != nil || len(snaps) != 0 {
		t.Errorf("Inventories of a machine without any: %v, %v; want none, no error", snaps, err)
	}
	_, err := e.s.Inventory(e.ctx, m.ID, 0)
	wantIs(t, "latest Inventory of a machine without any", err, store.ErrNotFound)
	_, err = e.s.PutInventory(e.ctx, "gpu-99", machine.Inventory{})
	wantIs(t, "PutInventory of an unknown machine", err, store.ErrNotFound)
	_, err = e.s.Inventories(e.ctx, "gpu-99")
	wantIs(t, "Inventories of an unknown machine", err, store.ErrNotFound)
	_, err = e.s.Inventory(e.ctx, "gpu-99", 0)
	wantIs(t, "Inventory of an unknown machine", err, store.ErrNotFound)
}

func eventSeq(t *testing.T, e env) {
	a := e.create(t, machine.Machine{Name: "gpu-01"})
	b := e.create(t, machine.Machine{Name: "gpu-02"})
	appends := []struct {
		machine string
		want    uint64
	}{{"gpu-01", 1}, {a.ID, 2}, {b.ID, 1}, {"gpu-01", 3}, {"gpu-02", 2}}
	for _, ap := range appends {
		ev := e.event(t, ap.machine, "state")
		want := a.ID
		if ap.machine == b.ID || ap.machine == "gpu-02" {
			want = b.ID
		}
		if ev.Seq != ap.want || ev.Machine != want || !ev.Time.Equal(start) {
			t.Errorf("AppendEvent(%s) = %+v; want seq %d, machine %s, Time from the store's clock", ap.machine, ev, ap.want, want)
		}
	}
	at := start.Add(-time.Minute)
	ev, err := e.s.AppendEvent(e.ctx, machine.Event{Machine: a.ID, Kind: "dhcp.ack", Time: at})
	if err != nil || ev.Seq != 4 || !ev.Time.Equal(at) {
		t.Errorf("event with its own time = %+v, %v; want seq 4 at %s", ev, err, at)
	}
	evs, err := e.s.Events(e.ctx, a.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{1, 2, 3, 4}, seqs(evs)); diff != "" {
		t.Errorf("stored seqs (-want +got):\n%s", diff)
	}
	if evs[3].Kind != "dhcp.ack" || evs[3].Machine != a.ID {
		t.Errorf("stored event = %+v", evs[3])
	}
	_, err = e.s.AppendEvent(e.ctx, machine.Event{Machine: "gpu-99", Kind: "state"})
	wantIs(t, "AppendEvent to an unknown machine", err, store.ErrNotFound)
	_, err = e.s.AppendEvent(e.ctx, machine.Event{Machine: a.ID})
	wantMsg(t, "AppendEvent without a kind", err, "kind is empty")
	_, err = e.s.Events(e.ctx, "gpu-99", 0, 0)
	wantIs(t, "Events of an unknown machine", err, store.ErrNotFound)
}

func eventWindow(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01"})
	for range 5 {
		e.event(t, m.ID, "state")
	}
	tests := map[string]struct {
		after uint64
		limit int
		want  []uint64
	}{
		"all":                {0, 0, []uint64{1, 2, 3, 4, 5}},
		"negative limit":     {0, -1, []uint64{1, 2, 3, 4, 5}},
		"after 2":            {2, 0, []uint64{3, 4, 5}},
		"after 1, limit 2":   {1, 2, []uint64{2, 3}},
		"limit past the end": {3, 10, []uint64{4, 5}},
		"after the last":     {5, 0, []uint64{}},
		"after beyond":       {99, 1, []uint64{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			evs, err := e.s.Events(e.ctx, "gpu-01", tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, seqs(evs)); diff != "" {
				t.Errorf("Events(after %d, limit %d) (-want +got):\n%s", tc.after, tc.limit, diff)
			}
		})
	}
}

func eventConcurrent(t *testing.T, e env) {
	a := e.create(t, machine.Machine{Name: "gpu-01"})
	b := e.create(t, machine.Machine{Name: "gpu-02"})
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		id := a.ID
		if w%2 == 1 {
			id = b.ID
		}
		wg.Go(func() {
			for range each {
				if _, err := e.s.AppendEvent(e.ctx, machine.Event{Machine: id, Kind: "x"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, id := range []string{a.ID, b.ID} {
		evs, err := e.s.Events(e.ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []uint64{}
		for i := range writers / 2 * each {
			want = append(want, uint64(i+1))
		}
		if diff := cmp.Diff(want, seqs(evs)); diff != "" {
			t.Errorf("machine %s seqs (-want +got):\n%s", id, diff)
		}
	}
}
