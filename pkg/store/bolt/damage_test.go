package bolt_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// damagedCopy writes a store with some records, closes it and returns a
// damaged copy made by mutate, and the pristine file.
func damagedCopy(t *testing.T, mutate func([]byte) []byte) (string, string) {
	t.Helper()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	s, err := bolt.Open(good, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 200 {
		m := &machine.Machine{Name: "gpu-" + string(rune('a'+i%26)) + "-" + itoa(i), MACs: []string{mac(i)}}
		if err := s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutInventory(ctx, m.ID, machine.Inventory{Source: "redfish", Problems: []machine.Problem{{Part: strings.Repeat("x", 300)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.db")
	if err := os.WriteFile(bad, mutate(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return bad, good
}

func itoa(i int) string {
	return string(rune('0'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}
func mac(i int) string {
	const hex = "0123456789abcdef"
	return "52:54:00:00:" + string([]byte{hex[i>>4&15], hex[i&15]}) + ":" + string([]byte{hex[i>>12&15], hex[i>>8&15]})
}

// A damaged file is named with what is wrong, never a fault or a panic:
// truncated (bbolt would map pages past the end and the process would die
// of SIGBUS), garbled pages (bbolt panics reading them), both meta pages
// gone. A torn meta page 0 alone is what bbolt's second meta page is for.
func TestDamagedFile(t *testing.T) {
	cases := map[string]struct {
		mutate func([]byte) []byte
		want   string // "" opens fine
	}{
		"truncated by a page":  {func(b []byte) []byte { return b[:bolt.HighWater(b)-4096] }, "truncated"},
		"truncated to half":    {func(b []byte) []byte { return b[:bolt.HighWater(b)/2] }, "truncated"},
		"truncated to 3 pages": {func(b []byte) []byte { return b[:3*4096] }, "truncated"},
		"garbled data pages": {func(b []byte) []byte {
			r := rand.New(rand.NewPCG(1, 2))
			for off := 2 * 4096; off+64 < len(b); off += 4096 {
				for i := range 64 {
					b[off+i] = byte(r.Uint32())
				}
			}
			return b
		}, "damaged"},
		"both meta pages": {func(b []byte) []byte {
			copy(b[16:], make([]byte, 64))
			copy(b[4096+16:], make([]byte, 64))
			return b
		}, "neither meta page is valid"},
		"meta page 0 torn": {func(b []byte) []byte { b[20] ^= 0xff; return b }, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			bad, _ := damagedCopy(t, c.mutate)
			s, err := bolt.Open(bad, store.Options{Timeout: time.Second})
			if c.want == "" {
				if err != nil {
					t.Fatalf("Open = %v, want the copy on meta page 1 used", err)
				}
				ms, err := s.ListMachines(context.Background(), store.MachineFilter{})
				if err != nil || len(ms) != 200 {
					t.Errorf("ListMachines = %d, %v", len(ms), err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("Open of a damaged file succeeded")
			}
			if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open = %v, want ErrDamaged naming %s and saying %q", err, bad, c.want)
			}
		})
	}
}
