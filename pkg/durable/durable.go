// Package durable holds the small steps that make file system changes
// survive a crash, shared by the stores that write files (pkg/artifact,
// pkg/store's lease log).
package durable

import (
	"fmt"
	"os"
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
