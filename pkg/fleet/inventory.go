package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Inventory returns a machine's snapshot seq (0: the latest).
func (s *Service) Inventory(ctx context.Context, idOrName string, seq uint64) (*store.Snapshot, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	snap, err := s.store.Inventory(ctx, m.ID, seq)
	switch {
	case errors.Is(err, store.ErrNotFound) && seq == 0:
		return nil, fmt.Errorf("machine %s has no inventory yet (run: ingot machine inspect %s): %w", m.Name, m.Name, err)
	case err != nil:
		return nil, fmt.Errorf("machine %s: snapshot %d: %w (see ingot inventory show %s --history)", m.Name, seq, err, m.Name)
	}
	return snap, nil
}

// History returns every kept snapshot of a machine, oldest first.
func (s *Service) History(ctx context.Context, idOrName string) ([]store.Snapshot, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	snaps, err := s.store.Inventories(ctx, m.ID)
	if err != nil {
		return nil, fmt.Errorf("machine %s: inventory history: %w", m.Name, err)
	}
	if snaps == nil {
		snaps = []store.Snapshot{}
	}
	return snaps, nil
}

// InventoryDiff is what changed between two snapshots of a machine.
type InventoryDiff struct {
	Machine string           `json:"machine"`
	From    store.Snapshot   `json:"from"`
	To      store.Snapshot   `json:"to"`
	Changes []machine.Change `json:"changes"`
}

// Diff compares snapshots from and to of a machine; with both 0, the
// previous and the latest.
func (s *Service) Diff(ctx context.Context, idOrName string, from, to uint64) (*InventoryDiff, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	var a, b *store.Snapshot
	if from == 0 && to == 0 {
		snaps, err := s.History(ctx, m.ID)
		if err != nil {
			return nil, err
		}
		if len(snaps) < 2 {
			return nil, invalid("machine %s has %d snapshot(s); expected two to compare", m.Name, len(snaps))
		}
		a, b = &snaps[len(snaps)-2], &snaps[len(snaps)-1]
	} else {
		if from == 0 || to == 0 {
			return nil, invalid("from %d, to %d: expected two snapshot sequence numbers, or neither", from, to)
		}
		if a, err = s.Inventory(ctx, m.ID, from); err != nil {
			return nil, err
		}
		if b, err = s.Inventory(ctx, m.ID, to); err != nil {
			return nil, err
		}
	}
	changes := machine.DiffInventory(a.Inventory, b.Inventory)
	if changes == nil {
		changes = []machine.Change{}
	}
	return &InventoryDiff{Machine: m.Name, From: *a, To: *b, Changes: changes}, nil
}

// Events returns a machine's events after seq afterSeq, at most limit (0:
// all).
func (s *Service) Events(ctx context.Context, idOrName string, afterSeq uint64, limit int) ([]machine.Event, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	evs, err := s.store.Events(ctx, m.ID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("machine %s: events: %w", m.Name, err)
	}
	if evs == nil {
		evs = []machine.Event{}
	}
	return evs, nil
}

// LastEvents returns a machine's newest n events, oldest first.
func (s *Service) LastEvents(ctx context.Context, idOrName string, n int) ([]machine.Event, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	all, err := s.store.Events(ctx, m.ID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("machine %s: events: %w", m.Name, err)
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return nonNilEvents(all), nil
}

func nonNilEvents(evs []machine.Event) []machine.Event {
	if evs == nil {
		return []machine.Event{}
	}
	return evs
}

// Note records an event on a machine that changes no state (a telemetry
// alert firing or resolving): the machine's event log is where operators
// look first.
func (s *Service) Note(ctx context.Context, machineID, kind, actor, message string) {
	s.event(ctx, machine.Event{Machine: machineID, Kind: kind, Actor: actor, Message: message})
}
