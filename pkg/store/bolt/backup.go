package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ingot-dev/ingot/pkg/durable"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Backup writes a copy of the database to w while the store serves: one
// bbolt read transaction's snapshot (writers go on), into which the
// mutations still only in the lease log are applied before it is sent.
// The copy is a database file Open (and `ingot admin restore`) take as is.
func (b *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(b.path), "."+filepath.Base(b.path)+".backup-*")
	if err != nil {
		return 0, fmt.Errorf("backing up %s: %w", b.path, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var ops []leaseOp
	var seg uint64
	// The overlay is held still while the snapshot is taken, so the two
	// are one state (see viewLeases).
	err = b.viewLeases(ctx, func(tx *bbolt.Tx) error {
		if lg := b.leases; lg != nil {
			for _, e := range lg.ops {
				ops = append(ops, e.op)
				seg = max(seg, e.seg)
			}
		}
		_, err := tx.WriteTo(tmp)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("backing up %s: taking the snapshot: %w", b.path, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("backing up %s: %w", b.path, err)
	}
	if len(ops) > 0 {
		if err := applyToCopy(tmp.Name(), ops, seg); err != nil {
			return 0, fmt.Errorf("backing up %s: adding %d logged lease changes: %w", b.path, len(ops), err)
		}
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return 0, fmt.Errorf("backing up %s: %w", b.path, err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return n, fmt.Errorf("backing up %s: sending the copy: %w", b.path, err)
	}
	return n, nil
}

// applyToCopy applies logged lease mutations to a snapshot file, and
// records them as applied through seg.
func applyToCopy(path string, ops []leaseOp, seg uint64) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, op := range ops {
			if err := applyLeaseOp(tx, op); err != nil {
				return err
			}
		}
		return tx.Bucket(bMeta).Put(kLeaseLogApplied, u64(seg))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Restore replaces the database file at path with the backup in src,
// offline: it fails with ErrLocked while a server holds path. The backup
// is checked as Open checks any file (a damaged one is named and nothing
// changes; an older schema is migrated, with no copy of its own: src is
// that copy). The current file is kept as path.before-restore-TIME: one of
// this binary's schema is first opened and closed (its lease log applied,
// so nothing of it replays onto the restored copy); one of another schema
// (a newer ingot's, when going back to the copy it kept before migrating)
// is never opened: its lease log segments move with it, unapplied, so the
// kept file is whole for the ingot that wrote it. It returns where the old
// file was kept ("" when there was none).
func Restore(path string, src io.Reader, opts store.Options) (string, error) {
	return restore(path, src, opts, migrations())
}

func restore(path string, src io.Reader, opts store.Options, migs []migration) (string, error) {
	tmpPath := path + ".restoring"
	if err := copyToFile(tmpPath, src); err != nil {
		return "", fmt.Errorf("restoring %s: %w", path, err)
	}
	defer os.Remove(tmpPath)
	chk, err := open(tmpPath, opts, migs, false)
	if err != nil {
		return "", fmt.Errorf("restoring %s: the backup is not a usable database: %w", path, err)
	}
	if err := chk.Close(); err != nil {
		return "", fmt.Errorf("restoring %s: %w", path, err)
	}
	kept, err := keepCurrent(path, opts, migs)
	if err != nil {
		return "", fmt.Errorf("restoring %s: %w", path, err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return kept, fmt.Errorf("restoring %s: %w (the previous file is %s)", path, err, kept)
	}
	return kept, durable.SyncDir(filepath.Dir(path))
}

// keepCurrent moves the file at path (if any) aside as
// path.before-restore-TIME, settled first if it is of this binary's
// schema, else with its lease log segments beside it.
func keepCurrent(path string, opts store.Options, migs []migration) (string, error) {
	if _, err := os.Stat(path); err != nil {
		return "", nil
	}
	version, err := fileSchema(path, opts.WithDefaults().Timeout)
	if err != nil {
		return "", err
	}
	if version == len(migs) {
		cur, err := open(path, opts, migs, false)
		if err != nil {
			return "", fmt.Errorf("opening the current file to settle its lease log: %w", err)
		}
		if err := cur.Close(); err != nil {
			return "", err
		}
	}
	kept := fmt.Sprintf("%s.before-restore-%s", path, time.Now().UTC().Format("20060102T150405Z"))
	segs, err := newLeaseLog(path).segments()
	if err != nil {
		return "", err
	}
	for _, n := range segs { // none left after a settle
		if err := os.Rename(newLeaseLog(path).segPath(n), newLeaseLog(kept).segPath(n)); err != nil {
			return "", fmt.Errorf("keeping the current file's lease log: %w", err)
		}
	}
	if err := os.Rename(path, kept); err != nil {
		return "", fmt.Errorf("keeping the current file: %w", err)
	}
	return kept, nil
}

// fileSchema reads the schema version of the file at path without opening
// it as a store (no migration, no lease log): read-only, waiting at most
// timeout for a server holding it (then ErrLocked).
func fileSchema(path string, timeout time.Duration) (int, error) {
	var version int
	err := guard(path, func() error {
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: timeout})
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("%w (stop the server first: a restore replaces the file under it)", store.ErrLocked)
		}
		if err != nil {
			return err
		}
		defer db.Close()
		return db.View(func(tx *bbolt.Tx) (err error) {
			version, err = schemaVersion(tx)
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("reading the schema of %s: %w", path, err)
	}
	return version, nil
}

func copyToFile(path string, src io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
