package dhcp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// FuzzHandle feeds raw packets to the handler in both modes and on both
// ports. It must never panic, and every reply must encode and decode.
func FuzzHandle(f *testing.F) {
	// Seeds: the requests of the golden exchanges (more in testdata/fuzz).
	for _, mods := range [][]dhcpv4.Modifier{ovmf, ipxeBIOS, ipxeEFI, arm64, httpX64, udhcpc, relayed} {
		f.Add(pkt(macA, dhcpv4.MessageTypeDiscover, mods...).ToBytes(), uint8(0))
		f.Add(initReboot(macA, "10.77.0.120", mods...)(nil).ToBytes(), uint8(1))
	}
	f.Fuzz(func(t *testing.T, b []byte, sel uint8) {
		req, err := dhcpv4.FromBytes(b)
		if err != nil {
			return
		}
		cfg := baseConfig()
		if sel&1 == 1 {
			cfg.Mode, cfg.Pools = ModeProxy, nil
		}
		st := newFakeStore(enrolled()...)
		cfg.Store, cfg.Discover, cfg.Now = st, st, func() time.Time { return t0 }
		h, err := NewHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		in := Meta{Port: 67, Peer: netip.MustParseAddrPort("0.0.0.0:68")}
		if sel&2 == 2 {
			in = Meta{Port: PXEPort, Peer: netip.MustParseAddrPort("10.77.0.9:4011")}
		}
		for range 2 { // twice: the second sees the state the first left
			reply, err := h.Handle(context.Background(), req, in)
			if err != nil || reply == nil {
				continue
			}
			_ = Destination(req, reply, in)
			if _, err := dhcpv4.FromBytes(reply.ToBytes()); err != nil {
				t.Fatalf("reply does not decode: %v\n%s", err, reply.Summary())
			}
		}
	})
}
