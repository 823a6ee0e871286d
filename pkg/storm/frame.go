package storm

import (
	"encoding/binary"
	"net"
)

// dhcpFrame wraps a DHCP message from a client that has no address yet in
// the Ethernet frame its NIC sends: from its own MAC to the broadcast MAC,
// from 0.0.0.0:68 to 255.255.255.255:67 (RFC 2131 §4.1). The harness sends
// it through a packet socket, so each simulated machine's requests leave
// with its own source MAC and source address 0.0.0.0, as firmware's do; a
// UDP socket would send them all from the interface's MAC and address.
func dhcpFrame(src net.HardwareAddr, payload []byte) []byte {
	const ethLen, ipLen, udpLen = 14, 20, 8
	f := make([]byte, ethLen+ipLen+udpLen+len(payload))
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], 0x0800) // IPv4

	ip := f[ethLen : ethLen+ipLen]
	ip[0] = 0x45 // version 4, header 5 words
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen+udpLen+len(payload)))
	ip[8] = 64 // TTL
	ip[9] = 17 // UDP
	// source 0.0.0.0 (bytes 12-15 stay zero), destination 255.255.255.255
	copy(ip[16:20], []byte{0xff, 0xff, 0xff, 0xff})
	binary.BigEndian.PutUint16(ip[10:12], checksum(ip, 0))

	udp := f[ethLen+ipLen:]
	binary.BigEndian.PutUint16(udp[0:2], 68)
	binary.BigEndian.PutUint16(udp[2:4], 67)
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpLen+len(payload)))
	copy(udp[udpLen:], payload)
	// The UDP checksum covers a pseudo-header: source, destination,
	// protocol and UDP length.
	pseudo := uint32(0xffff) + 0xffff + 17 + uint32(udpLen+len(payload))
	sum := checksum(udp, pseudo)
	if sum == 0 {
		sum = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(udp[6:8], sum)
	return f
}

// checksum is the Internet checksum (RFC 1071) of b, starting from the
// partial sum initial.
func checksum(b []byte, initial uint32) uint16 {
	sum := initial
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
