package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bolt is the Store kept in one bbolt file. It is safe for concurrent use
// within one process; a second process gets ErrLocked from Open.
type Bolt struct {
	db     *bolt.DB
	path   string
	opts   Options
	closed atomic.Bool
	leases *leaseLog // leases.go, leaselog.go
}

var _ Store = (*Bolt)(nil)

// Open opens (creating if needed) the database file at path and migrates it
// to the current schema.
func Open(path string, opts Options) (*Bolt, error) {
	opts = opts.withDefaults()
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
	var db *bolt.DB
	err := guard(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.Timeout, InitialMmapSize: 256 << 20})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("opening store %s: %w (waited %s; stop the other process or use its API)", path, ErrLocked, opts.Timeout)
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
	b := &Bolt{db: db, path: path, opts: opts}
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
func (b *Bolt) Path() string { return b.path }

// Close releases the file. Later calls return ErrClosed.
func (b *Bolt) Close() error {
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

// Check runs bbolt's consistency check on the open file and returns every
// problem found, joined.
func (b *Bolt) Check(ctx context.Context) error {
	return b.view(ctx, func(tx *bolt.Tx) error {
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

	kSchema = []byte("schema")
)

// view runs a short read transaction after checking ctx and the closed flag.
func (b *Bolt) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.mapErr(guard(b.path, func() error { return b.db.View(fn) }))
}

// update runs one write transaction, committed and fsynced on return.
func (b *Bolt) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.mapErr(guard(b.path, func() error { return b.db.Update(fn) }))
}

// batch is update with group commit: fn may run more than once and must only
// set variables it overwrites each time.
func (b *Bolt) batch(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.mapErr(guard(b.path, func() error { return b.db.Batch(fn) }))
}

func (b *Bolt) ready(ctx context.Context) error {
	if b.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

func (b *Bolt) mapErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
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
func getJSON(bk *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := bk.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decoding record %q: %w", key, err)
	}
	return true, nil
}

func putJSON(bk *bolt.Bucket, key []byte, v any) error {
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
