package durable

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Errorf("SyncDir of a directory: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if err := SyncDir(missing); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("SyncDir(%s) = %v, want an error naming it", missing, err)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "two" || fi.Mode().Perm() != 0o600 {
		t.Errorf("%q mode %v, want \"two\" 0600", b, fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := WriteFile(filepath.Join(dir, "no-such-dir", "x"), nil, 0o600); err == nil || !strings.Contains(err.Error(), "no-such-dir") {
		t.Errorf("a missing folder: %v", err)
	}
}

// A reader of a file being replaced sees the old contents or the new ones
// whole, never an empty or cut file (what os.WriteFile's truncate-then-write
// shows a reader in another process).
func TestWriteFileReaderSeesWholeFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.json")
	versions := [][]byte{bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 3<<10)}
	if err := WriteFile(p, versions[0], 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range 100 {
			if err := WriteFile(p, versions[i%2], 0o644); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for reads := 0; ; reads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d reads, each a whole version", reads)
			return
		default:
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, versions[0]) && !bytes.Equal(b, versions[1]) {
			<-done
			t.Fatalf("read %d: %d bytes (%v), want one version whole", reads, len(b), err)
		}
	}
}
