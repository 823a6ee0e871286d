package bolt_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// v7Fixture copies testdata/schema-v7 (written by the store code of
// a5064ea, the last release of schema v7: genv7.go) into a fresh folder:
// the database file and the lease log segment its writer left unapplied.
func v7Fixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open("testdata/schema-v7/ingot.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := io.ReadAll(zr)
	path := filepath.Join(dir, "ingot.db")
	seg, err := os.ReadFile("testdata/schema-v7/ingot.db.lease-log.2")
	if err != nil || len(db) == 0 {
		t.Fatalf("reading the fixture: %v (%d bytes)", err, len(db))
	}
	if err := os.WriteFile(path, db, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".lease-log.2", seg, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawSchema reads a file's schema version and whether its leases bucket
// holds mac, with plain bbolt (nothing replayed, nothing migrated).
func rawSchema(t *testing.T, path, mac string) (int, bool) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	var has bool
	db.View(func(tx *bbolt.Tx) error {
		v = tx.Bucket([]byte("meta")).Get([]byte("schema"))
		has = tx.Bucket([]byte("leases")).Get([]byte(mac)) != nil
		return nil
	})
	return int(v[7]), has
}

// records is what a store holds, in a form to compare.
type records struct {
	Machines, Events, Inventories, Secrets, Jobs, Tokens, Leases, Telemetry []string
	Fence                                                                   string
}

func dump(t *testing.T, s store.Store) records {
	t.Helper()
	ctx := context.Background()
	var r records
	ms, err := s.ListMachines(ctx, store.MachineFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		r.Machines = append(r.Machines, m.ID+" "+m.Name+" "+m.MACs[0]+" "+m.Serial+" "+m.BMC.Endpoint+" "+string(m.State))
		evs, _ := s.Events(ctx, m.ID, 0, 0)
		for _, e := range evs {
			r.Events = append(r.Events, m.Name+" "+e.Kind+" "+e.Message+" "+e.Time.String())
		}
		invs, _ := s.Inventories(ctx, m.ID)
		for _, in := range invs {
			r.Inventories = append(r.Inventories, m.Name+" "+in.Inventory.GPUs[0].Model)
		}
	}
	secs, _ := s.ListSecrets(ctx)
	for _, x := range secs {
		r.Secrets = append(r.Secrets, x.Name+" "+x.KeyID+" "+string(x.Sealed))
	}
	jobs, _ := s.ListJobs(ctx, "")
	for _, j := range jobs {
		r.Jobs = append(r.Jobs, j.ID+" "+string(j.State))
	}
	toks, _ := s.ListTokens(ctx)
	for _, x := range toks {
		r.Tokens = append(r.Tokens, x.ID+" "+x.Scope+" "+x.JobID)
	}
	ls, _ := s.ListLeases(ctx)
	for _, l := range ls {
		r.Leases = append(r.Leases, l.MAC+" "+l.IP.String())
	}
	tel, _ := s.ListNodeTelemetry(ctx)
	for _, x := range tel {
		r.Telemetry = append(r.Telemetry, x.Machine+" "+string(x.State))
	}
	r.Fence, _ = s.Fence(ctx, "job/j-v7-2")
	return r
}

// The upgrade path from the previous release's schema (v7) and back:
//   - a newer ingot settles the lease log the v7 writer left, copies the
//     file beside itself as PATH.schema-v7-TIME (the copy holds that lease,
//     opens as v7 with the same records), migrates once (the file is v8,
//     with the same records and v8's indexes working), and not again;
//   - an older ingot (v7, acted by a store with 7 steps) refuses the v8
//     file naming both versions and `ingot admin restore --db PATH COPY`
//     with the copy's exact path;
//   - that restore, run by the older ingot, never opens the v8 file: it
//     keeps it with its unapplied lease log (whole for the newer ingot),
//     and the older ingot then opens the restored v7 file.
func TestMigrateFromV7(t *testing.T) {
	ctx := context.Background()
	path := v7Fixture(t)
	const loggedMAC = "52:54:00:07:00:99" // only in the fixture's lease log
	if v, has := rawSchema(t, path, loggedMAC); v != 7 || has {
		t.Fatalf("the fixture: schema %d, lease of %s applied %v; want schema 7 with that lease only in the log", v, loggedMAC, has)
	}
	at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	opts := store.Options{Timeout: time.Second, Now: func() time.Time { return at }}
	s, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatalf("opening the v7 file: %v", err)
	}
	migrated := dump(t, s)
	if running, _ := s.ListJobs(ctx, store.JobRunning); len(running) != 1 || running[0].ID != "j-v7-2" {
		t.Errorf("v8's job state index: running %+v", running)
	}
	if toks, _ := s.FindTokens(ctx, store.TokenFilter{Scope: "machine:m-0000000001"}); len(toks) != 1 || toks[0].ID != "mb-boot" {
		t.Errorf("v8's token scope index: %+v", toks)
	}
	s.Close()
	if len(migrated.Machines) != 3 || len(migrated.Events) != 6 || len(migrated.Leases) != 4 || migrated.Fence != "instance-a" {
		t.Fatalf("migrated records: %+v", migrated)
	}

	copyPath := path + ".schema-v7-20261205T080000Z"
	if v, has := rawSchema(t, copyPath, loggedMAC); v != 7 || !has {
		t.Fatalf("the copy %s: schema %d, logged lease %v; want schema 7 with the lease the log held", copyPath, v, has)
	}
	if v, _ := rawSchema(t, path, loggedMAC); v != bolt.SchemaVersion() {
		t.Errorf("the migrated file is at schema %d, want %d", v, bolt.SchemaVersion())
	}
	// The copy opens as the old version with the same records.
	old := filepath.Join(t.TempDir(), "old.db")
	copyFile(t, copyPath, old)
	s7, err := bolt.OpenAs(old, opts, 7)
	if err != nil {
		t.Fatalf("opening the copy as v7: %v", err)
	}
	if diff := cmp.Diff(migrated, dump(t, s7)); diff != "" {
		t.Errorf("the copy's records differ from the migrated file's (-migrated +copy):\n%s", diff)
	}
	s7.Close()
	// Migrated once: opening it again copies nothing more.
	s, err = bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if m, _ := filepath.Glob(path + ".schema-v*"); len(m) != 1 {
		t.Errorf("copies beside the file: %v, want the one", m)
	}

	// The older ingot refuses, naming both versions and the way back.
	_, err = bolt.OpenAs(path, opts, 7)
	want := "schema version 8 is newer than this ingot understands (7)"
	restoreCmd := "ingot admin restore --db " + path + " " + copyPath
	if !errors.Is(err, store.ErrSchemaNewer) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), restoreCmd) {
		t.Fatalf("the older ingot on the v8 file: %v\nwant ErrSchemaNewer saying %q and %q", err, want, restoreCmd)
	}

	// A lease the newer ingot logged and never applied (it was killed).
	const newMAC = "52:54:00:08:00:01"
	seg := bolt.LeaseLogRecord(store.Lease{MAC: newMAC, IP: netip.MustParseAddr("10.8.0.1"), State: "bound", Updated: at, Expires: at.Add(time.Hour)})
	if err := os.WriteFile(path+".lease-log.1000", seg, 0o600); err != nil {
		t.Fatal(err)
	}
	src, _ := os.Open(copyPath)
	defer src.Close()
	kept, err := bolt.RestoreAs(path, src, opts, 7)
	if err != nil {
		t.Fatalf("the older ingot restoring %s: %v", copyPath, err)
	}
	if _, err := os.Stat(path + ".lease-log.1000"); !os.IsNotExist(err) {
		t.Errorf("the v8 file's lease log is still beside the restored file: %v", err)
	}
	s7, err = bolt.OpenAs(path, opts, 7)
	if err != nil {
		t.Fatalf("the older ingot opening the restored file: %v", err)
	}
	back := dump(t, s7)
	s7.Close()
	if diff := cmp.Diff(migrated, back); diff != "" {
		t.Errorf("restored records (-before the downgrade +after):\n%s", diff)
	}
	// The kept v8 file, with its lease log, is whole for the newer ingot.
	if v, has := rawSchema(t, kept, newMAC); v != 8 || has {
		t.Fatalf("kept %s: schema %d, logged lease applied %v; want 8 and its log not applied by the older ingot", kept, v, has)
	}
	s, err = bolt.Open(kept, opts)
	if err != nil {
		t.Fatalf("the newer ingot opening the kept file: %v", err)
	}
	if l, err := s.LeaseByMAC(ctx, newMAC); err != nil || l.IP.String() != "10.8.0.1" {
		t.Errorf("the kept file's logged lease: %+v, %v", l, err)
	}
	s.Close()
}

// A fresh file and a file already at this schema are never copied.
func TestNoCopyWithoutMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingot.db")
	for range 2 {
		s, err := bolt.Open(path, store.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if m, _ := filepath.Glob(path + ".schema-v*"); len(m) != 0 {
		t.Errorf("copies: %v, want none", m)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
