package store

import "github.com/ingot-dev/ingot/pkg/machine"

// Edit is a Change.Edit that appends no event: fn edits the machine.
func Edit(fn func(*machine.Machine) error) func(*machine.Machine) ([]machine.Event, error) {
	return func(m *machine.Machine) ([]machine.Event, error) { return nil, fn(m) }
}
