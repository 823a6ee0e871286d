//go:build e2e

package lab_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/store"
)

// repoRoot is the module root (recipes/, images/).
func repoRoot(t *testing.T) string {
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// binaries returns the ingot and ingot-agent binaries: $INGOT_BIN and
// $INGOT_AGENT_BIN (make test-e2e sets them), else built into the test's dir.
func binaries(t *testing.T, root string) (string, string) {
	bin, agent := os.Getenv("INGOT_BIN"), os.Getenv("INGOT_AGENT_BIN")
	if bin != "" && agent != "" {
		return bin, agent
	}
	dir := t.TempDir()
	for _, b := range []string{"ingot", "ingot-agent"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "./cmd/"+b)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b, err, out)
		}
	}
	return filepath.Join(dir, "ingot"), filepath.Join(dir, "ingot-agent")
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The whole path on real firmware, for a SeaBIOS VM (iPXE NIC ROM) and a
// UEFI VM booting through OVMF's own PXE (no NIC ROM: firmware PXE -> TFTP
// snponly.efi -> iPXE -> HTTP): BMC power-on with a network boot override,
// DHCP, iPXE, agent, inventory, image, acceptance checks, reboot into the
// installed image, first-boot report, ready. Then both are reimaged, ingot
// is SIGKILLed while a VM writes its image and the job still completes, and
// a recipe whose image sha256 does not match ends failed.
func TestE2ELab(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox")
	root := repoRoot(t)
	bin, agent := binaries(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Config{
		Dir: t.TempDir(), Prefix: "ingot-e2e", Binary: bin, AgentBinary: agent, RepoRoot: root,
		VMs:       []lab.VMSpec{{Firmware: "bios"}, {Firmware: "uefi", FirmwarePXE: true}},
		DiskBytes: 1 << 30, Out: logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"serve.log", "bmc.log"} {
				b, _ := os.ReadFile(filepath.Join(l.State.Dir, f))
				t.Logf("--- %s (tail)\n%s", f, tail(b, 4000))
			}
			for _, vm := range l.State.VMs {
				b, _ := os.ReadFile(vm.Console)
				t.Logf("--- console of %s (tail)\n%s", vm.Name, tail(b, 3000))
			}
		}
		l.Down()
	})
	bios, uefi := l.State.VMs[0], l.State.VMs[1]

	t.Run("provision", func(t *testing.T) {
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			requireReady(t, ctx, l, r)
		}
		for _, vm := range l.State.VMs {
			requireDiskHoldsImage(t, vm, l.State.Artifacts)
			if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: reported to"); err != nil {
				t.Error(err)
			}
		}
		// The UEFI VM really went through firmware PXE and TFTP.
		b, _ := os.ReadFile(filepath.Join(l.State.Dir, "serve.log"))
		if !strings.Contains(string(b), "snponly.efi") {
			t.Errorf("serve.log shows no TFTP transfer of snponly.efi for the UEFI VM (firmware PXE path)")
		}
	})

	t.Run("reimage", func(t *testing.T) {
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			requireReady(t, ctx, l, r)
			t.Logf("%s: %s", r.Machine, r.Restore())
		}
	})

	t.Run("SIGKILL during image write", func(t *testing.T) {
		jobs, err := l.Start(ctx, bios.Name)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			j, err := l.Job(ctx, jobs[bios.Name])
			if err != nil {
				t.Fatal(err)
			}
			st, _ := engine.Status(j)
			if j.Step == engine.StepImage && st.Bytes > 0 {
				t.Logf("killing ingot serve at %d of %d image bytes", st.Bytes, st.Total)
				break
			}
			if j.State != store.JobRunning || time.Now().After(deadline) {
				t.Fatalf("job reached %s/%s before the image write could be interrupted", j.Step, j.State)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := l.KillServe(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := l.StartServe(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := l.Follow(ctx, jobs)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, ctx, l, res[0])
		requireDiskHoldsImage(t, bios, l.State.Artifacts)
		evs, _ := l.Events(ctx, bios.Name)
		if !hasEvent(evs, "job.resumed") {
			t.Error("no job.resumed event after the restart")
		}
	})

	t.Run("image sha256 mismatch", func(t *testing.T) {
		// Serve the real image under a recipe that pins another digest: the
		// agent streams it, the digest differs, and the job must fail.
		wrong := strings.Repeat("e", 64)
		url := l.State.ServerURL + "/artifacts/sha256/" + l.State.Artifacts.ImageSHA256
		if err := l.RewriteRecipe(func(r map[string]any) {
			img := r["os"].(map[string]any)["image"].(map[string]any)
			img["sha256"], img["url"] = wrong, url
		}); err != nil {
			t.Fatal(err)
		}
		res, err := l.Reimage(ctx, uefi.Name)
		if err != nil {
			t.Fatal(err)
		}
		j := res[0].Job
		if j.State != store.JobFailed || !strings.Contains(j.Reason, "sha256") {
			t.Fatalf("job %s/%s (%s), want failed with a sha256 mismatch", j.Step, j.State, j.Reason)
		}
		m, err := l.Machine(ctx, uefi.Name)
		if err != nil {
			t.Fatal(err)
		}
		if m.State != machine.StateFailed {
			t.Fatalf("%s is %s, want failed", uefi.Name, m.State)
		}
		evs, _ := l.Events(ctx, uefi.Name)
		for _, ev := range evs[len(evs)-3:] {
			if ev.To == machine.StateReady {
				t.Fatalf("machine reached ready after a sha256 mismatch: %+v", ev)
			}
		}
		t.Logf("failed as expected: %s", j.Reason)
	})
}

func requireReady(t *testing.T, ctx context.Context, l *lab.Lab, r lab.Result) {
	t.Helper()
	if r.Job.State != store.JobSucceeded {
		t.Fatalf("%s: job %s ended %s at %s", r.Machine, r.Job.ID, r.Job.State, r.Job.Reason)
	}
	m, err := l.Machine(ctx, r.Machine)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != machine.StateReady {
		t.Fatalf("%s is %s after a succeeded job", r.Machine, m.State)
	}
	evs, err := l.Events(ctx, r.Machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"bmc.boot", "agent.started", "inventory", "checks", "bmc.handoff", "firstboot"} {
		if !hasEvent(evs, kind) {
			t.Errorf("%s: no %s event", r.Machine, kind)
		}
	}
}

func hasEvent(evs []machine.Event, kind string) bool {
	for _, ev := range evs {
		if ev.Kind == kind {
			return true
		}
	}
	return false
}

// requireDiskHoldsImage checks from the host that the VM's disk starts with
// the pinned raw image, byte for byte.
func requireDiskHoldsImage(t *testing.T, vm lab.VM, p lab.Pins) {
	t.Helper()
	f, err := os.Open(vm.Disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, p.RawSize); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.RawSHA256 {
		t.Fatalf("%s: disk's first %d bytes hash to %s, want the image's %s", vm.Name, p.RawSize, got, p.RawSHA256)
	}
}

func tail(b []byte, n int) string {
	b = bytes.ToValidUTF8(b, nil)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
