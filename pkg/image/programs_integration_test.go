//go:build integration

package image

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationRootProgramsRunChrooted copies Debian's stress-ng, fio and
// iperf3 with their libraries into an empty root, as root_programs does for
// the lab-burnin image, and runs each chrooted there: nothing of the host's
// /lib may be missing.
func TestIntegrationRootProgramsRunChrooted(t *testing.T) {
	netnstest.Need(t, "chroot", "stress-ng", "fio", "iperf3")
	root := t.TempDir()
	progs := []string{"stress-ng", "fio", "iperf3"}
	if err := addPrograms(root, progs, 1700000000); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		path, _ := exec.LookPath(p)
		out, err := exec.Command("chroot", root, path, "--version").CombinedOutput()
		if err != nil {
			t.Errorf("chroot %s %s --version: %v\n%s", root, path, err, out)
			continue
		}
		t.Logf("%s: %s", p, strings.SplitN(string(out), "\n", 2)[0])
	}
}
