package storm

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestChecksum: RFC 1071's worked example (§3) and an odd length.
func TestChecksum(t *testing.T) {
	tests := map[string]struct {
		b    []byte
		want uint16
	}{
		"RFC 1071 example": {[]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, ^uint16(0xddf2)},
		"odd length":       {[]byte{0x01}, ^uint16(0x0100)},
		"empty":            {nil, 0xffff},
	}
	for name, tc := range tests {
		if got := checksum(tc.b, 0); got != tc.want {
			t.Errorf("%s: checksum = %#04x, want %#04x", name, got, tc.want)
		}
	}
}

// TestDHCPFrame: the frame a machine sends is what a NIC without an
// address sends: its MAC to broadcast, 0.0.0.0:68 to 255.255.255.255:67,
// with IP and UDP checksums that verify (a checksum over the header with
// its checksum in place sums to zero).
func TestDHCPFrame(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0x53, 0, 0, 1, 2}
	payload := []byte("a DHCP message of odd length")
	f := dhcpFrame(mac, payload)
	if len(f) != 14+20+8+len(payload) {
		t.Fatalf("frame of %d bytes, want %d", len(f), 14+20+8+len(payload))
	}
	if net.HardwareAddr(f[0:6]).String() != "ff:ff:ff:ff:ff:ff" || net.HardwareAddr(f[6:12]).String() != mac.String() ||
		binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		t.Errorf("Ethernet header % x: want broadcast, from %s, IPv4", f[:14], mac)
	}
	ip := f[14:34]
	if src, dst := netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])); src.String() != "0.0.0.0" || dst.String() != "255.255.255.255" || ip[9] != 17 {
		t.Errorf("IP header: %s -> %s protocol %d, want 0.0.0.0 -> 255.255.255.255 UDP", src, dst, ip[9])
	}
	if c := checksum(ip, 0); c != 0 {
		t.Errorf("IP header checksum does not verify: %#04x", c)
	}
	if int(binary.BigEndian.Uint16(ip[2:])) != 20+8+len(payload) {
		t.Errorf("IP total length %d", binary.BigEndian.Uint16(ip[2:]))
	}
	udp := f[34:]
	if binary.BigEndian.Uint16(udp) != 68 || binary.BigEndian.Uint16(udp[2:]) != 67 || int(binary.BigEndian.Uint16(udp[4:])) != 8+len(payload) {
		t.Errorf("UDP header % x: want 68 -> 67, length %d", udp[:8], 8+len(payload))
	}
	pseudo := uint32(0xffff) + 0xffff + 17 + uint32(len(udp))
	if c := checksum(udp, pseudo); c != 0 {
		t.Errorf("UDP checksum does not verify: %#04x", c)
	}
	if string(udp[8:]) != string(payload) {
		t.Errorf("payload %q", udp[8:])
	}
}

// TestAddrMsg: the RTM_NEWADDR request for 10.77.16.9/32, read back field
// by field, and the kernel's answers.
func TestAddrMsg(t *testing.T) {
	b, err := newAddrMsg(7, 3, netip.MustParseAddr("10.77.16.9"))
	if err != nil {
		t.Fatal(err)
	}
	ne := binary.NativeEndian
	if int(ne.Uint32(b)) != len(b) || ne.Uint16(b[4:]) != unix.RTM_NEWADDR || ne.Uint32(b[8:]) != 7 {
		t.Errorf("nlmsghdr: length %d of %d, type %d, seq %d", ne.Uint32(b), len(b), ne.Uint16(b[4:]), ne.Uint32(b[8:]))
	}
	if flags := ne.Uint16(b[6:]); flags&unix.NLM_F_ACK == 0 || flags&unix.NLM_F_CREATE == 0 {
		t.Errorf("flags %#x: want an ACK and create", flags)
	}
	ifa := b[16:24]
	if ifa[0] != unix.AF_INET || ifa[1] != 32 || ne.Uint32(ifa[4:]) != 3 {
		t.Errorf("ifaddrmsg % x: want AF_INET, /32, index 3", ifa)
	}
	for i, typ := range []uint16{unix.IFA_LOCAL, unix.IFA_ADDRESS} {
		a := b[24+8*i : 32+8*i]
		if ne.Uint16(a) != 8 || ne.Uint16(a[2:]) != typ || netip.AddrFrom4([4]byte(a[4:8])).String() != "10.77.16.9" {
			t.Errorf("attribute %d: % x", i, a)
		}
	}
	if _, err := newAddrMsg(1, 3, netip.MustParseAddr("fd00::1")); err == nil {
		t.Error("an IPv6 address was accepted")
	}

	ack := func(seq uint32, code int32) []byte {
		m := make([]byte, 36)
		ne.PutUint32(m, 36)
		ne.PutUint16(m[4:], unix.NLMSG_ERROR)
		ne.PutUint32(m[8:], seq)
		ne.PutUint32(m[16:], uint32(code))
		return m
	}
	if seq, errno, err := parseAck(ack(7, 0)); seq != 7 || errno != 0 || err != nil {
		t.Errorf("ack: %d %v %v", seq, errno, err)
	}
	if _, errno, _ := parseAck(ack(7, -int32(unix.EEXIST))); errno != unix.EEXIST {
		t.Errorf("EEXIST answer read as %v", errno)
	}
	if _, _, err := parseAck([]byte{1, 2, 3}); err == nil {
		t.Error("a short answer was accepted")
	}
}
