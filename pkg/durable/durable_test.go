package durable

import (
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
