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
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/store"
)

// A real iPXE (QEMU's virtio-net option ROM under SeaBIOS) gets its address
// and the script URL from ingot in full mode, fetches the script over HTTP
// (no chainload loop) and runs it. The router advertisement answers its
// IPv6 autoconfiguration.
func TestE2EIPXEBootsScript(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64")
	ctx := context.Background()
	ns := netnstest.New(t, "ingot-dhcp-e2e")
	if err := ns.AddBridge(ctx, "br0", "10.77.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := ns.AddTap(ctx, "tap0", "br0"); err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:77:00:10"
	st, err := store.Open(filepath.Join(t.TempDir(), "ingot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
	defer cancel()
	go srv.Serve(sctx)
	go resp.Serve(sctx)
	hits := make(chan string, 4)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.URL.String()
		fmt.Fprintf(w, "#!ipxe\necho INGOT-SCRIPT-OK mac=${net0/mac} ip=${net0/ip}\nshell\n")
	})}
	go hs.Serve(ln)
	defer hs.Close()

	qctx, qcancel := context.WithTimeout(ctx, 180*time.Second)
	defer qcancel()
	console := filepath.Join(t.TempDir(), "console.log")
	q := ns.Command(qctx, "qemu-system-x86_64", "-accel", "tcg", "-m", "256", "-smp", "1",
		"-nographic", "-monitor", "none", "-serial", "file:"+console, "-no-reboot",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1")
	start := time.Now()
	if err := ns.Start(q); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- q.Wait() }()
	// The script's marker ends the test; this iPXE build has no poweroff,
	// so QEMU is stopped here (SeaBIOS would wait forever afterwards).
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
	if strings.Count(string(out), "Filename:") != 1 {
		t.Errorf("iPXE was given a boot file more than once (a chainload loop?)")
	}
	select {
	case u := <-hits:
		got, err := url.Parse(u)
		if err != nil || got.Path != "/ipxe" || got.Query().Get("mac") != mac || got.Query().Get("arch") != "bios" {
			t.Errorf("iPXE fetched %q, want /ipxe?mac=%s&arch=bios", u, mac)
		}
	default:
		t.Error("no HTTP request reached the script server")
	}
	// The RA answered iPXE's solicitation: it configured an address in the ULA prefix.
	if !strings.Contains(string(out), "net0: fd00:696e:676f:7400:") {
		t.Errorf("iPXE shows no address from the advertised prefix %s", ra.DefaultPrefix)
	}
	if l, err := st.LeaseByMAC(ctx, mac); err != nil || l.State != dhcp.StateBound {
		t.Errorf("lease of %s: %+v, %v", mac, l, err)
	}
	if m, err := st.MachineByMAC(ctx, mac); err != nil || m.State != machine.StateDiscovered || m.Arch != "bios" {
		t.Errorf("discovered machine: %+v, %v", m, err)
	}
}
