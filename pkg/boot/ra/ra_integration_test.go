//go:build integration

package ra_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/boot/ra"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// A Router Solicitation sent from a client namespace, as iPXE sends it,
// is answered with an RA carrying the configured prefix.
func TestIntegrationRouterSolicitation(t *testing.T) {
	ctx := context.Background()
	srv := netnstest.New(t, "ingot-ra-s")
	cli := netnstest.New(t, "ingot-ra-c")
	if err := netns.Veth(ctx, srv, "eth0", "10.77.0.1/24", cli, "eth0", ""); err != nil {
		t.Fatal(err)
	}
	prefix := netip.MustParsePrefix("fd00:77::/64")
	var r *ra.Responder
	if err := srv.Do(func() (err error) {
		if r, err = ra.New(ra.Config{Interface: "eth0", Prefix: prefix}); err != nil {
			return err
		}
		return r.Listen()
	}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Serve(sctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	var c *net.IPConn
	if err := cli.Do(func() (err error) {
		c, err = net.ListenIP("ip6:ipv6-icmp", &net.IPAddr{IP: net.IPv6unspecified})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rs := []byte{133, 0, 0, 0, 0, 0, 0, 0} // Router Solicitation, no options
	deadline := time.Now().Add(15 * time.Second)
	buf := make([]byte, 1500)
	for time.Now().Before(deadline) {
		// The first sends may fail while the link-local addresses are tentative.
		c.WriteToIP(rs, &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: "eth0"})
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			n, from, err := c.ReadFromIP(buf)
			if err != nil {
				break
			}
			if n < 16 || buf[0] != 134 {
				continue
			}
			if !from.IP.IsLinkLocalUnicast() {
				t.Errorf("RA from %s: RFC 4861 requires a link-local source", from)
			}
			for opt := buf[16:n]; len(opt) >= 8 && opt[1] > 0 && int(opt[1])*8 <= len(opt); opt = opt[int(opt[1])*8:] {
				if opt[0] == 3 && opt[1] == 4 {
					got := netip.PrefixFrom(netip.AddrFrom16([16]byte(opt[16:32])), int(opt[2]))
					if got != prefix || opt[3]&0xc0 != 0xc0 {
						t.Fatalf("RA prefix %s flags %#x, want %s with L and A", got, opt[3], prefix)
					}
					return
				}
			}
			t.Fatalf("RA without a prefix option: % x", buf[:n])
		}
	}
	t.Fatal("no Router Advertisement within 15 s")
}
