package bolt

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bbolt "go.etcd.io/bbolt"

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
// offline: it fails with ErrLocked while a server holds path. The current
// file is first opened and closed (its lease log applied, so nothing of it
// replays onto the restored copy) and kept as path.before-restore-TIME;
// the backup is checked as Open checks any file (a damaged one is named
// and nothing changes) before it is renamed into place. It returns where
// the old file was kept ("" when there was none).
func Restore(path string, src io.Reader, opts store.Options) (string, error) {
	tmpPath := path + ".restoring"
	if err := copyToFile(tmpPath, src); err != nil {
		return "", fmt.Errorf("restoring %s: %w", path, err)
	}
	defer os.Remove(tmpPath)
	chk, err := Open(tmpPath, opts)
	if err != nil {
		return "", fmt.Errorf("restoring %s: the backup is not a usable database: %w", path, err)
	}
	if err := chk.Close(); err != nil {
		return "", fmt.Errorf("restoring %s: %w", path, err)
	}
	kept := ""
	if _, err := os.Stat(path); err == nil {
		cur, err := Open(path, opts)
		if err != nil {
			return "", fmt.Errorf("restoring %s: opening the current file to settle its lease log: %w", path, err)
		}
		if err := cur.Close(); err != nil {
			return "", fmt.Errorf("restoring %s: %w", path, err)
		}
		kept = fmt.Sprintf("%s.before-restore-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, kept); err != nil {
			return "", fmt.Errorf("restoring %s: keeping the current file: %w", path, err)
		}
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return kept, fmt.Errorf("restoring %s: %w (the previous file is %s)", path, err, kept)
	}
	return kept, nil
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
