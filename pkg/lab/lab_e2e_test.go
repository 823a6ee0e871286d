//go:build e2e

package lab_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
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
			requireBootPortAndNeighbour(t, ctx, l, vm)
			if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: reported through ingot-agent"); err != nil {
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
		kexecs := func(vm lab.VM) int {
			b, _ := os.ReadFile(vm.Console)
			return strings.Count(string(b), "kexec_core: Starting new kernel")
		}
		before := map[string]int{}
		for _, vm := range l.State.VMs {
			before[vm.Name] = kexecs(vm)
		}
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		took := map[string]time.Duration{}
		for _, r := range res {
			requireReady(t, ctx, l, r)
			t.Logf("%s (kexec): %s", r.Machine, r.Restore())
			took[r.Machine] = r.Status.Restore()
		}
		// The recipe's hand-off is kexec: each VM jumped into the installed
		// kernel (no reboot, no POST; the engine power-cycled nothing).
		for _, vm := range l.State.VMs {
			if kexecs(vm) != before[vm.Name]+1 {
				t.Errorf("%s: the console shows %d new kexecs, want 1", vm.Name, kexecs(vm)-before[vm.Name])
			}
		}
		// (The reboot hand-off is TestE2ELabProxy's reimage.)
		vm := l.State.VMs[0]
		// Warm: the installed OS takes the server's signed request and
		// kexecs into the agent; the BMC powers nothing.
		res, err = l.ReimageWarm(ctx, vm.Name)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, ctx, l, res[0])
		if res[0].Status.Warm != "kexec" {
			t.Errorf("%s: warm reimage %q, want kexec (no BMC fallback)", vm.Name, res[0].Status.Warm)
		}
		if kexecs(vm) != before[vm.Name]+3 {
			t.Errorf("%s: %d kexecs since the reimages began, want 3 (the hand-off, then warm: into the agent and into the new OS)", vm.Name, kexecs(vm)-before[vm.Name])
		}
		t.Logf("%s (warm): %s", vm.Name, res[0].Restore())
		t.Logf("time to restore %s: kexec %s, warm %s", vm.Name, took[vm.Name].Round(time.Second), res[0].Status.Restore().Round(time.Second))
	})

	t.Run("forged agent refused", func(t *testing.T) {
		requireForgeryRefused(t, ctx, l, bios)
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
			if st := j.Reimage; j.Step == wire.StepImage && st != nil && st.Bytes > 0 {
				t.Logf("killing ingot serve at %d of %d image bytes", st.Bytes, st.Total)
				break
			}
			if j.State != wire.JobRunning || time.Now().After(deadline) {
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
		j := requireFailed(t, ctx, l, uefi, "sha256")
		evs, _ := l.Events(ctx, uefi.Name)
		for _, ev := range evs[len(evs)-3:] {
			if ev.To == machine.StateReady {
				t.Fatalf("machine reached ready after a sha256 mismatch: %+v", ev)
			}
		}
		t.Logf("failed as expected: %s", j.Reason)
		// Its evidence bundle holds the console lines of the failure and
		// what the BMC logged since the job started.
		var buf bytes.Buffer
		if _, err := l.Client().Evidence(ctx, j.ID, &buf); err != nil {
			t.Fatal(err)
		}
		files := untarGz(t, buf.Bytes())
		con, sel := files[j.ID+"/console.log"], files[j.ID+"/sel.txt"]
		if !strings.Contains(con, "ingot-agent: ") || !strings.Contains(con, "sha256") {
			t.Errorf("the bundle's console.log lacks the agent's failure (%d bytes):\n%s", len(con), tail([]byte(con), 1500))
		}
		if !strings.Contains(sel, "Boot source override set: Pxe") || !strings.Contains(sel, "powered on") {
			t.Errorf("the bundle's sel.txt lacks the job's network boot and power-on:\n%s", sel)
		}
	})
}

// untarGz reads a .tar.gz into name -> contents.
func untarGz(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = string(data)
	}
}

// requireFailed reimages vm and requires its job and the machine to end
// failed with a reason that says why.
func requireFailed(t *testing.T, ctx context.Context, l *lab.Lab, vm lab.VM, why string) wire.Job {
	t.Helper()
	res, err := l.Reimage(ctx, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	j := res[0].Job
	if j.State != wire.JobFailed || !strings.Contains(j.Reason, why) {
		t.Fatalf("job %s/%s (%s): want failed saying %q", j.Step, j.State, j.Reason, why)
	}
	m, err := l.Machine(ctx, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if m.State != machine.StateFailed {
		t.Fatalf("%s is %s, want failed", vm.Name, m.State)
	}
	return j
}

func requireReady(t *testing.T, ctx context.Context, l *lab.Lab, r lab.Result) {
	t.Helper()
	if r.Job.State != wire.JobSucceeded {
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

// requireBootPortAndNeighbour: the agent's inventory marks the NIC it
// booted over and records the switch port the lab bridge announces (lldpd).
func requireBootPortAndNeighbour(t *testing.T, ctx context.Context, l *lab.Lab, vm lab.VM) {
	t.Helper()
	m, err := l.Machine(ctx, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := l.Client().Inventory(ctx, m.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range snap.Inventory.NICs {
		if n.MAC != vm.MAC {
			continue
		}
		if !n.Boot {
			t.Errorf("%s: NIC %s is not marked as the boot port: %+v", vm.Name, n.Name, n)
		}
		if netnstest.HavePrograms(t, "lldpd") && (n.LLDP == nil || n.LLDP.SystemName != lab.LLDPName) {
			t.Errorf("%s: NIC %s heard no LLDP from the lab bridge (want system %q): %+v", vm.Name, n.Name, lab.LLDPName, n.LLDP)
		}
		return
	}
	t.Errorf("%s: the %s inventory has no NIC with MAC %s: %+v", vm.Name, snap.Inventory.Source, vm.MAC, snap.Inventory.NICs)
}

// requireForgeryRefused: a second host on the boot network (another address
// in the lab namespace) fetches the provisioning VM's iPXE script and
// replays the agent API with the boot credential it sniffed from the VM's
// boot (its kernel command line). Every call is refused, each refusal is a
// security event, and the VM still reaches ready.
func requireForgeryRefused(t *testing.T, ctx context.Context, l *lab.Lab, vm lab.VM) {
	t.Helper()
	const intruder = "10.77.0.200"
	inNS := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.State.Namespace}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := inNS("ip", "addr", "add", intruder+"/24", "dev", lab.Bridge); err != nil {
		t.Fatalf("adding the intruder's address: %v: %s", err, out)
	}
	defer inNS("ip", "addr", "del", intruder+"/24", "dev", lab.Bridge)
	before, _ := os.Stat(vm.Console)
	jobs, err := l.Start(ctx, vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	tokRE := regexp.MustCompile(`ingot\.token=(\S+)`)
	var boot string
	for boot == "" {
		b, _ := os.ReadFile(vm.Console)
		if m := tokRE.FindAllSubmatch(b[before.Size():], -1); len(m) > 0 {
			boot = string(m[len(m)-1][1])
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the VM's console never showed its kernel command line")
		case <-time.After(300 * time.Millisecond):
		}
	}
	// The agent is told where the TLS API is and which certificate to pin.
	if b, _ := os.ReadFile(vm.Console); !regexp.MustCompile(`ingot\.api=https://\S+ ingot\.ca=sha256:[0-9a-f]{64}`).Match(b[before.Size():]) {
		t.Errorf("the agent's kernel command line lacks ingot.api=https://... ingot.ca=sha256:...")
	}
	curl := func(method, path, token, body string) string {
		args := []string{"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--interface", intruder, "-X", method}
		if token != "" {
			args = append(args, "-H", "Authorization: Bearer "+token)
		}
		if body != "" {
			args = append(args, "-H", "Content-Type: application/json", "--data", body)
		}
		out, _ := inNS(append(args, "--cacert", l.State.CA, l.State.APIURL+path)...)
		return out
	}
	script, _ := inNS("curl", "-s", "--interface", intruder, l.State.ServerURL+"/ipxe?mac="+vm.MAC+"&arch=bios")
	if strings.Contains(script, "ingot.token=") {
		t.Errorf("the intruder got a credential in its iPXE script:\n%s", script)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/agent/exchange", "{}"},
		{"GET", "/api/v1/agent/task", ""},
		{"POST", "/api/v1/agent/inventory", `{"source":"agent"}`},
		{"POST", "/api/v1/agent/checks", `[{"name":"memory-size","ok":true}]`},
		{"POST", "/api/v1/agent/done", `{"step":"checks","ok":true}`},
		{"POST", "/api/v1/agent/firstboot", `{"kernel":"6.1"}`},
	} {
		if code := curl(c.method, c.path, boot, c.body); code != "401" && code != "403" {
			t.Errorf("%s %s from %s with the VM's boot credential: HTTP %s, want 401 or 403", c.method, c.path, intruder, code)
		}
		// The plain-HTTP boot listener has no API at all.
		if out, _ := inNS("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", c.method, l.State.ServerURL+c.path); out != "404" && out != "405" {
			t.Errorf("%s %s on the boot listener: HTTP %s, want 404", c.method, c.path, out)
		}
	}
	res, err := l.Follow(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	requireReady(t, ctx, l, res[0])
	evs, _ := l.Events(ctx, vm.Name)
	if !hasEvent(evs, "security") {
		t.Errorf("%s: no security event for the replayed credential", vm.Name)
	}
}

// requireDiskHoldsImage checks the VM's disk holds the image: byte for byte
// outside the root partition (the agent writes the first-boot settings into
// it, and the first boot deletes them), and a root filesystem from which the
// first-boot secret is gone after use.
func requireDiskHoldsImage(t *testing.T, vm lab.VM, p lab.Pins) {
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
	disk := make([]byte, p.RawSize)
	if _, err := io.ReadFull(f, disk); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, start}, {end, p.RawSize}} {
		if !bytes.Equal(disk[r[0]:r[1]], img[r[0]:r[1]]) {
			t.Fatalf("%s: disk bytes %d-%d differ from the image's (outside the root partition %d-%d)", vm.Name, r[0], r[1], start, end)
		}
	}
	if !netnstest.HavePrograms(t, "debugfs") {
		return
	}
	requireRootLacks(t, vm, p, "/etc/ingot", "firstboot.env")
}

// rootPartition returns the byte range of the image's last GPT partition
// (the lab image's root; the ESP comes first).
func rootPartition(t *testing.T, img []byte) (int64, int64) {
	t.Helper()
	le := func(b []byte) int64 {
		var v int64
		for i := 7; i >= 0; i-- {
			v = v<<8 | int64(b[i])
		}
		return v
	}
	if len(img) < 2*512 || string(img[512:520]) != "EFI PART" {
		t.Fatal("the lab image has no GPT header at LBA 1")
	}
	entries, n, size := le(img[512+72:]), int64(uint32(le(img[512+80:]))), int64(uint32(le(img[512+84:])))
	var start, end int64
	for i := int64(0); i < n; i++ {
		e := img[entries*512+i*size:]
		if first, last := le(e[32:]), le(e[40:]); first != 0 {
			start, end = first*512, (last+1)*512
		}
	}
	if end == 0 || end > int64(len(img)) {
		t.Fatalf("no root partition in the lab image's GPT (last %d)", end)
	}
	return start, end
}

func tail(b []byte, n int) string {
	b = bytes.ToValidUTF8(b, nil)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// upLab brings a lab up for a test: cfg gets a temporary Dir, the test's
// binaries, the repository and the test's log; when the test fails, the
// server's, BMCs' and site DHCP's logs and each VM's console are logged
// (their tails), and the lab is taken down at the end either way.
func upLab(t *testing.T, ctx context.Context, cfg lab.Config) *lab.Lab {
	t.Helper()
	cfg.RepoRoot = repoRoot(t)
	cfg.Binary, cfg.AgentBinary = binaries(t, cfg.RepoRoot)
	cfg.Dir, cfg.Out = t.TempDir(), logWriter{t}
	if cfg.DiskBytes == 0 {
		cfg.DiskBytes = 1 << 30
	}
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"serve.log", "bmc.log", "site-dhcp.log"} {
				if b, err := os.ReadFile(filepath.Join(l.State.Dir, f)); err == nil {
					t.Logf("--- %s (tail)\n%s", f, tail(b, 6000))
				}
			}
			for _, vm := range l.State.VMs {
				b, _ := os.ReadFile(vm.Console)
				t.Logf("--- console of %s (tail)\n%s", vm.Name, tail(b, 6000))
			}
		}
		l.Down()
	})
	return l
}
