//go:build integration

package lldp

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationListenFrames: a "switch" namespace sends LLDP frames with
// a packet socket on two veth ports; Listen in the machine's namespace
// hears each on its own interface, stops waiting once both have one, is
// bounded by wait on a port without LLDP, and a shutdown LLDPDU (TTL 0)
// withdraws a neighbour.
func TestIntegrationListenFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sw := netnstest.New(t, "ingot-lldp-sw")
	host := netnstest.New(t, "ingot-lldp-m")
	for _, p := range [][2]string{{"swp1", "eth0"}, {"swp2", "eth1"}, {"swp3", "eth2"}} {
		if err := netns.Veth(ctx, sw, p[0], "", host, p[1], ""); err != nil {
			t.Fatal(err)
		}
	}
	port1 := frame(chassisMAC("28:99:3a:4d:12:00"), portName("Ethernet12/1"), ttl(120), portDescr("gpu-node-07 eth0"),
		systemName("leaf-r12-a"), pvid(100), end())
	port2 := frame(chassisMAC("28:99:3a:4d:12:00"), portName("Ethernet12/2"), ttl(120), systemName("leaf-r12-a"), pvid(200), end())
	repeat(t, sw, "swp1", port1)
	p2 := repeat(t, sw, "swp2", port2)
	want := map[string]machine.LLDPNeighbor{
		"eth0": {ChassisID: "28:99:3a:4d:12:00", PortID: "Ethernet12/1", PortDescr: "gpu-node-07 eth0", SystemName: "leaf-r12-a", VLAN: 100},
		"eth1": {ChassisID: "28:99:3a:4d:12:00", PortID: "Ethernet12/2", SystemName: "leaf-r12-a", VLAN: 200},
	}

	var got map[string]machine.LLDPNeighbor
	start := time.Now()
	host.Do(func() error { got = Listen(ctx, []string{"eth0", "eth1"}, 20*time.Second); return nil })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Listen (-want +got):\n%s", diff)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Listen took %s: it should return once every port has a neighbour", took)
	}

	// eth2's switch port sends nothing: Listen returns the others after wait.
	start = time.Now()
	host.Do(func() error { got = Listen(ctx, []string{"eth0", "eth1", "eth2"}, 1500*time.Millisecond); return nil })
	if took := time.Since(start); took < 1400*time.Millisecond || took > 10*time.Second {
		t.Errorf("Listen with a silent port took %s, want about its wait of 1.5s", took)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Listen with a silent port (-want +got):\n%s", diff)
	}

	// In the background: what arrived is there; a shutdown LLDPDU removes it.
	var l *Listener
	if err := host.Do(func() (err error) { l, err = Start([]string{"eth0", "eth1"}); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if diff := cmp.Diff(want, l.Wait(wctx)); diff != "" {
		t.Errorf("Listener.Wait (-want +got):\n%s", diff)
	}
	bye := frame(chassisMAC("28:99:3a:4d:12:00"), portName("Ethernet12/2"), ttl(0), end())
	p2.Store(&bye)
	deadline := time.Now().Add(10 * time.Second)
	for _, ok := l.Neighbors()["eth1"]; ok && time.Now().Before(deadline); _, ok = l.Neighbors()["eth1"] {
		time.Sleep(50 * time.Millisecond)
	}
	if n := l.Neighbors(); len(n) != 1 || n["eth0"] != want["eth0"] {
		t.Errorf("after eth1's shutdown LLDPDU: %+v, want only eth0", n)
	}
}

// TestIntegrationLLDPDOnBridge runs the real lldpd on a Linux bridge, as the
// lab does: frames lldpd sends from the bridge device leave every bridge
// port, so both machines' ports (veths on the bridge) hear the bridge.
func TestIntegrationLLDPDOnBridge(t *testing.T) {
	netnstest.Need(t, "lldpd")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sw := netnstest.New(t, "ingot-lldpd-sw")
	host := netnstest.New(t, "ingot-lldpd-m")
	if err := sw.AddBridge(ctx, "br0", "10.77.9.1/24"); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{"eth0", "tap0@br0"}, {"eth1", "tap1@br0"}} {
		if err := netns.Veth(ctx, host, p[0], "", sw, p[1], ""); err != nil {
			t.Fatal(err)
		}
	}
	// lldpd runs its lldpcli unprivileged (user _lldpd): the config and the
	// control socket must be in a folder anyone can enter, which t.TempDir
	// (0700) is not.
	dir, err := os.MkdirTemp("", "ingot-lldpd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "lldpd.conf")
	if err := os.WriteFile(conf, []byte("configure lldp tx-interval 1\nconfigure system hostname ingot-test-sw\n"+
		"configure lldp portidsubtype ifname\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	cmd := sw.Command(ctx, "lldpd", "-d", "-d", "-I", "br0", "-O", conf, "-p", filepath.Join(dir, "pid"), "-u", filepath.Join(dir, "sock"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := sw.Start(cmd); err != nil {
		t.Fatal(err)
	}
	var brMAC string
	sw.Do(func() error {
		ifc, err := net.InterfaceByName("br0")
		if err == nil {
			brMAC = ifc.HardwareAddr.String()
		}
		return err
	})
	var got map[string]machine.LLDPNeighbor
	host.Do(func() error { got = Listen(ctx, []string{"eth0", "eth1"}, 20*time.Second); return nil })
	bridge := machine.LLDPNeighbor{ChassisID: brMAC, PortID: "br0", PortDescr: "br0", SystemName: "ingot-test-sw"}
	if diff := cmp.Diff(map[string]machine.LLDPNeighbor{"eth0": bridge, "eth1": bridge}, got); diff != "" {
		t.Errorf("Listen (-want +got):\n%s\nlldpd:\n%s", diff, out.String())
	}
}

// TestIntegrationBridgeKeepsLLDP: what one bridge port receives for the
// LLDP address is not forwarded to the others (IEEE 802.1D reserves
// 01:80:c2:00:00:0e), which is why the lab runs lldpd on the bridge itself.
func TestIntegrationBridgeKeepsLLDP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sw := netnstest.New(t, "ingot-lldpbr-sw")
	host := netnstest.New(t, "ingot-lldpbr-m")
	if err := sw.AddBridge(ctx, "br0", ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{"eth0", "tap0@br0"}, {"eth1", "tap1@br0"}} {
		if err := netns.Veth(ctx, host, p[0], "", sw, p[1], ""); err != nil {
			t.Fatal(err)
		}
	}
	repeat(t, host, "eth1", frame(chassisMAC("02:00:00:00:00:01"), portName("from-eth1"), ttl(120), end()))
	var heard, bridged map[string]machine.LLDPNeighbor
	sw.Do(func() error { heard = Listen(ctx, []string{"tap1"}, 10*time.Second); return nil })
	if heard["tap1"].PortID != "from-eth1" {
		t.Fatalf("the bridge port did not receive the frame: %v", heard)
	}
	host.Do(func() error { bridged = Listen(ctx, []string{"eth0"}, 2*time.Second); return nil })
	if len(bridged) != 0 {
		t.Errorf("the bridge forwarded LLDP from one port to another: %v", bridged)
	}
}

// repeat sends frame (until replaced through the returned pointer) on
// iface inside ns every 100 ms until the test ends.
func repeat(t *testing.T, ns *netns.NS, iface string, frame []byte) *atomic.Pointer[[]byte] {
	t.Helper()
	var fd, index int
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		index = ifc.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: sends only
		return err
	}); err != nil {
		t.Fatalf("packet socket on %s in %s: %v", iface, ns.Name, err)
	}
	cur := &atomic.Pointer[[]byte]{}
	cur.Store(&frame)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			f := *cur.Load()
			sa := &unix.SockaddrLinklayer{Ifindex: index, Protocol: htons(EtherType), Halen: 6}
			copy(sa.Addr[:], f[:6])
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				t.Errorf("sending on %s: %v", iface, err)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait(); unix.Close(fd) })
	return cur
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
