package bolt_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

func TestCheckFindsCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ingot.db")
	s, err := bolt.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		m := &machine.Machine{Name: "gpu-" + strings.Repeat("x", i%40) + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		if err := s.CreateMachine(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := s.ListMachines(context.Background(), store.MachineFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:150] { // leave free pages behind
		if err := s.DeleteMachine(context.Background(), m.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if err := bolt.CheckFile(path); err != nil {
		t.Fatalf("healthy file: %v", err)
	}
	// List one free page twice in every freelist page: the file still
	// opens, but tx.Check must report the double free.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pageSize = 4096 // bbolt uses the OS page size
	bad := append([]byte(nil), raw...)
	edited := 0
	for off := 2 * pageSize; off+pageSize <= len(bad); off += pageSize {
		// page header: id uint64, flags uint16 (0x10 = freelist), count uint16,
		// overflow uint32; then count page IDs.
		if binary.LittleEndian.Uint64(bad[off:]) != uint64(off/pageSize) || binary.LittleEndian.Uint16(bad[off+8:]) != 0x10 ||
			binary.LittleEndian.Uint16(bad[off+10:]) < 2 {
			continue
		}
		copy(bad[off+24:off+32], bad[off+16:off+24])
		edited++
	}
	if edited == 0 {
		t.Fatal("no freelist page with two entries to corrupt")
	}
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bolt.CheckFile(path); err == nil {
		t.Error("Check passed a file whose freelist lists a page twice")
	} else {
		t.Logf("Check found: %v", err)
	}
}
