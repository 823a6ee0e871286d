//go:build e2e && e2e_long

package lab_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/uki"
)

// arm64: a QEMU virt VM (cortex-a57, TCG) under AAVMF, with no NIC option
// ROM and the firmware's PXE turned off, boots through AAVMF's own UEFI
// HTTP boot. DHCP (arch 19, HTTPClient) hands it the URL of its agent UKI,
// which serve assembles on systemd's aarch64 stub because the arm64
// recipe's agent kernel is an arm64 Image; the arm64 agent asks for its
// credential by MAC, writes the arm64 lab image (ESP: BOOTAA64.EFI), and
// the reboot hand-off boots it from disk to its first-boot report. Then a
// reimage. Slow (TCG emulates every arm64 instruction): `make
// test-e2e-long`, never `make test`.
func TestE2ELabARM64(t *testing.T) {
	netnstest.Need(t, "qemu-system-aarch64")
	netnstest.NeedFiles(t, "make deps: qemu-efi-aarch64, systemd-boot-efi:arm64", "/usr/share/AAVMF/AAVMF_CODE.fd", uki.EFIStubARM64)
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	start := time.Now()
	l := upLab(t, ctx, lab.Config{Prefix: "ingot-arm", AgentBinaryARM64: arm64Agent(t, root), VMs: []lab.VMSpec{lab.ARM64()}})
	vm := l.State.VMs[0]
	if vm.Arch != lab.ArchARM64 || l.State.ArtifactsARM64 == nil {
		t.Fatalf("the lab made %+v, artifacts %v: want an arm64 VM and arm64 artifacts", vm, l.State.ArtifactsARM64)
	}
	took := map[string]time.Duration{}
	for _, step := range []string{"provision", "reimage"} {
		began := time.Now()
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, ctx, l, res[0])
		took[step] = time.Since(began)
		t.Logf("%s: %s (wall %s)", step, res[0].Restore(), took[step].Round(time.Second))
		requireDiskHoldsImage(t, vm, *l.State.ArtifactsARM64)
	}
	if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: reported through ingot-agent"); err != nil {
		t.Error(err)
	}
	con, _ := os.ReadFile(vm.Console)
	text := strings.ReplaceAll(string(con), "\r", "\n")
	for _, want := range []string{
		"Start HTTP Boot over IPv4", // AAVMF's own HTTP boot ran
		"kernel 6.1.0-", "-arm64",   // the installed arm64 image booted (init's greeting)
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the console does not show %q:\n%s", want, tail(con, 3000))
		}
	}
	if strings.Contains(text, "iPXE") {
		t.Error("the console shows iPXE: the VM did not boot through the firmware's HTTP boot alone")
	}
	// AAVMF honours OVMF's fw_cfg knobs: its PXE never ran.
	if strings.Contains(text, "Start PXE over") {
		t.Error("the console shows AAVMF's PXE: opt/org.tianocore/IPv4PXESupport=no was not honoured")
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "HTTP Boot") || strings.Contains(line, "PXE") || strings.Contains(line, "URI:") || strings.Contains(line, "ingot-lab-image:") {
			t.Logf("console: %s", strings.TrimSpace(line))
		}
	}
	// The UKI serve sent was assembled on the aarch64 stub, from the arm64
	// recipe's artifacts; nothing went over TFTP.
	b, _ := os.ReadFile(filepath.Join(l.State.Dir, "serve.log"))
	sent := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `msg="agent uki"`) && strings.Contains(line, "mac="+vm.MAC) && strings.Contains(line, "code=200") && strings.Contains(line, "method=GET") {
			sent++
			t.Logf("serve: %s", line)
			if !strings.Contains(line, "stub="+uki.EFIStubARM64) {
				t.Errorf("the UKI was not assembled on the aarch64 stub: %s", line)
			}
		}
		if strings.Contains(line, "tftp sent") {
			t.Errorf("a TFTP transfer: %s", line)
		}
	}
	if sent < 2 {
		t.Errorf("serve sent %d agent UKIs to %s, want one per job (2)", sent, vm.MAC)
	}
	t.Logf("arm64 under TCG: provision %s, reimage %s, whole test %s (lab up included)",
		took["provision"].Round(time.Second), took["reimage"].Round(time.Second), time.Since(start).Round(time.Second))
}

// arm64Agent is $INGOT_AGENT_BIN_ARM64 (make test-e2e-long sets it), else
// ingot-agent cross-built for arm64 into the test's folder.
func arm64Agent(t *testing.T, root string) string {
	if p := os.Getenv("INGOT_AGENT_BIN_ARM64"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "ingot-agent-arm64")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/ingot-agent")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ingot-agent for arm64: %v\n%s", err, b)
	}
	return out
}
