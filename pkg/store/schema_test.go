package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	bolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// writeRaw builds a database file by hand with plain bbolt: buckets maps a
// bucket name to its key/value pairs.
func writeRaw(t *testing.T, buckets map[string]map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for name, kvs := range buckets {
			bk, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range kvs {
				if err := bk.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func version(v uint64) string {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return string(b)
}

// v1Layout is a schema-1 file as ingot v1 wrote it: no name index, MACs
// stored as the operator typed them.
func v1Layout(machines map[string]string, macIndex map[string]string) map[string]map[string]string {
	return map[string]map[string]string{
		"meta":         {"schema": version(1)},
		"machines":     machines,
		"idx_mac":      macIndex,
		"idx_serial":   {"SN1": "m-0000000001"},
		"idx_bmc":      {},
		"inventory":    {},
		"events":       {},
		"leases":       {},
		"idx_lease_ip": {},
		"jobs":         {},
		"tokens":       {},
	}
}

func TestMigrateV1ToV2(t *testing.T) {
	ctx := context.Background()
	path := writeRaw(t, v1Layout(map[string]string{
		"m-0000000001": `{"id":"m-0000000001","name":"gpu-01","macs":["52-54-00-AA-BB-01"],"serial":"SN1","state":"ready","future_field":42}`,
		"m-0000000002": `{"id":"m-0000000002","name":"gpu-02","state":"enrolled"}`,
	}, map[string]string{"52-54-00-AA-BB-01": "m-0000000001"}))

	s, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatalf("opening a v1 file: %v", err)
	}
	// Name lookups work (idx_name was built) and MACs are normalized.
	m, err := s.GetMachine(ctx, "gpu-01")
	if err != nil {
		t.Fatalf("by name after migration: %v", err)
	}
	if m.ID != "m-0000000001" || len(m.MACs) != 1 || m.MACs[0] != "52:54:00:aa:bb:01" || m.State != machine.StateReady {
		t.Errorf("migrated machine = %+v", m)
	}
	if got, err := s.MachineByMAC(ctx, "52:54:00:aa:bb:01"); err != nil || got.ID != m.ID {
		t.Errorf("by normalized MAC: %v, %v", got, err)
	}
	if got, err := s.GetMachine(ctx, "gpu-02"); err != nil || got.ID != "m-0000000002" {
		t.Errorf("machine without MACs: %v, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The raw file now says v2, the old MAC key is gone and unknown fields survived.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("meta")).Get([]byte("schema")); string(v) != version(2) {
			t.Errorf("schema after migration = %x, want 2", v)
		}
		if tx.Bucket([]byte("idx_mac")).Get([]byte("52-54-00-AA-BB-01")) != nil {
			t.Error("un-normalized MAC key left in idx_mac")
		}
		if raw := tx.Bucket([]byte("machines")).Get([]byte("m-0000000001")); !strings.Contains(string(raw), `"future_field":42`) {
			t.Errorf("migration dropped a field: %s", raw)
		}
		return nil
	})
	db.Close()
	if err := storetest.Check(path); err != nil {
		t.Error(err)
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := map[string]struct {
		layout  map[string]map[string]string
		wantMsg string
	}{
		"newer schema": {
			layout:  map[string]map[string]string{"meta": {"schema": version(99)}},
			wantMsg: "schema version 99 is newer than this ingot understands (2)",
		},
		"not an ingot file": {
			layout:  map[string]map[string]string{"widgets": {"a": "b"}},
			wantMsg: `not an ingot database`,
		},
		"bad version bytes": {
			layout:  map[string]map[string]string{"meta": {"schema": "2"}},
			wantMsg: "meta/schema is 1 bytes",
		},
		"v1 with a duplicate name": {
			layout: v1Layout(map[string]string{
				"m-0000000001": `{"id":"m-0000000001","name":"gpu-01"}`,
				"m-0000000002": `{"id":"m-0000000002","name":"gpu-01"}`,
			}, map[string]string{}),
			wantMsg: `migrating schema v1 -> v2 (add the name index and normalize MACs): incompatible schema: machines m-0000000001 and m-0000000002 share the name "gpu-01"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := writeRaw(t, tc.layout)
			s, err := store.Open(path, store.Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), tc.wantMsg) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q\nwant ErrSchema containing %q and the path", err, tc.wantMsg)
			}
			// A failed migration leaves the file untouched and consistent.
			if err := storetest.Check(path); err != nil {
				t.Error(err)
			}
			if got := readRaw(t, path); !cmp.Equal(got, tc.layout, cmpopts.EquateEmpty()) {
				t.Errorf("file changed by the failed Open (-want +got):\n%s", cmp.Diff(tc.layout, got, cmpopts.EquateEmpty()))
			}
		})
	}
}

// readRaw returns every top-level bucket's key/value pairs.
func readRaw(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]string{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			kvs := map[string]string{}
			out[string(name)] = kvs
			return b.ForEach(func(k, v []byte) error {
				kvs[string(k)] = string(v) // string() copies out of the transaction
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
