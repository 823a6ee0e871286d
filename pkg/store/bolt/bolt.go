package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Store is the Store kept in one bbolt file. It is safe for concurrent use
// within one process; a second process gets ErrLocked from Open.
type Store struct {
	db     *bbolt.DB
	path   string
	opts   store.Options
	closed atomic.Bool
	leases *leaseLog // leases.go, leaselog.go
	// migs are the schema steps this binary knows (migrations(); a test
	// acting as an older binary passes fewer), schemaBackup whether Open
	// writes a backup before it migrates (schema.go).
	migs         []migration
	schemaBackup bool
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and migrates it
// to the current schema, after writing a backup of it beside it
// (PATH.schema-vN-TIME, schema.go); a file of a newer schema is refused
// with store.ErrSchemaNewer, naming the backup to go back to.
func Open(path string, opts store.Options) (*Store, error) {
	return open(path, opts, migrations(), true)
}

// open is Open with the schema steps migs (all of them but in tests acting
// as an older binary) and, unless schemaBackup is false, the backup before
// a migration.
func open(path string, opts store.Options, migs []migration, schemaBackup bool) (*Store, error) {
	opts = opts.WithDefaults()
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("opening store %s: creating directory: %w", path, err)
		}
	}
	// InitialMmapSize: address space only. Without it bbolt remaps as the
	// file grows, and a remap waits for every reader (the DHCP server's
	// lookups) to finish: the first thousands of leases paid it repeatedly.
	if err := checkFile(path); err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	var db *bbolt.DB
	err := guard(path, func() (err error) {
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.Timeout, InitialMmapSize: 256 << 20})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("opening store %s: %w (waited %s; stop the other process or use its API)", path, store.ErrLocked, opts.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if opts.BatchDelay > 0 {
		db.MaxBatchDelay = opts.BatchDelay
	}
	if err := guard(path, func() error { return walk(db) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	b := &Store{db: db, path: path, opts: opts, migs: migs, schemaBackup: schemaBackup}
	if err := b.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if err := b.openLeases(); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return b, nil
}

// Path is the database file.
func (b *Store) Path() string { return b.path }

// Close releases the file. Later calls return ErrClosed.
func (b *Store) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	lerr := b.closeLeases()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("closing store %s: %w", b.path, errors.Join(lerr, err))
	}
	if lerr != nil {
		return fmt.Errorf("closing store %s: %w", b.path, lerr)
	}
	return nil
}

// Check reads every page the file's meta reaches with plain reads (so a
// damaged one is named, never followed), then runs bbolt's consistency
// check on the open file, and returns every problem found, joined. bbolt's
// free page list is shared with the writers, so a write committed during
// the check can show as a problem that is not there: run it while nothing
// writes (ingot admin check does, offline).
func (b *Store) Check(ctx context.Context) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	if err := checkMetaHeaders(b.path); err != nil {
		return err
	}
	if err := checkFile(b.path); err != nil {
		return err
	}
	return b.view(ctx, func(tx *bbolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// Bucket names.
var (
	bMeta      = []byte("meta")
	bMachines  = []byte("machines")
	bIdxMAC    = []byte("idx_mac")
	bIdxSerial = []byte("idx_serial")
	bIdxBMC    = []byte("idx_bmc")
	bIdxName   = []byte("idx_name")
	bMachRev   = []byte("machine_rev")
	bInventory = []byte("inventory")
	bEvents    = []byte("events")
	bLeases    = []byte("leases")
	bIdxIP     = []byte("idx_lease_ip")
	bJobs      = []byte("jobs")
	bTokens    = []byte("tokens")
	bSecrets   = []byte("secrets")
	bTelemetry = []byte("telemetry")
	bPowerDays = []byte("power_days")
	bPowerSums = []byte("power_summaries")
	bFences    = []byte("fences")
	// Indexes whose keys are "VALUE/ID" (schema v8): jobs by state, tokens
	// by scope and by job.
	bIdxJobState   = []byte("idx_job_state")
	bIdxTokenScope = []byte("idx_token_scope")
	bIdxTokenJob   = []byte("idx_token_job")

	kSchema = []byte("schema")
)

// view runs a short read transaction after checking ctx and the closed flag.
func (b *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.mapErr(guard(b.path, func() error { return b.db.View(fn) }))
}

// update runs one write transaction, committed and fsynced on return,
// after checking the fences in ctx inside it (store.FenceStore).
func (b *Store) update(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.mapErr(guard(b.path, func() error { return b.db.Update(fenced(ctx, fn)) }))
}

// batch is update with group commit: fn may run more than once and must only
// set variables it overwrites each time.
func (b *Store) batch(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.mapErr(guard(b.path, func() error { return b.db.Batch(faultSafe(b.path, fenced(ctx, fn))) }))
}

// fenced is fn after a check of every fence in ctx, in the same
// transaction.
func fenced(ctx context.Context, fn func(*bbolt.Tx) error) func(*bbolt.Tx) error {
	fs := store.Fences(ctx)
	if len(fs) == 0 {
		return fn
	}
	return func(tx *bbolt.Tx) error {
		for _, f := range fs {
			if err := store.CheckFence(f, string(tx.Bucket(bFences).Get([]byte(f.Key)))); err != nil {
				return err
			}
		}
		return fn(tx)
	}
}

func (b *Store) ready(ctx context.Context) error {
	if b.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

func (b *Store) mapErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}

// u64 encodes a sequence number as a big-endian key, so keys sort numerically.
func u64(v uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, v)
	return k
}

// getJSON decodes the value at key into v; the value is copied out by the
// decoder before the transaction ends. It reports whether the key existed.
func getJSON(bk *bbolt.Bucket, key []byte, v any) (bool, error) {
	raw := bk.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decoding record %q: %w", key, err)
	}
	return true, nil
}

func putJSON(bk *bbolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %q: %w", key, err)
	}
	return bk.Put(key, raw)
}

// copyBytes returns a copy of a value read inside a transaction.
func copyBytes(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

// CheckFile opens the closed database file at path with plain bbolt and
// runs its consistency check (tx.Check), returning every problem found.
func CheckFile(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	var errs []error
	err = db.View(func(tx *bbolt.Tx) error {
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
