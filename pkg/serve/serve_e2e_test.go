//go:build e2e

package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestE2EIPXEFollowsScript boots QEMU VMs against `ingot serve` in a
// namespace and checks that real firmware and real iPXE follow what ingot
// serves, up to fetching the "agent" kernel and initrd by hash:
//
//   - bios: SeaBIOS + the virtio-net iPXE ROM: DHCP -> /ipxe -> artifacts.
//   - uefi: OVMF's own PXE (romfile= empty, so no iPXE ROM): DHCP -> TFTP
//     snponly.efi (EDK2's tsize probe and abort included) -> iPXE -> DHCP ->
//     /ipxe -> artifacts.
//
// The "kernel" is an iPXE image (ipxe.lkrn, a bzImage, for BIOS; ipxe.efi
// for UEFI), so no agent is needed, and its start shows as a second iPXE
// banner on the console.
func TestE2EIPXEFollowsScript(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "curl")
	tests := map[string]struct {
		kernel string
		qemu   []string
		tftp   bool
	}{
		"bios": {kernel: "/usr/lib/ipxe/ipxe.lkrn", qemu: []string{
			"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:80:00:10,bootindex=1"}},
		"uefi": {kernel: "/usr/lib/ipxe/ipxe.efi", tftp: true, qemu: []string{
			"-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
			"-device", "virtio-net-pci,romfile=,netdev=n0,mac=52:54:00:80:00:10,bootindex=1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			netnstest.NeedFiles(t, "Debian packages ipxe, ovmf", tc.kernel, "/usr/share/OVMF/OVMF_VARS_4M.fd")
			qemu := tc.qemu
			if name == "uefi" {
				vars := filepath.Join(t.TempDir(), "vars.fd")
				b, _ := os.ReadFile("/usr/share/OVMF/OVMF_VARS_4M.fd")
				os.WriteFile(vars, b, 0o644)
				qemu = append(qemu, "-drive", "if=pflash,format=raw,file="+vars)
			}
			bootVM(t, tc.kernel, qemu, tc.tftp)
		})
	}
}

func bootVM(t *testing.T, kernelFile string, qemuArgs []string, wantTFTP bool) {
	bin := ingotBin(t)
	ns := netnstest.New(t, "svE2E")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := ns.AddBridge(ctx, "br0", "10.80.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddTap(ctx, "tap0", "br0"); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	arts, _ := artifact.Open(filepath.Join(data, "artifacts"))
	kernel, err := arts.PutFile(ctx, kernelFile)
	if err != nil {
		t.Fatal(err)
	}
	initrd, _ := arts.Put(ctx, strings.NewReader("not really an initrd\n"))
	arts.SetName("agent-vmlinuz", kernel.SHA256)
	arts.SetName("agent-initrd", initrd.SHA256)

	var stderr syncBuf
	srv := ns.Command(context.Background(), bin, "serve", "--interface", "br0", "--data", data,
		"--pool", "10.80.0.0/24,10.80.0.100-10.80.0.200", "--http-addr", "10.80.0.1:8080", "--api-addr", "10.80.0.1:8443", "--log-level", "debug")
	srv.Stderr = &stderr
	if err := ns.Start(srv); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("ingot serve stderr:\n%s", stderr.String())
		}
	}()
	console := filepath.Join(t.TempDir(), "console.log")
	vm := ns.Command(ctx, "qemu-system-x86_64", append([]string{"-accel", "tcg", "-smp", "1", "-m", "256", "-nographic",
		"-serial", "file:" + console, "-monitor", "none", "-no-reboot",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no"}, qemuArgs...)...)
	if err := ns.Start(vm); err != nil {
		t.Fatal(err)
	}
	defer func() {
		vm.Process.Kill()
		vm.Wait()
		if b, _ := os.ReadFile(console); t.Failed() {
			t.Logf("VM console:\n%s", b)
		}
	}()
	want := `ingot_http_requests_total{code="200",route="artifact"} 2`
	start := time.Now()
	var m []byte
	for !strings.Contains(string(m), want) {
		if ctx.Err() != nil || time.Since(start) > 3*time.Minute {
			t.Fatalf("the VM did not fetch kernel and initrd within 3 minutes; metrics:\n%s",
				grepLines(string(m), "ingot_http_requests_total", "ingot_ipxe_scripts_total", "ingot_tftp_transfers_total"))
		}
		time.Sleep(time.Second)
		m, _ = ns.Run(ctx, "curl", "-s", "--cacert", data+"/tls/ca.pem", "https://10.80.0.1:8443/metrics")
	}
	t.Logf("kernel and initrd fetched %v after VM start", time.Since(start).Round(time.Second))
	t.Logf("%s", grepLines(string(m), "ingot_tftp_transfers_total", "ingot_ipxe_scripts_total"))
	if wantTFTP && !strings.Contains(string(m), `ingot_tftp_transfers_total{result="ok"} 1`) {
		t.Errorf("no successful TFTP transfer of the first stage:\n%s", grepLines(string(m), "ingot_tftp"))
	}
	logs := stderr.String()
	for _, want := range []string{"action=discovery", "mac=52:54:00:80:00:10"} {
		if !strings.Contains(logs, want) {
			t.Errorf("server log lacks %q", want)
		}
	}
	// The fetched "kernel" (an iPXE image) starts: a second iPXE banner.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(console)
		if strings.Count(string(b), "iPXE initialising devices") >= 2 {
			return
		}
		time.Sleep(time.Second)
	}
	b, _ := os.ReadFile(console)
	t.Errorf("the fetched kernel did not start (want a second iPXE banner); console:\n%s", b)
}

func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
