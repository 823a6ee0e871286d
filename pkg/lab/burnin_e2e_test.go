//go:build e2e

package lab_test

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// Two VMs of the lab-burnin recipe (each with a data disk) are provisioned
// at once. At first boot each runs the burn-in with the tools of its
// installed system, Debian's real stress-ng, fio and iperf3 (the two VMs
// paired by ingot for iperf3), and reaches ready with the numbers kept in
// its verified inventory; fio left the data disk as it was. Then a recipe
// with first_boot.cloud_init: the NoCloud seed reaches the installed disk,
// and since the lab image has no cloud-init to run it, the job fails saying
// so instead of turning the machine ready.
func TestE2ELabBurnIn(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox", "stress-ng", "fio", "iperf3")
	root := repoRoot(t)
	bin, agent := binaries(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{
		Dir: t.TempDir(), Prefix: "ingot-burn", Binary: bin, AgentBinary: agent, RepoRoot: root,
		Recipe: "lab-burnin", VMs: []lab.VMSpec{{Firmware: "bios"}, {Firmware: "bios"}},
		DiskBytes: 1 << 30, Out: logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(l.State.Dir, "serve.log"))
			t.Logf("--- serve.log (tail)\n%s", tail(b, 4000))
			for _, vm := range l.State.VMs {
				b, _ := os.ReadFile(vm.Console)
				t.Logf("--- console of %s (tail)\n%s", vm.Name, tail(b, 5000))
			}
			// Last, where a cut log still shows them: both ends of each
			// two-node test, whose failure is often the other node's.
			for _, vm := range l.State.VMs {
				b, _ := os.ReadFile(vm.Console)
				t.Logf("--- burn-in lines of %s\n%s", vm.Name, tail([]byte(linesWith(b, "burn-in")), 3000))
			}
		}
		l.Down()
	})
	data := map[string][32]byte{}
	for _, vm := range l.State.VMs {
		if len(vm.DataDisks) != 1 {
			t.Fatalf("%s has data disks %v, want the one of lab-burnin's hardware.disks", vm.Name, vm.DataDisks)
		}
		data[vm.Name] = fileSHA256(t, vm.DataDisks[0])
	}

	t.Run("burn-in with the installed system's tools", func(t *testing.T) {
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			requireReady(t, ctx, l, r)
		}
		for _, vm := range l.State.VMs {
			if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: first boot: running ingot-agent firstboot in the installed system"); err != nil {
				t.Error(err)
			}
			requireMeasured(t, ctx, l, vm, "stress-ng", "fio", "iperf3")
			if got := fileSHA256(t, vm.DataDisks[0]); got != data[vm.Name] {
				t.Errorf("%s: the data disk changed during a read-only fio burn-in", vm.Name)
			}
			requireRootLacks(t, vm, l.State.Artifacts, "/etc/ingot", "firstboot.env", "burn-in.json")
		}
		evs, _ := l.Events(ctx, l.State.VMs[1].Name)
		evs0, _ := l.Events(ctx, l.State.VMs[0].Name)
		if !hasEvent(append(evs, evs0...), "burnin.peer") {
			t.Error("no burnin.peer event: the iperf3 pair was not made by ingot")
		}
	})

	t.Run("cloud-init seed reaches the disk", func(t *testing.T) {
		const userData = "#cloud-config\nruncmd: [touch /run/ingot-lab-cloud-init]\n"
		if err := l.RewriteRecipe(func(r map[string]any) {
			r["os"].(map[string]any)["first_boot"] = map[string]any{"cloud_init": userData}
			// A lone VM cannot be paired for iperf3: this job is about the seed.
			acc := r["acceptance"].(map[string]any)
			acc["checks"] = []any{map[string]any{"name": "memory-size", "min": "512MiB"}}
		}); err != nil {
			t.Fatal(err)
		}
		vm := l.State.VMs[0]
		j := requireFailed(t, ctx, l, vm, "cloud_init did not complete")
		if got := rootFile(t, vm, l.State.Artifacts, "/var/lib/cloud/seed/nocloud/user-data"); got != userData {
			t.Errorf("%s: the installed disk's NoCloud user-data is %q, want the recipe's %q", vm.Name, got, userData)
		}
		if got := rootFile(t, vm, l.State.Artifacts, "/var/lib/cloud/seed/nocloud/meta-data"); !strings.Contains(got, "local-hostname: lab-01") {
			t.Errorf("%s: the NoCloud meta-data %q lacks the recipe's hostname lab-01", vm.Name, got)
		}
		t.Logf("failed as expected: %s", j.Reason)
	})
}

// requireMeasured: the machine's latest inventory is the verified one and
// holds a passing measurement with a number for each burn-in check.
func requireMeasured(t *testing.T, ctx context.Context, l *lab.Lab, vm lab.VM, checks ...string) {
	t.Helper()
	m, err := l.Machine(ctx, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := l.Client().Inventory(ctx, m.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Inventory.Source != "verified" {
		t.Fatalf("%s: latest inventory is %q, want the verified one", vm.Name, snap.Inventory.Source)
	}
	for _, c := range checks {
		found := false
		for _, ms := range snap.Inventory.Measurements {
			if ms.Check != c {
				continue
			}
			found = true
			if !ms.OK || ms.Value <= 0 {
				t.Errorf("%s: %s measured ok=%v value=%g: %s", vm.Name, c, ms.OK, ms.Value, ms.Detail)
			}
			t.Logf("%s: %s = %g (%s)", vm.Name, c, ms.Value, ms.Detail)
		}
		if !found {
			t.Errorf("%s: no %s measurement in the verified inventory: %+v", vm.Name, c, snap.Inventory.Measurements)
		}
	}
}

// rootFile returns a file of the VM's installed root partition (debugfs).
func rootFile(t *testing.T, vm lab.VM, p lab.Pins, path string) string {
	t.Helper()
	out, err := exec.Command("debugfs", "-R", "cat "+path, rootImage(t, vm, p)).Output()
	if err != nil {
		t.Fatalf("debugfs cat %s on %s's root partition: %v", path, vm.Name, err)
	}
	return string(out)
}

// requireRootLacks: none of names is left in dir of the installed root.
func requireRootLacks(t *testing.T, vm lab.VM, p lab.Pins, dir string, names ...string) {
	t.Helper()
	out, _ := exec.Command("debugfs", "-R", "ls -l "+dir, rootImage(t, vm, p)).CombinedOutput()
	for _, n := range names {
		if strings.Contains(string(out), n) {
			t.Errorf("%s: %s/%s is still on the root partition after the first boot:\n%s", vm.Name, dir, n, out)
		}
	}
}

// rootImage copies the VM disk's root partition (where the image has it)
// into a file debugfs can read.
func rootImage(t *testing.T, vm lab.VM, p lab.Pins) string {
	t.Helper()
	img, err := os.ReadFile(p.ImageRaw)
	if err != nil {
		t.Fatal(err)
	}
	start, end := rootPartition(t, img)
	f, err := os.Open(vm.Disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	part := make([]byte, end-start)
	if _, err := f.ReadAt(part, start); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "root.ext4")
	if err := os.WriteFile(out, part, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func fileSHA256(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// linesWith returns the lines of b that contain sub.
func linesWith(b []byte, sub string) string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\r"))
		}
	}
	return strings.Join(out, "\n")
}
