//go:build integration

package dhcp_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/store"
)

const clientMAC = "52:54:00:77:00:21"

// pair is a server namespace and a client namespace joined by a veth:
// server eth0 10.77.0.1/24, client eth0 unnumbered with clientMAC.
func pair(t *testing.T) (srv, cli *netns.NS) {
	t.Helper()
	ctx := context.Background()
	srv = netnstest.New(t, "ingot-dhcp-s")
	cli = netnstest.New(t, "ingot-dhcp-c")
	if err := netns.Veth(ctx, srv, "eth0", "10.77.0.1/24", cli, "eth0", ""); err != nil {
		t.Fatal(err)
	}
	if err := cli.IP(ctx, "link", "set", "eth0", "address", clientMAC); err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

func fullConfig(st store.Store, lease time.Duration) dhcp.Config {
	pool, err := dhcp.ParsePool("10.77.0.0/24,10.77.0.100-10.77.0.199,router=10.77.0.1,dns=10.77.0.1")
	if err != nil {
		panic(err)
	}
	return dhcp.Config{Interface: "eth0", Mode: dhcp.ModeFull, Pools: []dhcp.Pool{pool},
		HTTPBase: "http://10.77.0.1:8080", LeaseTime: lease, Store: st, Discover: discoverer(st), Unknown: dhcp.UnknownDiscover,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// serve runs a DHCP server in ns until the returned stop is called.
func serve(t *testing.T, ns *netns.NS, cfg dhcp.Config) (stop func()) {
	t.Helper()
	var s *dhcp.Server
	if err := ns.Do(func() (err error) {
		if s, err = dhcp.NewServer(cfg); err != nil {
			return err
		}
		return s.Listen()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func openStore(t *testing.T, path string) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(path, store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// udhcpcScript configures the address (so renewals are real unicasts) and
// prints what udhcpc was told.
const udhcpcScript = `#!/bin/sh
case "$1" in
bound|renew) ip addr replace "$ip/${mask:-24}" dev "$interface" ;;
esac
echo "event=$1 ip=$ip mask=$mask router=$router lease=$lease serverid=$serverid siaddr=$siaddr boot_file=$boot_file"
`

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var field = regexp.MustCompile(`(\w+)=(\S*)`)

func fields(line string) map[string]string {
	out := map[string]string{}
	for _, m := range field.FindAllStringSubmatch(line, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// udhcpcOnce runs `udhcpc -q` (obtain a lease, then quit) and returns the
// fields of its "bound" line.
// Extra arguments go to udhcpc (-B: ask for broadcast replies).
func udhcpcOnce(t *testing.T, cli *netns.NS, extra ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := cli.Run(ctx, "busybox", append([]string{"udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "5", "-T", "1",
		"-s", writeScript(t, udhcpcScript)}, extra...)...)
	if err != nil {
		t.Fatalf("udhcpc: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "event=bound") {
			return fields(l)
		}
	}
	t.Fatalf("udhcpc printed no bound event:\n%s", out)
	return nil
}

func leaseOf(t *testing.T, st *bolt.Store, mac string) *store.Lease {
	t.Helper()
	l, err := st.LeaseByMAC(context.Background(), mac)
	if err != nil {
		t.Fatalf("lease of %s in the store: %v", mac, err)
	}
	return l
}

// udhcpc gets an address, the lease is committed, survives a restart of
// server and store, and the client gets the same address afterwards.
func TestIntegrationUdhcpcLeaseSurvivesRestart(t *testing.T) {
	netnstest.Need(t, "busybox")
	srv, cli := pair(t)
	db := filepath.Join(t.TempDir(), "ingot.db")
	st := openStore(t, db)
	stop := serve(t, srv, fullConfig(st, time.Hour))

	got := udhcpcOnce(t, cli)
	ip := got["ip"]
	if a, err := netip.ParseAddr(ip); err != nil || a.Less(netip.MustParseAddr("10.77.0.100")) || netip.MustParseAddr("10.77.0.199").Less(a) {
		t.Fatalf("udhcpc got %q, want an address in 10.77.0.100-199 (all: %v)", ip, got)
	}
	if got["router"] != "10.77.0.1" || got["serverid"] != "10.77.0.1" || got["lease"] != "3600" {
		t.Errorf("udhcpc options: %v", got)
	}
	if l := leaseOf(t, st, clientMAC); l.IP.String() != ip || l.State != dhcp.StateBound {
		t.Errorf("stored lease %+v, want %s bound", l, ip)
	}

	stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, db)
	defer st.Close()
	if l := leaseOf(t, st, clientMAC); l.IP.String() != ip {
		t.Fatalf("after restart the store holds %+v, want %s", l, ip)
	}
	serve(t, srv, fullConfig(st, time.Hour))
	if again := udhcpcOnce(t, cli); again["ip"] != ip {
		t.Errorf("after restart udhcpc got %s, want its old address %s", again["ip"], ip)
	}
}

// udhcpc renews by unicast at T1 and the server extends the stored lease.
func TestIntegrationUdhcpcRenews(t *testing.T) {
	netnstest.Need(t, "busybox")
	srv, cli := pair(t)
	st := openStore(t, filepath.Join(t.TempDir(), "ingot.db"))
	defer st.Close()
	serve(t, srv, fullConfig(st, 16*time.Second)) // busybox's minimum lease is 16 s: renewal at 8 s

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := cli.Command(ctx, "busybox", "udhcpc", "-i", "eth0", "-f", "-t", "5", "-T", "1", "-s", writeScript(t, udhcpcScript))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var bound, renewed map[string]string
	var firstExpiry time.Time
	for renewed == nil && sc.Scan() {
		t.Logf("udhcpc: %s", sc.Text())
		switch f := fields(sc.Text()); f["event"] {
		case "bound":
			bound = f
			firstExpiry = leaseOf(t, st, clientMAC).Expires
		case "renew":
			renewed = f
		}
	}
	if bound == nil || renewed == nil {
		t.Fatalf("udhcpc did not bind and renew (bound %v, renew %v)", bound, renewed)
	}
	if renewed["ip"] != bound["ip"] {
		t.Errorf("renewal changed the address: %s -> %s", bound["ip"], renewed["ip"])
	}
	if l := leaseOf(t, st, clientMAC); !l.Expires.After(firstExpiry) {
		t.Errorf("renewal did not extend the stored lease: %s, first %s", l.Expires, firstExpiry)
	}
}

// An enrolled machine with a reserved address always gets it, with udhcpc
// and with ISC dhclient.
func TestIntegrationReservedAddress(t *testing.T) {
	netnstest.Need(t, "busybox", "dhclient")
	srv, cli := pair(t)
	st := openStore(t, filepath.Join(t.TempDir(), "ingot.db"))
	defer st.Close()
	m := &machine.Machine{ID: "m-res", Name: "res", MACs: []string{clientMAC}, State: machine.StateReady, IPv4: "10.77.0.50"}
	if err := st.CreateMachine(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	serve(t, srv, fullConfig(st, time.Hour))
	for i := range 2 {
		if got := udhcpcOnce(t, cli); got["ip"] != "10.77.0.50" {
			t.Fatalf("udhcpc run %d got %s, want the reserved 10.77.0.50", i, got["ip"])
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	script := writeScript(t, "#!/bin/sh\necho \"reason=$reason ip=$new_ip_address\" >> "+out+"\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pid := filepath.Join(dir, "pid")
	if b, err := cli.Run(ctx, "dhclient", "-4", "-1", "-v", "-sf", script, "-lf", filepath.Join(dir, "leases"),
		"-pf", pid, "eth0"); err != nil {
		t.Fatalf("dhclient: %v\n%s", err, b)
	}
	defer cli.Run(context.Background(), "dhclient", "-x", "-pf", pid)
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "reason=BOUND ip=10.77.0.50") && !strings.Contains(string(b), "reason=REBOOT ip=10.77.0.50") {
		t.Fatalf("dhclient did not bind 10.77.0.50:\n%s", b)
	}
	if l := leaseOf(t, st, clientMAC); l.IP.String() != "10.77.0.50" || l.MachineID != "m-res" {
		t.Errorf("stored lease %+v, want 10.77.0.50 for m-res", l)
	}
}

// proxyDHCP beside a real site DHCP server (dnsmasq): all on one bridge.
// A plain client gets its address from dnsmasq and nothing from ingot; a
// PXE client gets dnsmasq's address offer and ingot's boot offer, takes the
// address from dnsmasq and its boot file from ingot on port 4011.
func TestIntegrationProxyBesideDnsmasq(t *testing.T) {
	netnstest.Need(t, "busybox", "dnsmasq")
	ctx := context.Background()
	lan := netnstest.New(t, "ingot-dhcp-l")
	site := netnstest.New(t, "ingot-dhcp-d")
	srv := netnstest.New(t, "ingot-dhcp-s")
	cli := netnstest.New(t, "ingot-dhcp-c")
	if err := lan.AddBridge(ctx, "br0", ""); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		ns   *netns.NS
		port string
		cidr string
	}{{site, "p0@br0", "10.77.0.2/24"}, {srv, "p1@br0", "10.77.0.1/24"}, {cli, "p2@br0", ""}} {
		if err := netns.Veth(ctx, e.ns, "eth0", e.cidr, lan, e.port, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := cli.IP(ctx, "link", "set", "eth0", "address", clientMAC); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dns := site.Command(ctx, "dnsmasq", "--no-daemon", "--port=0", "--conf-file=/dev/null", "--user=root",
		"--dhcp-range=10.77.0.50,10.77.0.99,255.255.255.0,1h", "--interface=eth0", "--bind-interfaces",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"), "--log-dhcp")
	dnsLog := &strings.Builder{}
	dns.Stdout, dns.Stderr = dnsLog, dnsLog
	if err := site.Start(dns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Process.Kill(); dns.Wait(); t.Logf("dnsmasq:\n%s", dnsLog) })

	st := openStore(t, filepath.Join(t.TempDir(), "ingot.db"))
	defer st.Close()
	serve(t, srv, dhcp.Config{Interface: "eth0", Mode: dhcp.ModeProxy, HTTPBase: "http://10.77.0.1:8080",
		Store: st, Discover: discoverer(st), Unknown: dhcp.UnknownDiscover})
	time.Sleep(500 * time.Millisecond) // dnsmasq binds

	// A plain client: dnsmasq's address, no boot file (ingot stays silent).
	// It asks for broadcast replies (-B), as the PXE client below does:
	// dnsmasq's unicast OFFER (an ARP entry it writes, then a UDP send) twice
	// never reached udhcpc through the lab bridge in a full CI run (5
	// OFFERs logged, none received; never reproduced alone, 11 of 11), and
	// what this case checks is ingot's silence, not dnsmasq's unicast.
	got := udhcpcOnce(t, cli, "-B")
	if got["serverid"] != "10.77.0.2" || !strings.HasPrefix(got["ip"], "10.77.0.") || got["boot_file"] != "" {
		t.Fatalf("plain client: %v; want an address from dnsmasq (10.77.0.2) and no boot file", got)
	}
	if _, err := st.LeaseByMAC(ctx, clientMAC); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("proxy mode stored a lease: %v", err)
	}
	if err := cli.IP(ctx, "addr", "flush", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}

	// A PXE client (OVMF's options, captured).
	pxeOpts := []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7})),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 3, 0})),
	}
	var c *nclient4.Client
	if err := cli.Do(func() (err error) {
		c, err = nclient4.New("eth0", nclient4.WithTimeout(2*time.Second))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var siteOffer, proxyOffer *dhcpv4.DHCPv4
	msg, err := dhcpv4.NewDiscovery(c.InterfaceAddr(), append(pxeOpts, dhcpv4.WithBroadcast(true))...)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = c.SendAndRead(cctx, nclient4.DefaultServers, msg, func(m *dhcpv4.DHCPv4) bool {
		if m.MessageType() == dhcpv4.MessageTypeOffer {
			if m.YourIPAddr.IsUnspecified() {
				proxyOffer = m
			} else {
				siteOffer = m
			}
		}
		return siteOffer != nil && proxyOffer != nil
	})
	if err != nil {
		t.Fatalf("PXE DISCOVER: want offers from dnsmasq and ingot; got site %v, proxy %v: %v", siteOffer, proxyOffer, err)
	}
	if !siteOffer.ServerIdentifier().Equal(net.IPv4(10, 77, 0, 2)) || siteOffer.BootFileName != "" {
		t.Errorf("site offer not from dnsmasq or carries a boot file:\n%s", siteOffer.Summary())
	}
	if !proxyOffer.ServerIdentifier().Equal(net.IPv4(10, 77, 0, 1)) || proxyOffer.BootFileName != "snponly.efi" ||
		proxyOffer.ClassIdentifier() != "PXEClient" || !proxyOffer.ServerIPAddr.Equal(net.IPv4(10, 77, 0, 1)) {
		t.Errorf("proxy offer:\n%s", proxyOffer.Summary())
	}
	lease, err := c.RequestFromOffer(cctx, siteOffer, pxeOpts...)
	if err != nil {
		t.Fatalf("REQUEST to dnsmasq: %v", err)
	}
	ip := lease.ACK.YourIPAddr
	if err := cli.IP(ctx, "addr", "add", ip.String()+"/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}

	// The boot server request to port 4011, as EDK2 sends it.
	var conn *net.UDPConn
	if err := cli.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: ip, Port: 4011})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hw, _ := net.ParseMAC(clientMAC)
	req, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithClientIP(ip),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest)}, pxeOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var ack *dhcpv4.DHCPv4
	for try := 0; try < 5 && ack == nil; try++ {
		if _, err := conn.WriteToUDP(req.ToBytes(), &net.UDPAddr{IP: net.IPv4(10, 77, 0, 1), Port: 4011}); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 1500)
		n, err := conn.Read(buf)
		if err != nil {
			continue
		}
		if ack, err = dhcpv4.FromBytes(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || ack.BootFileName != "snponly.efi" || !ack.YourIPAddr.IsUnspecified() {
		t.Fatalf("port 4011 reply: want ACK with snponly.efi and no address, got %v", ack)
	}
	if m, err := st.MachineByMAC(ctx, clientMAC); err != nil || m.State != machine.StateDiscovered || m.Arch != "uefi-x64" {
		t.Errorf("discovered machine: %+v, %v", m, err)
	}
}

func TestIntegrationNeedsInterface(t *testing.T) {
	_, err := dhcp.NewServer(dhcp.Config{Mode: dhcp.ModeFull})
	if err == nil || !strings.Contains(err.Error(), "DHCP needs an explicit --interface") {
		t.Fatalf("NewServer without interface: %v", err)
	}
}

// RFC 2131 §4.1: a client without an address that does not ask for
// broadcast (udhcpc's default) gets its OFFER and ACK unicast to its MAC and
// yiaddr; one that sets the broadcast flag (udhcpc -B) gets them broadcast.
// The frames are read off the client's interface with a packet socket.
func TestIntegrationUnicastToClientWithoutAddress(t *testing.T) {
	netnstest.Need(t, "busybox")
	for _, c := range []struct {
		name    string
		extra   []string
		wantMAC string // "" = the client's MAC
		wantIP  string // "" = the address it got
	}{
		{"no broadcast flag: unicast", nil, "", ""},
		{"broadcast flag: broadcast", []string{"-B"}, "ff:ff:ff:ff:ff:ff", "255.255.255.255"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := pair(t)
			st := openStore(t, filepath.Join(t.TempDir(), "ingot.db"))
			defer st.Close()
			serve(t, srv, fullConfig(st, time.Hour))
			frames := captureReplies(t, cli)
			got := udhcpcOnce(t, cli, c.extra...)
			wantMAC, wantIP := c.wantMAC, c.wantIP
			if wantMAC == "" {
				wantMAC, wantIP = clientMAC, got["ip"]
			}
			seen := map[dhcpv4.MessageType]bool{}
			for _, f := range frames() {
				seen[f.typ] = true
				if f.dstMAC != wantMAC || f.dstIP != wantIP {
					t.Errorf("%s went to %s / %s, want %s / %s", f.typ, f.dstMAC, f.dstIP, wantMAC, wantIP)
				}
			}
			if !seen[dhcpv4.MessageTypeOffer] || !seen[dhcpv4.MessageTypeAck] {
				t.Errorf("captured replies %v, want an OFFER and an ACK", seen)
			}
		})
	}
}

type replyFrame struct {
	typ           dhcpv4.MessageType
	dstMAC, dstIP string
}

// captureReplies reads the DHCP server replies (UDP from port 67) arriving
// on cli's eth0 until the returned function is called; it returns them.
func captureReplies(t *testing.T, cli *netns.NS) func() []replyFrame {
	t.Helper()
	var fd int
	if err := cli.Do(func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_IP))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto); err != nil {
			return err
		}
		tv := unix.Timeval{Usec: 100_000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatalf("packet socket in %s: %v", cli.Name, err)
	}
	var (
		out  []replyFrame
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // the 100 ms timeout
			}
			if f, ok := parseReplyFrame(buf[:n]); ok {
				out = append(out, f)
			}
		}
	}()
	var result []replyFrame
	finished := false
	finish := func() []replyFrame {
		if !finished {
			finished = true
			close(stop)
			<-done
			unix.Close(fd)
			result = out
		}
		return result
	}
	t.Cleanup(func() { finish() })
	return finish
}

// parseReplyFrame decodes an Ethernet/IPv4/UDP frame from port 67.
func parseReplyFrame(b []byte) (replyFrame, bool) {
	if len(b) < 14+20+8 || b[12] != 0x08 || b[13] != 0x00 || b[14]>>4 != 4 || b[23] != 17 {
		return replyFrame{}, false
	}
	ihl := int(b[14]&0x0f) * 4
	udp := 14 + ihl
	if len(b) < udp+8 || b[udp] != 0 || b[udp+1] != 67 {
		return replyFrame{}, false
	}
	m, err := dhcpv4.FromBytes(b[udp+8:])
	if err != nil {
		return replyFrame{}, false
	}
	return replyFrame{typ: m.MessageType(), dstMAC: net.HardwareAddr(b[0:6]).String(),
		dstIP: netip.AddrFrom4([4]byte(b[30:34])).String()}, true
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
