package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

// PopulatedBackup writes n machines with an inventory and events into a
// bbolt store and returns a backup of it (a compact copy, as ingot backup
// writes): the real file the damage tests flip bytes in.
func PopulatedBackup(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := bolt.Open(filepath.Join(dir, "ingot.db"), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		m := &machine.Machine{Name: fmt.Sprintf("gpu-%03d", i), MACs: []string{fmt.Sprintf("52:54:00:00:%02x:%02x", i>>8, i&0xff)},
			Serial: fmt.Sprintf("SN%05d", i), Rack: "r1"}
		if err := s.CreateMachine(ctx, m, machine.Event{Kind: "enrolled", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutInventory(ctx, m.ID, machine.Inventory{Source: "redfish", CPUs: []machine.CPU{{Model: "EPYC"}}}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "backup.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s.Close()
	return f.Name()
}
