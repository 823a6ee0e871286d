package bolt_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// openTest opens a fresh bbolt store in t.TempDir(); when the test ends it
// is closed and the file checked with plain bbolt (CheckFile).
func openTest(t testing.TB, opts store.Options) *bolt.Store {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	path := filepath.Join(t.TempDir(), "ingot.db")
	s, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("opening a test store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the test store: %v", err)
		}
		if err := bolt.CheckFile(path); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s
}

// update is ChangeMachine without a revision or events.
func update(ctx context.Context, s store.MachineStore, idOrName string, fn func(*machine.Machine) error) (*machine.Machine, error) {
	c, err := s.ChangeMachine(ctx, idOrName, store.Change{Edit: store.Edit(fn)})
	if err != nil {
		return nil, err
	}
	return &c.Machine, nil
}

// updateRev is ChangeMachine at a revision, without events.
func updateRev(ctx context.Context, s store.MachineStore, idOrName string, rev uint64, fn func(*machine.Machine) error) (*machine.Machine, uint64, error) {
	c, err := s.ChangeMachine(ctx, idOrName, store.Change{Rev: rev, Edit: store.Edit(fn)})
	if err != nil {
		return nil, 0, err
	}
	return &c.Machine, c.Rev, nil
}
