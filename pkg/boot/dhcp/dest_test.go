package dhcp

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

func TestDestination(t *testing.T) {
	hw := net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0x0a}
	msg := func(t dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
		m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(t)}, mods...)...)
		if err != nil {
			panic(err)
		}
		return m
	}
	yi := dhcpv4.WithYourIP(net.IPv4(10, 77, 0, 100))
	in67 := Meta{Port: 67, Peer: netip.MustParseAddrPort("0.0.0.0:68")}
	tests := map[string]struct {
		req, reply *dhcpv4.DHCPv4
		in         Meta
		want       Dest
	}{
		"relayed offer goes to the relay": {
			req:   msg(dhcpv4.MessageTypeDiscover, dhcpv4.WithGatewayIP(net.IPv4(10, 88, 0, 1)), dhcpv4.WithBroadcast(true)),
			reply: msg(dhcpv4.MessageTypeOffer, yi), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("10.88.0.1:67")}},
		"relayed nak goes to the relay": {
			req:   msg(dhcpv4.MessageTypeRequest, dhcpv4.WithGatewayIP(net.IPv4(10, 88, 0, 1))),
			reply: msg(dhcpv4.MessageTypeNak), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("10.88.0.1:67")}},
		"nak is broadcast even to a client with ciaddr": {
			req:   msg(dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.IPv4(10, 77, 0, 100))),
			reply: msg(dhcpv4.MessageTypeNak), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("255.255.255.255:68")}},
		"renewal is unicast to ciaddr": {
			req:   msg(dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.IPv4(10, 77, 0, 100))),
			reply: msg(dhcpv4.MessageTypeAck, yi), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("10.77.0.100:68")}},
		"rebinding with broadcast bit still goes to ciaddr": {
			req:   msg(dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.IPv4(10, 77, 0, 100)), dhcpv4.WithBroadcast(true)),
			reply: msg(dhcpv4.MessageTypeAck, yi), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("10.77.0.100:68")}},
		"inform is unicast to ciaddr": {
			req:   msg(dhcpv4.MessageTypeInform, dhcpv4.WithClientIP(net.IPv4(10, 77, 0, 33))),
			reply: msg(dhcpv4.MessageTypeAck), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("10.77.0.33:68")}},
		"broadcast bit": {
			req:   msg(dhcpv4.MessageTypeDiscover, dhcpv4.WithBroadcast(true)),
			reply: msg(dhcpv4.MessageTypeOffer, yi), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("255.255.255.255:68")}},
		"no broadcast bit: link-layer unicast to yiaddr": {
			req:   msg(dhcpv4.MessageTypeDiscover),
			reply: msg(dhcpv4.MessageTypeOffer, yi), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("10.77.0.100:68"), HW: hw}},
		"proxy offer without address is broadcast": {
			req:   msg(dhcpv4.MessageTypeDiscover),
			reply: msg(dhcpv4.MessageTypeOffer), in: in67,
			want: Dest{Addr: netip.MustParseAddrPort("255.255.255.255:68")}},
		"pxe boot server request is answered to its source": {
			req:   msg(dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.IPv4(192, 168, 5, 20))),
			reply: msg(dhcpv4.MessageTypeAck), in: Meta{Port: PXEPort, Peer: netip.MustParseAddrPort("192.168.5.20:4011")},
			want: Dest{Addr: netip.MustParseAddrPort("192.168.5.20:4011")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Destination(tc.req, tc.reply, tc.in)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
				t.Errorf("Destination (-want +got):\n%s", d)
			}
		})
	}
}
