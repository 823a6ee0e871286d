package netnstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that records a skip or a failure instead of
// ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(f string, a ...any) {
	r.skipped = fmt.Sprintf(f, a...)
}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = fmt.Sprintf(f, a...)
}

// Errorf and Logf stand for Fatalf and Skipf where a part of a test is
// left out (HavePrograms).
func (r *recorder) Errorf(f string, a ...any) { r.Fatalf(f, a...) }
func (r *recorder) Logf(f string, a ...any)   { r.Skipf(f, a...) }

// A missing precondition skips on a developer's machine and fails in CI;
// a present one does neither; Optional skips in CI too.
func TestPreconditions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "present")
	os.WriteFile(file, nil, 0o644)
	for name, c := range map[string]struct {
		check   func(testing.TB)
		missing bool
		inCI    bool // still skipped (not failed) in CI
	}{
		"program present":  {func(tb testing.TB) { NeedPrograms(tb, "sh") }, false, false},
		"program missing":  {func(tb testing.TB) { NeedPrograms(tb, "sh", "ingot-no-such-tool") }, true, false},
		"file present":     {func(tb testing.TB) { NeedFiles(tb, "t", file) }, false, false},
		"file missing":     {func(tb testing.TB) { NeedFiles(tb, "Debian package x", file, file+".no") }, true, false},
		"no error":         {func(tb testing.TB) { NeedNoError(tb, "mkfifo", nil) }, false, false},
		"an error":         {func(tb testing.TB) { NeedNoError(tb, "mkfifo", errors.New("EPERM")) }, true, false},
		"optional not set": {func(tb testing.TB) { Optional(tb, "INGOT_TEST_NO_SUCH_VAR", "slow") }, true, true},
		"have programs":    {func(tb testing.TB) { HavePrograms(tb, "sh") }, false, false},
		"have none":        {func(tb testing.TB) { HavePrograms(tb, "ingot-no-such-tool") }, true, false},
	} {
		t.Run(name, func(t *testing.T) {
			for _, ci := range []bool{false, true} {
				t.Setenv("INGOT_REQUIRE_ALL", map[bool]string{true: "1"}[ci])
				t.Setenv("CI", "")
				r := &recorder{}
				c.check(r)
				switch {
				case !c.missing && (r.skipped != "" || r.failed != ""):
					t.Errorf("CI=%v: present, but skipped %q failed %q", ci, r.skipped, r.failed)
				case c.missing && (ci && !c.inCI) && r.failed == "":
					t.Errorf("CI=%v: missing, not failed (skipped %q)", ci, r.skipped)
				case c.missing && !(ci && !c.inCI) && r.skipped == "":
					t.Errorf("CI=%v: missing, not skipped (failed %q)", ci, r.failed)
				}
			}
		})
	}
}
