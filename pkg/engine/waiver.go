package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Waive lets one machine past one failed acceptance check of its recipe,
// recorded with who and why (an event); it holds for its later jobs until
// Unwaive. The check must be one of the recipe's and the reason non-empty.
func (e *Engine) Waive(ctx context.Context, idOrName, check, actor, reason string) (*machine.Machine, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, fmt.Errorf("%w: a waiver needs a reason (who asked, which ticket)", ErrPreflight)
	}
	m, err := e.store.GetMachine(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	r, err := e.recipes(m.Recipe)
	if err != nil {
		return nil, fmt.Errorf("%w: machine %s: recipe %q: %v", ErrPreflight, m.Name, m.Recipe, err)
	}
	var names []string
	for _, c := range r.Acceptance.Checks {
		names = append(names, c.Name)
	}
	if !slices.Contains(names, check) {
		return nil, fmt.Errorf("%w: recipe %s has no check %q (it has: %s)", ErrPreflight, r.Name, check, strings.Join(names, ", "))
	}
	w := machine.Waiver{Check: check, Actor: actor, Reason: reason, Time: e.now()}
	m, err = e.store.UpdateMachine(ctx, m.ID, func(m *machine.Machine) error {
		m.Waivers = slices.DeleteFunc(m.Waivers, func(x machine.Waiver) bool { return x.Check == check })
		m.Waivers = append(m.Waivers, w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.eventBy(ctx, m.ID, actor, "check.waiver", fmt.Sprintf("check %s waived: %s", check, reason), map[string]string{"check": check})
	return m, nil
}

// Unwaive withdraws a machine's waiver for check.
func (e *Engine) Unwaive(ctx context.Context, idOrName, check, actor string) (*machine.Machine, error) {
	found := false
	m, err := e.store.UpdateMachine(ctx, idOrName, func(m *machine.Machine) error {
		n := len(m.Waivers)
		m.Waivers = slices.DeleteFunc(m.Waivers, func(x machine.Waiver) bool { return x.Check == check })
		found = len(m.Waivers) < n
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("machine %s has no waiver for %s: %w", m.Name, check, store.ErrNotFound)
	}
	e.eventBy(ctx, m.ID, actor, "check.waiver", "waiver for check "+check+" withdrawn", map[string]string{"check": check})
	return m, nil
}
