package dhcp

import (
	"net"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Dest is where a reply is sent.
type Dest struct {
	Addr netip.AddrPort
	// HW is set when the reply should be unicast at the link layer to a
	// client that has no address yet (Addr is then yiaddr:68). Server
	// writes the ARP entry yiaddr -> HW first (neigh.go), or broadcasts
	// when it may not (no CAP_NET_ADMIN).
	HW net.HardwareAddr
}

var broadcast68 = netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), dhcpv4.ClientPort)

// Destination decides where reply to req goes, following RFC 2131 §4.1
// ("If the 'giaddr' field in a DHCP message from a client is non-zero ...").
func Destination(req, reply *dhcpv4.DHCPv4, in Meta) Dest {
	// A PXE boot server request to port 4011 is answered to the address and
	// port it came from (PXE 2.1 §2.2.2: the client may use port 4011 or 68).
	if in.Port == PXEPort && in.Peer.IsValid() {
		return Dest{Addr: in.Peer}
	}
	// §4.1: giaddr set: send to the relay's server port, NAK included; the
	// relay delivers it (broadcast bit in a NAK tells it to broadcast).
	if gi := addr(req.GatewayIPAddr); gi.IsValid() && !gi.IsUnspecified() {
		return Dest{Addr: netip.AddrPortFrom(gi, dhcpv4.ServerPort)}
	}
	// §4.1: "In all cases, when 'giaddr' is zero, the server broadcasts any
	// DHCPNAK messages to 0xffffffff."
	if reply.MessageType() == dhcpv4.MessageTypeNak {
		return Dest{Addr: broadcast68}
	}
	// §4.1: ciaddr set (RENEWING, REBINDING, INFORM): unicast to ciaddr.
	if ci := addr(req.ClientIPAddr); ci.IsValid() && !ci.IsUnspecified() {
		return Dest{Addr: netip.AddrPortFrom(ci, dhcpv4.ClientPort)}
	}
	// §4.1: broadcast bit set: broadcast to 0xffffffff.
	if req.IsBroadcast() {
		return Dest{Addr: broadcast68}
	}
	// §4.1: otherwise unicast to the client's hardware address and yiaddr.
	if yi := addr(reply.YourIPAddr); yi.IsValid() && !yi.IsUnspecified() {
		return Dest{Addr: netip.AddrPortFrom(yi, dhcpv4.ClientPort), HW: req.ClientHWAddr}
	}
	// No address to unicast to (a proxyDHCP offer): broadcast.
	return Dest{Addr: broadcast68}
}
