package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// runBackup: `ingot backup -f FILE`, through the API while the server
// runs: a consistent copy of its database, leases still in the lease log
// included, written to FILE (0600) only once it arrived whole.
func runBackup(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("backup", "backup -f FILE")
	af := addAPIFlags(fs)
	file := fs.String("f", "", "write the copy here (required; replaced only once the copy arrived whole)")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) != 0 || *file == "" {
		fs.Usage()
		return errUsage
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(*file), "."+filepath.Base(*file)+".*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	key, n, err := c.Backup(ctx, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *file)
	}
	if err != nil {
		return fmt.Errorf("backup: %w (%s is unchanged)", err, *file)
	}
	fmt.Fprintf(e.stdout, "backup of %s: %d bytes in %s\n", c.Server(), n, *file)
	if key != "" {
		fmt.Fprintf(e.stdout, "its sealed secrets need secret key %s (the server's --secret-key-file); the key is not in the backup: keep a copy of that file apart from it\n", key)
	}
	return nil
}
