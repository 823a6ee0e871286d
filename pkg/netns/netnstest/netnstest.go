// Package netnstest gives tests of the namespace and VM tiers their
// preconditions: root, the tools they drive, and a namespace cleaned up at
// the end. Where a precondition is missing the test is skipped with the
// reason, except in CI (CI or INGOT_REQUIRE_ALL set), where it fails: a
// tier that silently skips in CI would be a test that cannot fail.
package netnstest

import (
	"context"
	"os"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns"
)

// RequireAll reports whether missing preconditions must fail the test.
func RequireAll() bool {
	return os.Getenv("CI") != "" || os.Getenv("INGOT_REQUIRE_ALL") != ""
}

// Need skips (or, in CI, fails) the test unless it runs as root and every
// named program is on PATH.
func Need(t testing.TB, programs ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root to create network namespaces")
		return
	}
	NeedPrograms(t, append([]string{"ip"}, programs...)...)
}

// New makes a namespace that is removed when the test ends.
func New(t testing.TB, prefix string) *netns.NS {
	t.Helper()
	Need(t)
	n, err := netns.New(context.Background(), prefix)
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Logf("removing namespace %s: %v", n.Name, err)
		}
	})
	return n
}
