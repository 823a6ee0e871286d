// Package storetest helps tests that need a store: Open gives a real store
// (bbolt in a temporary directory) whose consistency is checked when the
// test ends, Faulty wraps a store to make chosen calls fail, and Run is the
// conformance suite every store.Store backend passes.
package storetest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// Open opens a fresh bbolt store in t.TempDir(). On cleanup it closes the
// store and checks the file with plain bbolt (bolt.CheckFile), failing the
// test on any problem.
func Open(t testing.TB) store.Store {
	t.Helper()
	return OpenWith(t, store.Options{Timeout: time.Second})
}

// OpenWith is Open with options (for a clock or a small History).
func OpenWith(t testing.TB, opts store.Options) store.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ingot.db")
	s, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("storetest: %v", err)
		}
		if err := bolt.CheckFile(path); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return s
}
