package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A folder that lints is swapped in whole; one that does not keeps the
// recipes in force and says what is wrong, file:line.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", "name: a\nversion: 1.0.0\n")
	c, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Get("a")
	if err != nil || r.Version != "1.0.0" {
		t.Fatalf("Get(a) = %+v, %v", r, err)
	}
	write(t, dir, "a.yaml", "name: a\nversion: 1.1.0\n")
	write(t, dir, "b.yaml", "name: b\nversion: 1.0.0\n")
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Get("a"); r.Version != "1.1.0" || !slices.Equal(c.Names(), []string{"a", "b"}) {
		t.Errorf("after reload: a %s, names %v", r.Version, c.Names())
	}
	write(t, dir, "b.yaml", "name: b\nversion: 1.0.0\nhardware:\n  gpus:\n    - count: many\n")
	err = c.Reload()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "b.yaml")+":5:") {
		t.Fatalf("reload of a bad folder: %v, want an error naming b.yaml:5", err)
	}
	if _, err := c.Get("b"); err != nil {
		t.Errorf("a bad reload took b away: %v", err)
	}
	if _, err := New(Config{Dir: dir}); err == nil {
		t.Error("New on a folder that does not lint succeeded")
	}
}

// Digests are the recipes in force, each at its digest; a reload that
// changes a recipe changes its digest alone, and one that does not lint
// changes none.
func TestDigests(t *testing.T) {
	none, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := none.Digests(); len(got) != 0 {
		t.Errorf("no folder: Digests() = %v, want none", got)
	}
	dir := t.TempDir()
	write(t, dir, "a.yaml", "name: a\nversion: 1.0.0\n")
	write(t, dir, "b.yaml", "name: b\nversion: 1.0.0\n")
	c, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	before := c.Digests()
	for _, n := range []string{"a", "b"} {
		r, _ := c.Get(n)
		if before[n] != r.Digest() || len(before[n]) != 64 {
			t.Errorf("Digests()[%s] = %q, want the recipe's digest %q", n, before[n], r.Digest())
		}
	}
	write(t, dir, "a.yaml", "name: a\nversion: 1.1.0\n")
	if err := c.Reload(); err != nil {
		t.Fatal(err)
	}
	after := c.Digests()
	if after["a"] == before["a"] || after["b"] != before["b"] || len(after) != 2 {
		t.Errorf("after changing a: %v (before %v); want a's digest changed, b's kept", after, before)
	}
	write(t, dir, "b.yaml", "name: b\nversion: 1.0.0\nhardware:\n  gpus:\n    - count: many\n")
	if c.Reload() == nil {
		t.Fatal("a folder that does not lint reloaded")
	}
	if got := c.Digests(); got["b"] != after["b"] {
		t.Errorf("a reload that failed changed b's digest: %v", got)
	}
}

// Run reloads when the folder changes and when a signal arrives.
func TestRunReloads(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", "name: a\nversion: 1.0.0\n")
	hup := make(chan os.Signal, 1)
	c, err := New(Config{Dir: dir, Every: 10 * time.Millisecond, Reload: hup})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	write(t, dir, "c.yaml", "name: c\nversion: 1.0.0\n")
	waitFor(t, func() bool { _, err := c.Get("c"); return err == nil }, "the new recipe c after a change")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	// Polling off: only the signal reloads.
	c2, err := New(Config{Dir: dir, Every: -1, Reload: hup})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go c2.Run(ctx)
	os.Remove(filepath.Join(dir, "c.yaml"))
	time.Sleep(50 * time.Millisecond)
	if _, err := c2.Get("c"); err != nil {
		t.Fatalf("c went away without a reload: %v", err)
	}
	hup <- os.Interrupt
	waitFor(t, func() bool { _, err := c2.Get("c"); return err != nil }, "c gone after the signal")
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("never saw %s", what)
}

// A recipe file over recipe.MaxFileSize is refused from its size, unread:
// the folder does not load, the error names the file, its size and the
// limit, and a reload keeps the recipes in force. A named pipe among the
// recipes is refused the same way instead of blocking the reload forever.
func TestOversizeRecipe(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", "name: a\nversion: 1.0.0\n")
	c, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	body := "name: big\nversion: 1.0.0\n# " + strings.Repeat("x", recipe.MaxFileSize) + "\n"
	write(t, dir, "big.yaml", body)
	err = c.Reload()
	for _, want := range []string{big, fmt.Sprintf("is %d bytes", len(body)), "limit of 1048576 bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("reload with an oversize recipe: %v, want an error containing %q", err, want)
		}
	}
	if _, err := c.Get("a"); err != nil {
		t.Errorf("the oversize file took a away: %v", err)
	}
	if _, err := c.Get("big"); err == nil {
		t.Error("the oversize recipe is served")
	}
	if _, err := New(Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), big) {
		t.Errorf("New on a folder with an oversize recipe: %v", err)
	}

	os.Remove(big)
	fifo := filepath.Join(dir, "fifo.yaml")
	netnstest.NeedNoError(t, "mkfifo", syscall.Mkfifo(fifo, 0o644))
	done := make(chan error, 1)
	go func() { done <- c.Reload() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo+" is a named pipe, not a regular file") {
			t.Errorf("reload with a named pipe: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reload blocked on a named pipe in the recipes folder")
	}
}
