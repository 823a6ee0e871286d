// Package storetest helps tests that need a store: Open gives a real bbolt
// store in a temporary directory whose consistency is checked when the test
// ends, Failing is a Store whose every method fails, for error paths, and
// Run is the conformance suite every store.Store backend must pass.
package storetest

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Open opens a fresh store in t.TempDir(). On cleanup it closes the store
// and fails the test if bbolt's consistency check finds any problem.
func Open(t testing.TB) *store.Bolt {
	t.Helper()
	return OpenWith(t, store.Options{Timeout: time.Second})
}

// OpenWith is Open with options (for a clock or a small History).
func OpenWith(t testing.TB, opts store.Options) *store.Bolt {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ingot.db")
	s, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("storetest: %v", err)
		}
		if err := Check(path); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return s
}

// Check opens the closed database file at path with plain bbolt and runs its
// consistency check (tx.Check), returning every problem found.
func Check(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	var errs []error
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(append([]error{errors.New("consistency check of " + path + " failed")}, errs...)...)
	}
	return nil
}
