package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// A backup taken while the store serves holds the machines and the leases
// still only in the lease log; Restore puts it in place offline, keeping
// the old file, and refuses a damaged backup or a held database.
func TestBackupAndRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ingot.db")
	s, err := bolt.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := &machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:00:00:01"}}
	if err := s.CreateMachine(ctx, m); err != nil {
		t.Fatal(err)
	}
	lease := store.Lease{MAC: "52:54:00:00:00:01", IP: netip.MustParseAddr("10.0.0.9"), State: "bound", Expires: time.Now().Add(time.Hour)}
	if err := s.PutLease(ctx, lease); err != nil {
		t.Fatal(err)
	}
	// The log is applied 100 ms after a change, so the lease is still only
	// in the log here; say so if a slow machine applied it first.
	if s.LeaseLogStats().Pending == 0 {
		t.Log("the lease was applied before the backup; the log path is not exercised this run")
	}
	var buf bytes.Buffer
	n, err := s.Backup(ctx, &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("Backup: %d bytes, %v", n, err)
	}
	// The server goes on; a later change is not in the backup.
	s.CreateMachine(ctx, &machine.Machine{Name: "gpu-02", MACs: []string{"52:54:00:00:00:02"}})

	// Restore while the server holds the file: refused, nothing changes.
	if _, err := bolt.Restore(path, bytes.NewReader(buf.Bytes()), store.Options{Timeout: 100 * time.Millisecond}); !errors.Is(err, store.ErrLocked) {
		t.Errorf("restore onto a held database: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A damaged backup is named and changes nothing.
	bad := bytes.Clone(buf.Bytes()[:buf.Len()/2])
	if _, err := bolt.Restore(path, bytes.NewReader(bad), store.Options{}); err == nil || !strings.Contains(err.Error(), "not a usable database") {
		t.Errorf("restore of half a backup: %v", err)
	}
	kept, err := bolt.Restore(path, bytes.NewReader(buf.Bytes()), store.Options{})
	if err != nil || !strings.Contains(kept, "before-restore") {
		t.Fatalf("Restore: kept %q, %v", kept, err)
	}
	r, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.GetMachine(ctx, "gpu-01"); err != nil {
		t.Errorf("restored: gpu-01: %v", err)
	}
	if _, err := r.GetMachine(ctx, "gpu-02"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("restored: gpu-02, made after the backup: %v", err)
	}
	if l, err := r.LeaseByMAC(ctx, lease.MAC); err != nil || l.IP != lease.IP {
		t.Errorf("restored: the lease that was only in the log: %+v, %v", l, err)
	}
	old, err := bolt.Open(kept, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.GetMachine(ctx, "gpu-02"); err != nil {
		t.Errorf("the kept file lacks gpu-02: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.restoring*")); len(matches) > 0 {
		t.Errorf("restore left %v", matches)
	}
}
