//go:build integration || e2e

package serve

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// ingotBin returns $INGOT_BIN or builds cmd/ingot into a temp dir.
func ingotBin(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("INGOT_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	root, _ := os.Getwd()
	for !fileExists(filepath.Join(root, "go.mod")) {
		if root == "/" {
			t.Fatal("go.mod not found above the test's directory")
		}
		root = filepath.Dir(root)
	}
	bin := filepath.Join(t.TempDir(), "ingot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/ingot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ingot: %v\n%s", err, out)
	}
	return bin
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
