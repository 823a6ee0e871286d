package netnstest

import (
	"os"
	"os/exec"
	"testing"
)

// The preconditions of tests that need no namespace: a program, a file, a
// privilege, something the machine must offer. Each skips the test with
// the reason on a developer's machine and fails it in CI (RequireAll), so
// a tier cannot pass in CI by skipping. Tests never call t.Skip
// themselves: they name what they need here.

// Missing skips the test with why (format and args), or fails it in CI.
// For a precondition the helpers below do not cover (a loop device, IPv6
// loopback, a Python module); the message says what is missing and how
// to get it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if RequireAll() {
		t.Fatalf(format+" (required in CI; run 'make deps' as root)", args...)
	}
	t.Skipf(format, args...)
}

// NeedPrograms skips (in CI fails) the test unless every program is on
// PATH (or, named by a path, exists and is executable). No root needed.
func NeedPrograms(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			Missing(t, "needs %s on PATH", p)
			return
		}
	}
}

// NeedFiles skips (in CI fails) the test unless every path exists; hint
// says where they come from (e.g. "Debian package ovmf").
func NeedFiles(t testing.TB, hint string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			Missing(t, "needs %s (%s): %v", p, hint, err)
			return
		}
	}
}

// NeedRoot skips (in CI fails) the test unless it runs as root; what says
// what root is for ("a loop device").
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root for %s", what)
	}
}

// NeedNoError skips (in CI fails) the test when err, from checking a
// precondition (iso.Check, making a FIFO), is not nil: what names it.
func NeedNoError(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		Missing(t, "%s: %v", what, err)
	}
}

// Optional skips the test, in CI too, unless the environment variable env
// is set: for a test that runs only when asked, because it is slow (a
// Debian image build) or runs over data another step leaves (an unpacked
// kernel), or a helper process that another test starts. Never for a
// missing program, file or privilege: those are preconditions above.
func Optional(t testing.TB, env, why string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("set %s to run: %s", env, why)
	}
	return v
}

// HavePrograms reports whether every program is on PATH, for a part of a
// test that needs them (a check after a VM booted): when one is missing
// the part is left out with a log line, and in CI the test fails.
func HavePrograms(t testing.TB, programs ...string) bool {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			if RequireAll() {
				t.Errorf("needs %s on PATH (required in CI; run 'make deps' as root)", p)
			} else {
				t.Logf("needs %s on PATH: that check is left out", p)
			}
			return false
		}
	}
	return true
}
