package dhcp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// HostileConfig is the network a hostile burst aims at.
type HostileConfig struct {
	Server     netip.Addr   // the server identifier SELECTING REQUESTs name
	Subnet     netip.Prefix // the served subnet
	Start, End netip.Addr   // the addresses in-pool REQUESTs ask for (inclusive)
	// MACs is how many client MACs the mutants share (0 = 16; all-zero,
	// broadcast and multicast chaddrs come on top): few, so that the
	// mutants of one client are decided at the same time as each other.
	MACs int
}

// Hostile makes malformed and mutated DHCPv4 client packets: random byte
// flips of valid DISCOVERs and REQUESTs, bad hlen, all-zero, broadcast and
// multicast chaddr, truncation, bad option lengths, duplicated options,
// REQUESTs for addresses in and out of the pool and random message types.
// The same seed gives the same packets. Exported for the namespace tier
// (package dhcp_test); not part of the package's API.
type Hostile struct {
	cfg  HostileConfig
	rng  *rand.Rand
	macs []net.HardwareAddr
}

// NewHostile returns a generator seeded with seed.
func NewHostile(seed uint64, cfg HostileConfig) *Hostile {
	if cfg.MACs <= 0 {
		cfg.MACs = 16
	}
	g := &Hostile{cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0x686f7374696c65))}
	for i := range cfg.MACs {
		// 0e: locally administered unicast, apart from any test's clients.
		g.macs = append(g.macs, net.HardwareAddr{0x0e, 0xbd, 0, 0, byte(i >> 8), byte(i)})
	}
	g.macs = append(g.macs, make(net.HardwareAddr, 6), // all-zero
		net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}, // IPv4 multicast
		net.HardwareAddr{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}) // IPv6 multicast
	return g
}

// HostileKinds names the damage Next does; it picks one uniformly.
var HostileKinds = []string{"flip-discover", "flip-request", "hlen", "chaddr", "truncated", "option-length",
	"duplicate-options", "request-in-pool", "request-out-of-pool", "message-type"}

// Burst returns n packets and how many of each kind.
func (g *Hostile) Burst(n int) ([][]byte, map[string]int) {
	out, kinds := make([][]byte, 0, n), map[string]int{}
	for range n {
		kind, b := g.Next()
		out, kinds[kind] = append(out, b), kinds[kind]+1
	}
	return out, kinds
}

// Next returns one packet and the kind of damage done to it.
func (g *Hostile) Next() (kind string, b []byte) {
	kind = HostileKinds[g.rng.IntN(len(HostileKinds))]
	switch kind {
	case "flip-discover":
		b = g.flip(g.discover(g.mac()))
	case "flip-request":
		b = g.flip(g.request(g.mac(), g.inPool()))
	case "hlen":
		b = g.valid(g.mac())
		b[2] = []byte{0, 17, 255, 1, 5, 7, 16}[g.rng.IntN(7)]
	case "chaddr":
		mac := g.macs[g.cfg.MACs+g.rng.IntN(len(g.macs)-g.cfg.MACs)] // the zero, broadcast and multicast ones
		b = g.valid(mac)
	case "truncated":
		b = g.valid(g.mac())
		b = b[:g.rng.IntN(len(b))]
	case "option-length":
		b = g.badLength(g.valid(g.mac()))
	case "duplicate-options":
		b = g.duplicate(g.mac())
	case "request-in-pool":
		b = g.request(g.mac(), g.inPool())
	case "request-out-of-pool":
		b = g.request(g.mac(), g.outOfPool())
	case "message-type":
		b = g.request(g.mac(), g.inPool())
		b[242] = byte(g.rng.IntN(20)) // option 53's value: RELEASE, DECLINE, INFORM, unknown
	}
	return kind, b
}

// mac is one of the shared MACs, now and then a random one.
func (g *Hostile) mac() net.HardwareAddr {
	if g.rng.IntN(8) == 0 {
		mac := make(net.HardwareAddr, 6)
		for i := range mac {
			mac[i] = byte(g.rng.UintN(256))
		}
		return mac
	}
	return g.macs[g.rng.IntN(len(g.macs))]
}

func (g *Hostile) inPool() netip.Addr {
	lo, hi := ip4u(g.cfg.Start), ip4u(g.cfg.End)
	return u4ip(lo + g.rng.Uint32N(hi-lo+1))
}

// outOfPool is an address a server must not hand out: the subnet's own,
// outside the range, the server's, or not on the subnet at all.
func (g *Hostile) outOfPool() netip.Addr {
	net0 := g.cfg.Subnet.Masked().Addr()
	bcast := u4ip(ip4u(net0) | (1<<(32-g.cfg.Subnet.Bits()) - 1))
	switch g.rng.IntN(7) {
	case 0:
		return net0
	case 1:
		return bcast
	case 2:
		return g.cfg.Server
	case 3:
		return u4ip(ip4u(g.cfg.Start) - 1 - g.rng.Uint32N(3)) // just below the range
	case 4:
		return u4ip(ip4u(g.cfg.End) + 1 + g.rng.Uint32N(3)) // just above it
	case 5:
		return netip.AddrFrom4([4]byte{0, 0, 0, 0})
	}
	return u4ip(g.rng.Uint32()) // anywhere
}

func (g *Hostile) xid() dhcpv4.TransactionID {
	var x dhcpv4.TransactionID
	binary.BigEndian.PutUint32(x[:], g.rng.Uint32())
	return x
}

func (g *Hostile) discover(mac net.HardwareAddr) []byte {
	mods := []dhcpv4.Modifier{dhcpv4.WithBroadcast(true)}
	if g.rng.IntN(2) == 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(g.inPool().AsSlice())))
	}
	return g.build(mac, dhcpv4.MessageTypeDiscover, mods...)
}

// request is a REQUEST for ip in one of its three forms: SELECTING (our
// server id), INIT-REBOOT (option 50 alone) or RENEWING (ciaddr).
func (g *Hostile) request(mac net.HardwareAddr, ip netip.Addr) []byte {
	var mods []dhcpv4.Modifier
	switch g.rng.IntN(3) {
	case 0:
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(g.cfg.Server.AsSlice())),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip.AsSlice())))
	case 1:
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip.AsSlice())))
	default:
		mods = append(mods, dhcpv4.WithClientIP(ip.AsSlice()))
	}
	return g.build(mac, dhcpv4.MessageTypeRequest, append(mods, dhcpv4.WithBroadcast(true))...)
}

// valid is a well-formed DISCOVER or REQUEST, for damage to be done to.
func (g *Hostile) valid(mac net.HardwareAddr) []byte {
	if g.rng.IntN(2) == 0 {
		return g.discover(mac)
	}
	return g.request(mac, g.inPool())
}

// build encodes a client message with option 53 first (offset 240), as
// Next's message-type damage expects.
func (g *Hostile) build(mac net.HardwareAddr, t dhcpv4.MessageType, mods ...dhcpv4.Modifier) []byte {
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithTransactionID(g.xid()), dhcpv4.WithHwAddr(mac),
		dhcpv4.WithMessageType(t)}, mods...)...)
	if err != nil {
		panic(err)
	}
	b := m.ToBytes()
	if b[240] != 53 { // the encoder sorts options by code; move 53 to the front
		opts := rawOptions(b[240:])
		b = append(b[:240:240], 53, 1, byte(t))
		for _, o := range opts {
			if o[0] != 53 {
				b = append(b, o...)
			}
		}
		b = append(b, 255)
	}
	return b
}

// flip XORs 1 to 8 random bytes with random non-zero values.
func (g *Hostile) flip(b []byte) []byte {
	for range 1 + g.rng.IntN(8) {
		b[g.rng.IntN(len(b))] ^= byte(1 + g.rng.UintN(255))
	}
	return b
}

// badLength gives one option a wrong length: zero, one short or long of its
// value, or past the end of the packet; or drops the end option.
func (g *Hostile) badLength(b []byte) []byte {
	opts := rawOptions(b[240:])
	if len(opts) == 0 || g.rng.IntN(6) == 0 {
		return b[:len(b)-1] // no end option
	}
	i := g.rng.IntN(len(opts))
	n := int(opts[i][1])
	lengths := []int{0, max(n-1, 0), n + 1, 255, n + 200}
	opts[i][1] = byte(min(lengths[g.rng.IntN(len(lengths))], 255))
	out := b[:240:240]
	for _, o := range opts {
		out = append(out, o...)
	}
	return append(out, 255)
}

// duplicate sends options twice, which decoders concatenate (RFC 3396):
// two message types, two requested or server addresses, two client ids.
func (g *Hostile) duplicate(mac net.HardwareAddr) []byte {
	b := g.build(mac, dhcpv4.MessageTypeRequest)
	b = b[:len(b)-1] // drop the end option
	ip, sid := g.inPool().As4(), g.cfg.Server.As4()
	extra := [][]byte{
		{53, 1, byte(dhcpv4.MessageTypeDiscover)},
		append([]byte{50, 4}, ip[:]...), append([]byte{50, 4}, ip[:]...),
		append([]byte{54, 4}, sid[:]...), append([]byte{54, 4}, sid[:]...),
		append([]byte{61, 7, 1}, mac...), append([]byte{61, 7, 1}, mac...),
	}
	g.rng.Shuffle(len(extra), func(i, j int) { extra[i], extra[j] = extra[j], extra[i] })
	for _, o := range extra[:1+g.rng.IntN(len(extra))] {
		b = append(b, o...)
	}
	return append(b, 255)
}

// rawOptions splits well-formed encoded options (no pad) up to the end
// option into code-length-value slices, each a copy.
func rawOptions(b []byte) [][]byte {
	var out [][]byte
	for i := 0; i+1 < len(b) && b[i] != 255; i += 2 + int(b[i+1]) {
		end := min(i+2+int(b[i+1]), len(b))
		out = append(out, append([]byte(nil), b[i:end]...))
	}
	return out
}

func TestHostile(t *testing.T) {
	cfg := HostileConfig{Server: netip.MustParseAddr("10.77.0.1"), Subnet: netip.MustParsePrefix("10.77.0.0/24"),
		Start: netip.MustParseAddr("10.77.0.100"), End: netip.MustParseAddr("10.77.0.199")}
	a, kinds := NewHostile(1, cfg).Burst(2000)
	b, _ := NewHostile(1, cfg).Burst(2000)
	c, _ := NewHostile(2, cfg).Burst(2000)
	if !slices.EqualFunc(a, b, bytes.Equal) {
		t.Error("the same seed gave different packets")
	}
	if slices.EqualFunc(a, c, bytes.Equal) {
		t.Error("two seeds gave the same packets")
	}
	for _, k := range HostileKinds {
		if kinds[k] == 0 {
			t.Errorf("no packet of kind %s in 2000", k)
		}
	}
	g := NewHostile(3, cfg)
	for range 2000 {
		kind, p := g.Next()
		m, err := dhcpv4.FromBytes(p)
		switch kind {
		case "hlen":
			if err != nil || len(m.ClientHWAddr) == 6 {
				t.Errorf("%s packet: decoded %v, hlen %d; want it decoded with hlen other than 6", kind, err, p[2])
			}
		case "chaddr":
			if err != nil || (m.ClientHWAddr[0]&1 == 0 && !bytes.Equal(m.ClientHWAddr, make([]byte, 6))) {
				t.Errorf("%s packet: decoded %v, chaddr %s; want zero, broadcast or multicast", kind, err, m.ClientHWAddr)
			}
		case "request-in-pool":
			ip := addr(m.RequestedIPAddress())
			if !ip.IsValid() {
				ip = addr(m.ClientIPAddr)
			}
			if err != nil || m.MessageType() != dhcpv4.MessageTypeRequest || ip.Less(cfg.Start) || cfg.End.Less(ip) {
				t.Errorf("%s packet: decoded %v, %s for %s; want a REQUEST in %s-%s", kind, err, m.MessageType(), ip, cfg.Start, cfg.End)
			}
		}
	}
}
