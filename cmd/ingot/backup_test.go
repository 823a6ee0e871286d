package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An online backup through the API while serve runs, restored offline:
// the copy holds what the server held, names the secret key it needs
// without containing it, read-only tokens cannot take one, and a restore
// onto the running server's file is refused.
func TestBackupAndRestoreCLI(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	s.ok("machine", "add", "gpu-01", "--mac", "52:54:00:dd:00:01", "--recipe", "tower-gpu")
	val := filepath.Join(t.TempDir(), "cred")
	os.WriteFile(val, []byte("username=root\npassword=s3cret-value\n"), 0o600)
	s.ok("secret", "set", "gpu-01-bmc", "--from-file", val)

	file := filepath.Join(t.TempDir(), "ingot-backup.db")
	out := s.ok("backup", "-f", file)
	if !strings.Contains(out, "need secret key ") || !strings.Contains(out, file) {
		t.Errorf("backup output:\n%s", out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(s.data, "secrets.key"))
	for _, line := range strings.Split(string(key), "\n") {
		if f := strings.Fields(line); len(f) == 4 && strings.Contains(string(b), f[3]) {
			t.Error("the backup contains the secret key")
		}
	}
	if strings.Contains(string(b), "s3cret-value") {
		t.Error("the backup holds a secret in clear")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v, want 0600", fi.Mode().Perm())
	}

	if _, _, err := s.run("admin", "restore", file, "--db", filepath.Join(s.data, "ingot.db")); err == nil || !strings.Contains(err.Error(), "held by a running ingot server") {
		t.Errorf("restore onto the running server's file: %v", err)
	}
	db := filepath.Join(t.TempDir(), "restored.db")
	if out := s.ok("admin", "restore", file, "--db", db); !strings.Contains(out, "restored "+db) {
		t.Errorf("restore: %q", out)
	}
	if out := s.ok("admin", "machine", "ls", "--db", db); !strings.Contains(out, "gpu-01") {
		t.Errorf("the restored database lacks gpu-01:\n%s", out)
	}
	half := filepath.Join(t.TempDir(), "half.db")
	os.WriteFile(half, b[:len(b)/2], 0o600)
	if _, _, err := s.run("admin", "restore", half, "--db", db); err == nil || !strings.Contains(err.Error(), "not a usable database") {
		t.Errorf("restore of a damaged backup: %v", err)
	}

	s.useToken("viewer", "read-only")
	if _, _, err := s.run("backup", "-f", file+".2"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("backup with a read-only token: %v", err)
	}
}
