package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// TestDamagedPagesCLI runs the commands on the file that crashed both
// `ingot admin check` and `ingot serve` with SIGSEGV in bbolt's page
// checks (a backup of 150 machines, one byte flipped 40 bytes into page
// 11) and on a few other garbled page headers, each in its own process
// under a timeout: check reports the damage naming the file (or finds the
// file consistent), serve refuses naming the file or serves what is
// intact; neither crashes nor hangs.
func TestDamagedPagesCLI(t *testing.T) {
	base := storetest.PopulatedBackup(t, 150)
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if len(raw) < 12*page {
		t.Fatalf("the backup has %d pages, want at least 12 (the damaged page is 11)", len(raw)/page)
	}
	for _, tc := range []struct {
		name       string
		page, byte int
	}{
		{"the issue's file: page 11, byte 40", 11, 40},
		{"page 11's element count", 11, 10},
		{"page 11's flags", 11, 8},
		{"page 3's first element", 3, 16},
		{"page 2's id", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "ingot.db")
			b := append([]byte(nil), raw...)
			b[tc.page*page+tc.byte] ^= 0xff
			if err := os.WriteFile(db, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err, ran := ingotProcess(t, 30*time.Second, "admin", "check", "--db", db)
			crashed(t, "admin check", out)
			if !ran {
				t.Fatalf("admin check did not end within 30 s:\n%s", out)
			}
			damaged := err != nil
			if damaged && !strings.Contains(out, db) {
				t.Errorf("admin check failed without naming the file: %v\n%s", err, out)
			}
			check := out
			// serve opens the store as check does: where check found damage,
			// serve must refuse (a loaded machine may take seconds to get
			// there); where it did not, serve serves until it is stopped.
			out, err, ran = ingotProcess(t, 20*time.Second, "serve", "--dhcp", "off", "--tftp=false", "--http-addr", freePort(t),
				"--api-addr", freePort(t), "--data", t.TempDir(), "--db", db)
			crashed(t, "serve", out)
			switch {
			case ran && (err == nil || !strings.Contains(out, db)):
				t.Errorf("serve ended without naming the damaged file: %v\n%s", err, out)
			case !ran && damaged:
				t.Errorf("serve was still serving a file admin check found damaged:\n%s", out)
			}
			t.Logf("admin check: %.300s; serve still serving after 20 s: %v", check, !ran)
		})
	}
}

// ingotProcess runs this test binary as ingot with args for at most d:
// ran false means it was still running then (it is killed).
func ingotProcess(t *testing.T, d time.Duration, args ...string) (out string, err error, ran bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "INGOT_TEST_AS_INGOT=1")
	b, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return string(b), err, false
	}
	return string(b), err, true
}

// crashed fails the test when out shows a Go crash.
func crashed(t *testing.T, what, out string) {
	t.Helper()
	for _, sign := range []string{"fatal error:", "panic:", "SIGSEGV", "goroutine "} {
		if strings.Contains(out, sign) {
			t.Fatalf("%s crashed (%q):\n%s", what, sign, out)
		}
	}
}
