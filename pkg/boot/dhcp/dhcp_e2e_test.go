//go:build e2e

package dhcp_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/boot/ra"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/store"
)

// e2eLab is a namespace with bridge br0 10.77.0.1/24 and tap0 for a VM, and
// ingot's DHCP (full mode, discovery on), the RA responder and a script
// server on :8080 serving a script that prints a marker.
type e2eLab struct {
	ns   *netns.NS
	st   *store.Bolt
	hits chan string
}

func newE2ELab(t *testing.T) *e2eLab {
	t.Helper()
	netnstest.Need(t, "qemu-system-x86_64")
	ctx := context.Background()
	ns := netnstest.New(t, "ingot-dhcp-e2e")
	if err := ns.AddBridge(ctx, "br0", "10.77.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddTap(ctx, "tap0", "br0"); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "ingot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pool, _ := dhcp.ParsePool("10.77.0.0/24,10.77.0.100-10.77.0.199,router=10.77.0.1")
	var srv *dhcp.Server
	var resp *ra.Responder
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		if srv, err = dhcp.NewServer(dhcp.Config{Interface: "br0", Mode: dhcp.ModeFull, Pools: []dhcp.Pool{pool},
			HTTPBase: "http://10.77.0.1:8080", Store: st, Unknown: dhcp.UnknownDiscover}); err != nil {
			return err
		}
		if err = srv.Listen(); err != nil {
			return err
		}
		if resp, err = ra.New(ra.Config{Interface: "br0"}); err != nil {
			return err
		}
		if err = resp.Listen(); err != nil {
			return err
		}
		ln, err = net.Listen("tcp", "10.77.0.1:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go srv.Serve(sctx)
	go resp.Serve(sctx)
	l := &e2eLab{ns: ns, st: st, hits: make(chan string, 8)}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.hits <- r.URL.String()
		fmt.Fprintf(w, "#!ipxe\necho INGOT-SCRIPT-OK mac=${net0/mac} ip=${net0/ip}\nshell\n")
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return l
}

// boot runs QEMU with args until the script's marker for mac is on the
// console, and returns the console.
func (l *e2eLab) boot(t *testing.T, mac string, args ...string) string {
	t.Helper()
	qctx, qcancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer qcancel()
	console := filepath.Join(t.TempDir(), "console.log")
	q := l.ns.Command(qctx, "qemu-system-x86_64", append([]string{"-accel", "tcg", "-smp", "1",
		"-nographic", "-monitor", "none", "-serial", "file:" + console, "-no-reboot",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no"}, args...)...)
	start := time.Now()
	if err := l.ns.Start(q); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- q.Wait() }()
	// The script's marker ends the test; this iPXE build has no poweroff,
	// so QEMU is stopped here (the firmware would wait forever afterwards).
	marker := "INGOT-SCRIPT-OK mac=" + mac + " ip=10.77.0.1"
	var out []byte
	for found := false; !found; {
		select {
		case err := <-exited:
			out, _ = os.ReadFile(console)
			t.Fatalf("QEMU exited (%v) before the script ran; console:\n%s", err, out)
		case <-qctx.Done():
			out, _ = os.ReadFile(console)
			t.Fatalf("no %q on the console within 180 s; console:\n%s", marker, out)
		case <-time.After(200 * time.Millisecond):
			out, _ = os.ReadFile(console)
			found = strings.Contains(string(out), marker)
		}
	}
	q.Process.Kill()
	<-exited
	t.Logf("script ran %s after QEMU started; console:\n%s", time.Since(start).Round(100*time.Millisecond), out)
	return string(out)
}

func (l *e2eLab) check(t *testing.T, mac, arch string) {
	t.Helper()
	select {
	case u := <-l.hits:
		got, err := url.Parse(u)
		if err != nil || got.Path != "/ipxe" || got.Query().Get("mac") != mac || got.Query().Get("arch") != arch {
			t.Errorf("iPXE fetched %q, want /ipxe?mac=%s&arch=%s", u, mac, arch)
		}
	default:
		t.Error("no HTTP request reached the script server")
	}
	ctx := context.Background()
	if le, err := l.st.LeaseByMAC(ctx, mac); err != nil || le.State != dhcp.StateBound {
		t.Errorf("lease of %s: %+v, %v", mac, le, err)
	}
	if m, err := l.st.MachineByMAC(ctx, mac); err != nil || m.State != machine.StateDiscovered || m.Arch != arch {
		t.Errorf("discovered machine: %+v, %v", m, err)
	}
}

// A real iPXE (QEMU's virtio-net option ROM under SeaBIOS) gets its address
// and the script URL from ingot in full mode, fetches the script over HTTP
// (no chainload loop) and runs it. The router advertisement answers its
// IPv6 autoconfiguration.
func TestE2EIPXEBootsScript(t *testing.T) {
	l := newE2ELab(t)
	const mac = "52:54:00:77:00:10"
	out := l.boot(t, mac, "-m", "256", "-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1")
	if strings.Count(out, "Filename:") != 1 {
		t.Errorf("iPXE was given a boot file more than once (a chainload loop?)")
	}
	// The RA answered iPXE's solicitation: it configured an address in the ULA prefix.
	if !strings.Contains(out, "net0: fd00:696e:676f:7400:") {
		t.Errorf("iPXE shows no address from the advertised prefix %s", ra.DefaultPrefix)
	}
	l.check(t, mac, "bios")
}

// UEFI firmware PXE (OVMF, no iPXE ROM: arch 7, no user class) gets the
// TFTP first stage snponly.efi from ingot's offer; that iPXE asks again,
// with user class iPXE, and gets the script URL.
func TestE2EUEFIFirmwareChainsToIPXE(t *testing.T) {
	netnstest.Need(t, "in.tftpd")
	for _, f := range []string{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd", "/usr/lib/ipxe/snponly.efi"} {
		if _, err := os.Stat(f); err != nil {
			netnstest.Need(t, f) // skips (fails in CI) naming the missing file
		}
	}
	l := newE2ELab(t)
	dir := t.TempDir()
	efi, _ := os.ReadFile("/usr/lib/ipxe/snponly.efi")
	vars, _ := os.ReadFile("/usr/share/OVMF/OVMF_VARS_4M.fd")
	if err := os.WriteFile(filepath.Join(dir, "snponly.efi"), efi, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vars.fd"), vars, 0o644); err != nil {
		t.Fatal(err)
	}
	// tftpd-hpa stands in for ingot's TFTP server (another package).
	tftpd := l.ns.Command(context.Background(), "in.tftpd", "-L", "-s", "-a", "10.77.0.1:69", dir)
	if err := l.ns.Start(tftpd); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:77:00:11"
	out := l.boot(t, mac, "-m", "512",
		"-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
		"-drive", "if=pflash,format=raw,file="+filepath.Join(dir, "vars.fd"),
		"-device", "virtio-net-pci,romfile=,netdev=n0,mac="+mac+",bootindex=1")
	if !strings.Contains(out, "Filename: http://10.77.0.1:8080/ipxe?mac="+mac+"&arch=uefi-x64") {
		t.Errorf("iPXE (snponly.efi) did not get the script URL")
	}
	l.check(t, mac, "uefi-x64")
}
