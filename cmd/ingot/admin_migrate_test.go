package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminMigrate copies a stopped install into an empty store with
// ingot admin migrate (bbolt to bbolt here; to etcd in pkg/store/backends'
// integration test): the copy is checked and its token works there; a
// second run does nothing; a target holding other records is refused.
func TestAdminMigrate(t *testing.T) {
	dir := t.TempDir()
	from, to, other := filepath.Join(dir, "a", "ingot.db"), filepath.Join(dir, "b", "ingot.db"), filepath.Join(dir, "c", "ingot.db")
	t.Setenv("INGOT_DB", "")
	var c cliServer
	c.t = t
	c.ok("admin", "token", "create", "ops", "--db", from)
	out := c.ok("admin", "migrate", "--from", "bolt://"+from, "--to", "bolt://"+to)
	if !strings.Contains(out, "copied 1 records") || !strings.Contains(out, "compared every one") {
		t.Errorf("admin migrate said:\n%s", out)
	}
	if out := c.ok("admin", "token", "ls", "--db", to); !strings.Contains(out, "ops") {
		t.Errorf("the migrated store's tokens:\n%s", out)
	}
	if out := c.ok("admin", "migrate", "--from", from, "--to", to); !strings.Contains(out, "nothing to do") {
		t.Errorf("a second admin migrate said:\n%s", out)
	}
	c.ok("admin", "token", "create", "someone-else", "--db", other)
	if _, _, err := c.run("admin", "migrate", "--from", from, "--to", other); err == nil || !strings.Contains(err.Error(), "nothing was written") {
		t.Errorf("admin migrate into a store holding another token: %v; want a refusal", err)
	}
	if _, _, err := c.run("admin", "migrate", "--from", from); err == nil {
		t.Error("admin migrate without --to did not fail")
	}
}
