// Package storetest helps tests that need a store: Open gives a real store
// (bbolt in a temporary directory, or the backend INGOT_TEST_STORE names)
// whose consistency is checked when the test ends, Faulty wraps a store to
// make chosen calls fail, and Run is the conformance suite every
// store.Store backend passes.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/backends"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// EnvStore names the store the tests of every package that opens one here
// run on: unset, a bbolt file in the test's temporary directory; an etcd
// URL (INGOT_TEST_STORE=etcd://127.0.0.1:2379/ingot-test), a fresh key
// prefix under it for each store a test opens, so the whole repository's
// store-using tests run on etcd. Prefixes are left in the cluster (a test
// cluster is thrown away).
const EnvStore = "INGOT_TEST_STORE"

// Open opens a fresh store (see EnvStore). On cleanup it closes the store
// and checks it (bolt.CheckFile on the file, or the backend's Check),
// failing the test on any problem.
func Open(t testing.TB) store.Store {
	t.Helper()
	return OpenWith(t, store.Options{Timeout: time.Second})
}

// OpenWith is Open with options (for a clock or a small History).
func OpenWith(t testing.TB, opts store.Options) store.Store {
	t.Helper()
	if base := os.Getenv(EnvStore); base != "" {
		return openURL(t, base, opts)
	}
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

// notSegment is what a key prefix segment may not hold.
var notSegment = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// openURL opens a fresh prefix under the store URL base: base's path
// with a segment named for the test added.
func openURL(t testing.TB, base string, opts store.Options) store.Store {
	t.Helper()
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	seg := strings.Trim(notSegment.ReplaceAllString(t.Name(), "-"), "-._") + "-" + hex.EncodeToString(raw[:])
	loc, query, _ := strings.Cut(base, "?")
	loc = strings.TrimSuffix(loc, "/") + "/" + seg
	if query != "" {
		loc += "?" + query
	}
	ctx := context.Background()
	s, err := backends.Open(ctx, loc, opts)
	if err != nil {
		t.Fatalf("storetest: %s=%s: %v", EnvStore, base, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("storetest: %v", err)
		}
		chk, err := backends.Open(ctx, loc, store.Options{})
		if err != nil {
			t.Errorf("storetest: opening %s again to check it: %v", store.Redact(loc), err)
			return
		}
		defer chk.Close()
		if err := chk.Check(ctx); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return s
}
