package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Transition moves a machine to state to, with the event that records it
// (from, to, actor, reason, fields), in one write: a crash leaves both or
// neither. It refuses moves the lifecycle does not allow
// (machine.CanTransition); staying in the same state writes nothing.
func (s *Service) Transition(ctx context.Context, id string, to machine.State, actor, reason string, fields map[string]string) error {
	_, err := s.store.ChangeMachine(ctx, id, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		from := m.State
		if from == "" {
			from = machine.StateEnrolled
		}
		if !machine.CanTransition(from, to) {
			return nil, fmt.Errorf("machine %s: cannot go from %s to %s", m.Name, from, to)
		}
		if from == to {
			return nil, nil
		}
		m.State, m.Updated = to, s.now()
		return []machine.Event{{Time: s.now(), Actor: actor, Kind: "state", From: from, To: to, Message: reason, Fields: fields}}, nil
	}})
	if err != nil {
		return fmt.Errorf("changing state of %s to %s: %w", id, to, err)
	}
	return nil
}

// Reserve records ipv4 as the machine's reserved address, with an event.
func (s *Service) Reserve(ctx context.Context, id, ipv4, actor, reason string) error {
	_, err := s.store.ChangeMachine(ctx, id, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		m.IPv4, m.Updated = ipv4, s.now()
		return []machine.Event{{Time: s.now(), Actor: actor, Kind: "reservation", Message: reason, Fields: map[string]string{"ip": ipv4}}}, nil
	}})
	if err != nil {
		return fmt.Errorf("reserving %s for %s: %w", ipv4, id, err)
	}
	return nil
}

// Waive lets one machine past one failed acceptance check of its recipe,
// recorded with who and why; it holds for its later jobs until Unwaive.
// The check must be one of the recipe's and the reason non-empty.
func (s *Service) Waive(ctx context.Context, idOrName, check, actor, reason string) (*machine.Machine, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, invalid("a waiver needs a reason (who asked, which ticket)")
	}
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	r, err := s.recipes(m.Recipe)
	if err != nil {
		return nil, invalid("machine %s: recipe %q: %v", m.Name, m.Recipe, err)
	}
	var names []string
	for _, c := range r.Acceptance.Checks {
		names = append(names, c.Name)
	}
	if !slices.Contains(names, check) {
		return nil, invalid("recipe %s has no check %q (it has: %s)", r.Name, check, strings.Join(names, ", "))
	}
	w := machine.Waiver{Check: check, Actor: actor, Reason: reason, Time: s.now()}
	c, err := s.store.ChangeMachine(ctx, m.ID, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		m.Waivers = slices.DeleteFunc(m.Waivers, func(x machine.Waiver) bool { return x.Check == check })
		m.Waivers, m.Updated = append(m.Waivers, w), s.now()
		return []machine.Event{{Time: s.now(), Actor: actor, Kind: "check.waiver",
			Message: fmt.Sprintf("check %s waived: %s", check, reason), Fields: map[string]string{"check": check}}}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("waiving %s on %s: %w", check, m.Name, err)
	}
	return &c.Machine, nil
}

// Unwaive withdraws a machine's waiver for check.
func (s *Service) Unwaive(ctx context.Context, idOrName, check, actor string) (*machine.Machine, error) {
	c, err := s.store.ChangeMachine(ctx, idOrName, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
		n := len(m.Waivers)
		m.Waivers = slices.DeleteFunc(m.Waivers, func(x machine.Waiver) bool { return x.Check == check })
		if len(m.Waivers) == n {
			return nil, fmt.Errorf("machine %s has no waiver for %s: %w", m.Name, check, store.ErrNotFound)
		}
		m.Updated = s.now()
		return []machine.Event{{Time: s.now(), Actor: actor, Kind: "check.waiver",
			Message: "waiver for check " + check + " withdrawn", Fields: map[string]string{"check": check}}}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("withdrawing the waiver for %s: %w", check, err)
	}
	return &c.Machine, nil
}

// PutInventory stores an inventory a job or the agent read of a machine
// and returns its snapshot number.
func (s *Service) PutInventory(ctx context.Context, id string, inv machine.Inventory) (uint64, error) {
	seq, err := s.store.PutInventory(ctx, id, inv)
	if err != nil {
		return 0, fmt.Errorf("storing the %s inventory of %s: %w", orNone(inv.Source), id, err)
	}
	return seq, nil
}

// Record appends an event that changes no state (a step started, a
// finding, an alert): the machine's event log is where operators look
// first. A failure is logged, not returned: the event is news, not state.
func (s *Service) Record(ctx context.Context, ev machine.Event) {
	s.event(ctx, ev)
}
