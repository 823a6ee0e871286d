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

// TestE2EIPXEFollowsScript boots a QEMU VM (SeaBIOS + the virtio-net iPXE
// ROM) against `ingot serve` in a namespace: DHCP from ingot, the discovery
// script from /ipxe, then the kernel and initrd from /artifacts. The
// "kernel" is Debian's ipxe.lkrn (a bzImage), so no agent is needed: the
// test proves real iPXE accepts the rendered script (kernel line with
// initrd=, initrd --name, boot) and fetches both artifacts by hash.
func TestE2EIPXEFollowsScript(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "curl")
	if _, err := os.Stat("/usr/lib/ipxe/ipxe.lkrn"); err != nil {
		t.Skip("needs /usr/lib/ipxe/ipxe.lkrn (Debian package ipxe)")
	}
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
	kernel, err := arts.PutFile(ctx, "/usr/lib/ipxe/ipxe.lkrn")
	if err != nil {
		t.Fatal(err)
	}
	initrd, _ := arts.Put(ctx, strings.NewReader("not really an initrd\n"))
	arts.SetName("agent-vmlinuz", kernel.SHA256)
	arts.SetName("agent-initrd", initrd.SHA256)

	var stderr syncBuf
	srv := ns.Command(context.Background(), bin, "serve", "--interface", "br0", "--data", data,
		"--pool", "10.80.0.0/24,10.80.0.100-10.80.0.200", "--http-addr", "10.80.0.1:8080", "--log-level", "debug")
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
	vm := ns.Command(ctx, "qemu-system-x86_64", "-accel", "tcg", "-smp", "1", "-m", "256", "-nographic",
		"-serial", "file:"+console, "-monitor", "none", "-no-reboot",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=52:54:00:80:00:10,bootindex=1")
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
	for {
		m, _ := ns.Run(ctx, "curl", "-s", "http://10.80.0.1:8080/metrics")
		if strings.Contains(string(m), want) {
			break
		}
		if ctx.Err() != nil || time.Since(start) > 3*time.Minute {
			t.Fatalf("the VM did not fetch kernel and initrd within 3 minutes; metrics:\n%s", grepLines(string(m), "ingot_http_requests_total", "ingot_ipxe_scripts_total"))
		}
		time.Sleep(time.Second)
	}
	t.Logf("kernel and initrd fetched %v after VM start", time.Since(start).Round(time.Second))
	logs := stderr.String()
	for _, want := range []string{"action=discovery", "mac=52:54:00:80:00:10"} {
		if !strings.Contains(logs, want) {
			t.Errorf("server log lacks %q", want)
		}
	}
	// ipxe.lkrn now runs as the "kernel": a second iPXE banner on the console.
	deadline := time.Now().Add(60 * time.Second)
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

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.HasPrefix(l, sub) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
