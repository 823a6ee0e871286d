package dhcp

import (
	"context"
	"encoding/binary"
	"net"
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

// FuzzHandleSequence feeds a sequence of packets to one handler: each a
// 2-byte big-endian length and that many bytes; a length with its top bit
// set moves the clock a minute first (offers and leases expire). After
// every packet the handler's lease index must agree with the store
// (indexDiff): an address the store holds that the allocator takes to be
// free is NAKed to the next client it is offered to. At the end a new
// client that is offered an address must be ACKed it.
func FuzzHandleSequence(f *testing.F) {
	hc := HostileConfig{Server: netip.MustParseAddr("10.77.0.1"), Subnet: netip.MustParsePrefix("10.77.0.0/24"),
		Start: netip.MustParseAddr("10.77.0.100"), End: netip.MustParseAddr("10.77.0.199"), MACs: 2}
	for seed := range uint64(8) {
		pkts, _ := NewHostile(seed, hc).Burst(8)
		f.Add(framePackets(pkts))
	}
	// A DECLINE from a client whose released address another client has
	// leased since: rewriting the old lease gave the address back to the
	// decliner in the index (leaseOn).
	s := &scn{ip: map[string]net.IP{macA: net.IPv4(10, 77, 0, 120)}}
	f.Add(framePackets([][]byte{pkt(macA, dhcpv4.MessageTypeDiscover).ToBytes(), selecting(macA, "10.77.0.1")(s).ToBytes(),
		release(macA)(s).ToBytes(), initReboot(macB, "10.77.0.120")(nil).ToBytes(), decline(macA)(s).ToBytes()}))
	f.Fuzz(func(t *testing.T, seq []byte) {
		st := newFakeStore(enrolled()...)
		now := t0
		cfg := baseConfig()
		cfg.Store, cfg.Discover, cfg.Now = st, st, func() time.Time { return now }
		h, err := NewHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, in := context.Background(), Meta{Port: 67, Peer: netip.MustParseAddrPort("0.0.0.0:68")}
		for len(seq) >= 2 {
			n := int(binary.BigEndian.Uint16(seq))
			if n&0x8000 != 0 {
				now, n = now.Add(time.Minute), n&0x7fff
			}
			n = min(n, len(seq)-2)
			b := seq[2 : 2+n]
			seq = seq[2+n:]
			req, err := dhcpv4.FromBytes(b)
			if err != nil {
				continue
			}
			if _, err := h.Handle(ctx, req, in); err != nil {
				t.Fatalf("%s: %v", req.Summary(), err)
			}
			ls, _ := st.ListLeases(ctx)
			if d := indexDiff(h, ls, now); d != "" {
				t.Fatalf("after %s the index and the store disagree:\n%s", req.Summary(), d)
			}
		}
		const mac = "52:54:00:99:99:99"
		offer, err := h.Handle(ctx, pkt(mac, dhcpv4.MessageTypeDiscover), in)
		if err != nil || offer == nil {
			return // every address taken or declined by the sequence
		}
		s := &scn{ip: map[string]net.IP{mac: offer.YourIPAddr}}
		if ack, err := h.Handle(ctx, selecting(mac, "10.77.0.1")(s), in); err != nil || ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
			t.Fatalf("a new client offered %s got %v, %v; want an ACK", offer.YourIPAddr, ack, err)
		}
	})
}

// framePackets is FuzzHandleSequence's input for pkts.
func framePackets(pkts [][]byte) []byte {
	var out []byte
	for _, p := range pkts {
		out = binary.BigEndian.AppendUint16(out, uint16(len(p)))
		out = append(out, p...)
	}
	return out
}
