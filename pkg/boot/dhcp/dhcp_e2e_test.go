//go:build e2e

package dhcp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

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
	st   *bolt.Store
	mode string
	hits chan string
}

func newE2ELab(t *testing.T) *e2eLab { return newE2ELabMode(t, dhcp.ModeFull) }

// newE2ELabMode is newE2ELab; in proxy mode dnsmasq, in a namespace of its
// own on the bridge (10.77.0.2), is the site's DHCP server.
func newE2ELabMode(t *testing.T, mode string) *e2eLab {
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
	st, err := bolt.Open(filepath.Join(t.TempDir(), "ingot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := dhcp.Config{Interface: "br0", Mode: mode, HTTPBase: "http://10.77.0.1:8080", Store: st, Discover: discoverer(st), Unknown: dhcp.UnknownDiscover}
	if mode == dhcp.ModeFull {
		pool, _ := dhcp.ParsePool("10.77.0.0/24,10.77.0.100-10.77.0.199,router=10.77.0.1")
		cfg.Pools = []dhcp.Pool{pool}
	} else {
		startSiteDnsmasq(t, ns)
	}
	var srv *dhcp.Server
	var resp *ra.Responder
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		if srv, err = dhcp.NewServer(cfg); err != nil {
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
	if os.Getenv("INGOT_E2E_NO_RA") == "" { // set it to measure what the RA saves (the RA check then fails)
		go resp.Serve(sctx)
	}
	if f := os.Getenv("INGOT_E2E_PCAP"); f != "" { // debugging: capture DHCP on the bridge
		tcpdump := ns.Command(ctx, "tcpdump", "-i", "br0", "-U", "-w", f, "port 67 or port 68 or port 4011")
		if err := ns.Start(tcpdump); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	l := &e2eLab{ns: ns, st: st, mode: mode, hits: make(chan string, 8)}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.hits <- r.URL.String()
		fmt.Fprintf(w, "#!ipxe\necho INGOT-SCRIPT-OK mac=${net0/mac} ip=${net0/ip}\nshell\n")
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return l
}

// startSiteDnsmasq runs dnsmasq as the site's DHCP server (10.77.0.50-99)
// in a namespace of its own, joined to ns's br0.
func startSiteDnsmasq(t *testing.T, ns *netns.NS) {
	t.Helper()
	netnstest.Need(t, "dnsmasq")
	ctx := context.Background()
	site := netnstest.New(t, "ingot-dhcp-site")
	if err := netns.Veth(ctx, site, "eth0", "10.77.0.2/24", ns, "site0@br0", ""); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := site.Command(ctx, "dnsmasq", "--no-daemon", "--port=0", "--conf-file=/dev/null", "--user=root",
		"--dhcp-range=10.77.0.50,10.77.0.99,255.255.255.0,1h", "--interface=eth0", "--bind-interfaces",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"))
	if err := site.Start(cmd); err != nil {
		t.Fatal(err)
	}
}

// boot runs QEMU with args until the script's marker for mac is on the
// console, and returns the console.
func (l *e2eLab) boot(t *testing.T, mac string, args ...string) string {
	t.Helper()
	qctx, qcancel := context.WithTimeout(context.Background(), e2eTimeout())
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
	marker := "INGOT-SCRIPT-OK mac=" + mac + " ip=10.77.0."
	var out []byte
	for found := false; !found; {
		select {
		case err := <-exited:
			out, _ = os.ReadFile(console)
			t.Fatalf("QEMU exited (%v) before the script ran; console:\n%s", err, out)
		case <-qctx.Done():
			out, _ = os.ReadFile(console)
			t.Fatalf("no %q on the console in time; console:\n%s", marker, out)
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
	le, err := l.st.LeaseByMAC(ctx, mac)
	if proxy := l.mode == dhcp.ModeProxy; proxy != errors.Is(err, store.ErrNotFound) || (!proxy && le.State != dhcp.StateBound) {
		t.Errorf("lease of %s in %s mode: %+v, %v", mac, l.mode, le, err)
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
func TestE2EUEFIFirmwareChainsToIPXE(t *testing.T) { uefiChain(t, dhcp.ModeFull, "52:54:00:77:00:11") }

// The same beside the site's DHCP server (dnsmasq): the address comes from
// dnsmasq, the boot file and the script URL from ingot's proxyDHCP offers.
func TestE2EProxyUEFIFirmwareChainsToIPXE(t *testing.T) {
	uefiChain(t, dhcp.ModeProxy, "52:54:00:77:00:12")
}

// iPXE beside the site's DHCP server takes the script URL from ingot's
// proxyDHCP offer.
func TestE2EProxyIPXEBootsScript(t *testing.T) {
	l := newE2ELabMode(t, dhcp.ModeProxy)
	const mac = "52:54:00:77:00:13"
	out := l.boot(t, mac, "-m", "256", "-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1")
	if !strings.Contains(out, "net0: 10.77.0.") || strings.Contains(out, "net0: 10.77.0.1/") {
		t.Errorf("iPXE did not take its address from dnsmasq")
	}
	l.check(t, mac, "bios")
}

func uefiChain(t *testing.T, mode, mac string) {
	netnstest.Need(t, "in.tftpd")
	for _, f := range []string{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd", "/usr/lib/ipxe/snponly.efi"} {
		if _, err := os.Stat(f); err != nil {
			netnstest.Need(t, f) // skips (fails in CI) naming the missing file
		}
	}
	l := newE2ELabMode(t, mode)
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
	out := l.boot(t, mac, "-m", "512",
		"-drive", "if=pflash,format=raw,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd",
		"-drive", "if=pflash,format=raw,file="+filepath.Join(dir, "vars.fd"),
		"-device", "virtio-net-pci,romfile=,netdev=n0,mac="+mac+",bootindex=1")
	if !strings.Contains(out, "Filename: http://10.77.0.1:8080/ipxe?mac="+mac+"&arch=uefi-x64") {
		t.Errorf("iPXE (snponly.efi) did not get the script URL")
	}
	l.check(t, mac, "uefi-x64")
}

// e2eTimeout is how long a VM may take to run the script: 180 s, or
// INGOT_E2E_TIMEOUT_S when debugging.
func e2eTimeout() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("INGOT_E2E_TIMEOUT_S")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 180 * time.Second
}
