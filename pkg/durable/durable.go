// Package durable holds the small steps that make file system changes
// survive a crash, shared by the stores that write files (pkg/artifact,
// pkg/store's lease log).
package durable

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// SyncDir makes the entries of dir durable: a file created, renamed or
// removed in dir is only certain to be there (or gone) after a crash once
// its directory has been synced, whatever was synced of the file itself.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// WriteFile replaces path with data, mode perm, so that a crash leaves the
// old file or the new one whole, never part of either: a temporary file in
// the same folder, synced, renamed over path, and the folder synced.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteWith(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith is WriteFile with the content written by write (a snapshot
// streamed into the file, say); a failure of write leaves path as it was.
func WriteWith(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a failure; gone by then otherwise
	err = tmp.Chmod(perm)
	if err == nil {
		err = write(tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
