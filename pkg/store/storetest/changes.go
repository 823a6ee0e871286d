package storetest

import (
	"errors"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// changeCases check that a machine and the events of its change are one
// write (MachineStore: ChangeMachine, CreateMachine with events).
var changeCases = []conformanceCase{
	{"changes/a change and its events are one write", changeWithEvents},
	{"changes/an event the store refuses fails the whole change", changeEventRefused},
	{"changes/create with events is one write", createWithEvents},
}

func changeWithEvents(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01"})
	_, r1, _ := e.s.GetMachineRev(e.ctx, m.ID)
	c, err := e.s.ChangeMachine(e.ctx, "gpu-01", store.Change{Rev: r1, Edit: func(m *machine.Machine) ([]machine.Event, error) {
		m.State = machine.StateProvisioning
		return []machine.Event{
			{Kind: "state", Actor: "storetest", From: machine.StateEnrolled, To: machine.StateProvisioning},
			{Machine: "someone-else", Kind: "note", Actor: "storetest", Message: "second"},
		}, nil
	}})
	if err != nil {
		t.Fatalf("ChangeMachine: %v", err)
	}
	if c.Machine.State != machine.StateProvisioning || c.Rev <= r1 || len(c.Events) != 2 {
		t.Fatalf("Changed = %+v; want the new state, a revision above %d and two events", c, r1)
	}
	for i, ev := range c.Events {
		if ev.Seq != uint64(i+1) || ev.Machine != m.ID || ev.Time.IsZero() {
			t.Errorf("event %d = %+v; want Seq %d, Machine %s and a time", i, ev, i+1, m.ID)
		}
	}
	evs, err := e.s.Events(e.ctx, m.ID, 0, 0)
	if err != nil || len(evs) != 2 || evs[0].Kind != "state" || evs[1].Message != "second" {
		t.Errorf("Events = %+v, %v; want the change's two events", evs, err)
	}
	// Events appended later follow them.
	if ev := e.event(t, m.ID, "note"); ev.Seq != 3 {
		t.Errorf("next event Seq = %d; want 3", ev.Seq)
	}
}

func changeEventRefused(t *testing.T, e env) {
	m := e.create(t, machine.Machine{Name: "gpu-01", Rack: "r1"})
	e.event(t, m.ID, "enrolled")
	_, r1, _ := e.s.GetMachineRev(e.ctx, m.ID)
	_, err := e.s.ChangeMachine(e.ctx, m.ID, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		m.Rack, m.State = "r2", machine.StateProvisioning
		return []machine.Event{{Kind: "state", Actor: "storetest"}, {Actor: "storetest", Message: "no kind"}}, nil
	}})
	if err == nil {
		t.Fatal("ChangeMachine with an event without a kind succeeded; want an error")
	}
	got, r, err := e.s.GetMachineRev(e.ctx, m.ID)
	if err != nil || got.Rack != "r1" || got.State != m.State || r != r1 {
		t.Errorf("after the refused change: %+v at %d (%v); want rack r1, state %s at %d", got, r, err, m.State, r1)
	}
	if evs, _ := e.s.Events(e.ctx, m.ID, 0, 0); len(evs) != 1 {
		t.Errorf("events after the refused change: %+v; want only the first", evs)
	}
	boom := errors.New("edit failed")
	_, err = e.s.ChangeMachine(e.ctx, m.ID, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		m.Rack = "r3"
		return []machine.Event{{Kind: "state"}}, boom
	}})
	wantIs(t, "ChangeMachine whose Edit fails", err, boom)
	if evs, _ := e.s.Events(e.ctx, m.ID, 0, 0); len(evs) != 1 {
		t.Errorf("events after a failed Edit: %+v; want only the first", evs)
	}
}

func createWithEvents(t *testing.T, e env) {
	m := machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:aa:00:01"}}
	if err := e.s.CreateMachine(e.ctx, &m, machine.Event{Kind: "enrolled", Actor: "storetest", To: machine.StateEnrolled}); err != nil {
		t.Fatal(err)
	}
	evs, err := e.s.Events(e.ctx, m.ID, 0, 0)
	if err != nil || len(evs) != 1 || evs[0].Seq != 1 || evs[0].Machine != m.ID || evs[0].Kind != "enrolled" {
		t.Errorf("Events = %+v, %v; want the enrolment event as Seq 1", evs, err)
	}
	bad := machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:aa:00:02"}}
	if err := e.s.CreateMachine(e.ctx, &bad, machine.Event{Actor: "storetest"}); err == nil {
		t.Fatal("CreateMachine with an event without a kind succeeded; want an error")
	}
	_, err = e.s.GetMachine(e.ctx, "gpu-02")
	wantIs(t, "the machine of a refused create", err, store.ErrNotFound)
	_, err = e.s.MachineByMAC(e.ctx, "52:54:00:aa:00:02")
	wantIs(t, "the MAC of a refused create", err, store.ErrNotFound)
}
