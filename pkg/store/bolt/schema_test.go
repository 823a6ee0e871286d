package bolt_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// writeRaw builds a database file by hand with plain bbolt: buckets maps a
// bucket name to its key/value pairs.
func writeRaw(t *testing.T, buckets map[string]map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
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

	s, err := bolt.Open(path, store.Options{})
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
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket([]byte("meta")).Get([]byte("schema")); string(v) != version(uint64(bolt.SchemaVersion())) {
			t.Errorf("schema after migration = %x, want %d", v, bolt.SchemaVersion())
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
	if err := bolt.CheckFile(path); err != nil {
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
			wantMsg: fmt.Sprintf("schema version 99 is newer than this ingot understands (%d)", bolt.SchemaVersion()),
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
			s, err := bolt.Open(path, store.Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), tc.wantMsg) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q\nwant ErrSchema containing %q and the path", err, tc.wantMsg)
			}
			// A failed migration leaves the file untouched and consistent.
			if err := bolt.CheckFile(path); err != nil {
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
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]map[string]string{}
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
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

func TestMigrateV2ToV3(t *testing.T) {
	ctx := context.Background()
	layout := v1Layout(map[string]string{
		"m-0000000001": `{"id":"m-0000000001","name":"gpu-01","state":"ready"}`,
		"m-0000000002": `{"id":"m-0000000002","name":"gpu-02","state":"enrolled"}`,
	}, map[string]string{})
	layout["meta"]["schema"] = version(2)
	layout["idx_name"] = map[string]string{"gpu-01": "m-0000000001", "gpu-02": "m-0000000002"}
	layout["jobs"] = map[string]string{
		"j-0000000001": `{"id":"j-0000000001","kind":"reimage","state":"running","created":"2024-01-01T00:00:00Z","future_field":7}`,
	}
	path := writeRaw(t, layout)
	s, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatalf("opening a v2 file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The raw file: current, each machine numbered, the job rewritten in place.
	raw := readRaw(t, path)
	if v := raw["meta"]["schema"]; v != version(uint64(bolt.SchemaVersion())) {
		t.Errorf("schema after migration = %x, want %d", v, bolt.SchemaVersion())
	}
	wantRevs := map[string]string{"m-0000000001": version(1), "m-0000000002": version(2)}
	if diff := cmp.Diff(wantRevs, raw["machine_rev"]); diff != "" {
		t.Errorf("machine_rev (-want +got):\n%s", diff)
	}
	if job := raw["jobs"]["j-0000000001"]; !strings.Contains(job, `"future_field":7`) || !strings.Contains(job, `"revision":1`) {
		t.Errorf("migrated job = %s; want its unknown field kept and revision 1", job)
	}

	// Conditional writes work from the migrated revisions, and new ones follow them.
	s, err = bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, rev, err := updateRev(ctx, s, "gpu-01", 1, func(m *machine.Machine) error { m.Rack = "r1"; return nil }); err != nil || rev != 3 {
		t.Errorf("conditional update at the migrated revision: rev %d, %v; want 3", rev, err)
	}
	j, err := s.UpdateJobRev(ctx, "j-0000000001", 1, func(j *store.Job) error { j.Step = "next"; return nil })
	if err != nil || j.Revision != 2 || j.State != store.JobRunning {
		t.Errorf("conditional job update at the migrated revision: %+v, %v; want revision 2", j, err)
	}
	nj := &store.Job{Kind: "inspect"}
	if err := s.CreateJob(ctx, nj); err != nil || nj.Revision != 3 {
		t.Errorf("new job: revision %d, %v; want 3", nj.Revision, err)
	}
}
