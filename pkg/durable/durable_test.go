package durable

import (
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
