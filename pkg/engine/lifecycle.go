package engine

import (
	"context"
	"fmt"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// transitions lists, for each state, the states it may move to. Every move
// is an event with a reason; anything else is refused.
var transitions = map[machine.State][]machine.State{
	machine.StateDiscovered:   {machine.StateEnrolled, machine.StateInspecting, machine.StateProvisioning},
	machine.StateEnrolled:     {machine.StateInspecting, machine.StateProvisioning, machine.StateFailed},
	machine.StateInspecting:   {machine.StateProvisioning, machine.StateEnrolled, machine.StateFailed},
	machine.StateProvisioning: {machine.StateVerifying, machine.StateFailed},
	machine.StateVerifying:    {machine.StateReady, machine.StateFailed},
	machine.StateReady:        {machine.StateReimaging},
	machine.StateFailed:       {machine.StateReimaging, machine.StateEnrolled},
	machine.StateReimaging:    {machine.StateProvisioning, machine.StateFailed},
}

// CanTransition reports whether a machine may move from one state to another.
// Staying in the same state is always allowed (a resumed step repeats it).
func CanTransition(from, to machine.State) bool {
	if from == to {
		return true
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// setState moves a machine to a new state inside one store update and records
// the event. It refuses moves the lifecycle does not allow.
func (e *Engine) setState(ctx context.Context, id string, to machine.State, reason string, fields map[string]string) error {
	var from machine.State
	_, err := e.store.UpdateMachine(ctx, id, func(m *machine.Machine) error {
		from = m.State
		if from == "" {
			from = machine.StateEnrolled
		}
		if !CanTransition(from, to) {
			return fmt.Errorf("machine %s: cannot go from %s to %s", m.Name, from, to)
		}
		m.State = to
		m.Updated = e.now()
		return nil
	})
	if err != nil {
		return fmt.Errorf("changing state of %s to %s: %w", id, to, err)
	}
	if from == to {
		return nil
	}
	_, err = e.store.AppendEvent(ctx, machine.Event{
		Machine: id, Time: e.now(), Actor: "engine", Kind: "state",
		From: from, To: to, Message: reason, Fields: fields,
	})
	return err
}

// event records something that happened to a machine that is not a state
// change (a step started, a finding, progress milestones).
func (e *Engine) event(ctx context.Context, id, kind, msg string, fields map[string]string) {
	e.eventBy(ctx, id, "engine", kind, msg, fields)
}

// eventBy records an event with its actor (an operator for waivers).
func (e *Engine) eventBy(ctx context.Context, id, actor, kind, msg string, fields map[string]string) {
	if _, err := e.store.AppendEvent(ctx, machine.Event{
		Machine: id, Time: e.now(), Actor: actor, Kind: kind, Message: msg, Fields: fields,
	}); err != nil {
		e.log.Error("recording event", "machine", id, "kind", kind, "err", err)
	}
}
