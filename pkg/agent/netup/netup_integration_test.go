//go:build integration

package netup

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationUpDnsmasq brings a veth end up with DHCP from a real
// dnsmasq in another namespace and checks the kernel's address and route.
func TestIntegrationUpDnsmasq(t *testing.T) {
	netnstest.Need(t, "dnsmasq")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := netnstest.New(t, "ingot-netup-s")
	cli := netnstest.New(t, "ingot-netup-c")
	if err := netns.Veth(ctx, srv, "vs0", "10.77.5.1/24", cli, "eth0", ""); err != nil {
		t.Fatal(err)
	}
	// The client end starts down: Up must set it up itself.
	if err := cli.IP(ctx, "link", "set", "eth0", "down"); err != nil {
		t.Fatal(err)
	}
	dns := srv.Command(ctx, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--interface=vs0",
		"--bind-interfaces", "--dhcp-range=10.77.5.50,10.77.5.60,255.255.255.0,1h", "--dhcp-option=3,10.77.5.1",
		"--dhcp-option=6,10.77.5.1", "--leasefile-ro", "--dhcp-authoritative", "--log-dhcp")
	out := &syncBuffer{}
	dns.Stdout, dns.Stderr = out, out
	if err := srv.Start(dns); err != nil {
		t.Fatal(err)
	}
	var l Lease
	err := cli.Do(func() error {
		var err error
		l, err = Up(ctx, Config{CarrierWait: 10 * time.Second, DHCPTimeout: 30 * time.Second, KeepLease: true, RenewEvery: time.Second})
		return err
	})
	if err != nil {
		t.Fatalf("Up: %v\ndnsmasq:\n%s", err, out.String())
	}
	if l.Iface != "eth0" || !strings.HasPrefix(l.Addr.String(), "10.77.5.") || l.Router.String() != "10.77.5.1" {
		t.Errorf("lease %+v: want eth0, 10.77.5.x/24 via 10.77.5.1", l)
	}
	addr, _ := cli.Run(ctx, "ip", "-4", "addr", "show", "dev", "eth0")
	if !strings.Contains(string(addr), "inet "+l.Addr.String()) {
		t.Errorf("eth0 has no %s:\n%s", l.Addr.String(), addr)
	}
	route, _ := cli.Run(ctx, "ip", "-4", "route", "show", "default")
	if !strings.Contains(string(route), "default via 10.77.5.1 dev eth0") {
		t.Errorf("no default route via 10.77.5.1:\n%s", route)
	}
	// The background renewal talks to dnsmasq again (RenewEvery 1 s).
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(out.String(), "DHCPACK") < 2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if n := strings.Count(out.String(), "DHCPACK"); n < 2 {
		t.Errorf("dnsmasq sent %d ACKs, want a renewal after the first:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "ingot-agent") {
		t.Errorf("dnsmasq did not log vendor class ingot-agent:\n%s", out.String())
	}
	// Configuring the same lease again is not an error (EEXIST).
	if err := cli.Do(func() error { return Configure(indexOf(t, cli, "eth0"), l) }); err != nil {
		t.Errorf("second Configure: %v", err)
	}
}

func indexOf(t *testing.T, n *netns.NS, name string) int {
	var idx int
	n.Do(func() error {
		ifs, _ := netInterfaces()
		for _, i := range ifs {
			if i.Name == name {
				idx = i.Index
			}
		}
		return nil
	})
	return idx
}

// syncBuffer is a strings.Builder safe for dnsmasq's output goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
