package netup

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Configure adds the lease's address to interface index and, when the lease
// has a router, a default route through it, with rtnetlink messages.
// Existing identical entries are not an error (EEXIST).
func Configure(index int, l Lease) error {
	ones, _ := l.Addr.Mask.Size()
	if err := rtnl(unix.RTM_NEWADDR, AddrMsg(index, l.Addr.IP, ones)); err != nil {
		return fmt.Errorf("adding %s to %s: %w", l.Addr.String(), l.Iface, err)
	}
	if l.Router == nil {
		return nil
	}
	if err := rtnl(unix.RTM_NEWROUTE, DefaultRouteMsg(index, l.Router)); err != nil {
		return fmt.Errorf("adding default route via %s on %s: %w", l.Router, l.Iface, err)
	}
	return nil
}

// AddrMsg is the RTM_NEWADDR payload: ifaddrmsg + IFA_LOCAL, IFA_ADDRESS and
// IFA_BROADCAST for an IPv4 address with prefix length plen.
func AddrMsg(index int, ip net.IP, plen int) []byte {
	ip4 := ip.To4()
	b := []byte{unix.AF_INET, byte(plen), 0, unix.RT_SCOPE_UNIVERSE, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	b = appendAttr(b, unix.IFA_LOCAL, ip4)
	b = appendAttr(b, unix.IFA_ADDRESS, ip4)
	if plen < 31 {
		bc := make(net.IP, 4)
		mask := net.CIDRMask(plen, 32)
		for i := range bc {
			bc[i] = ip4[i] | ^mask[i]
		}
		b = appendAttr(b, unix.IFA_BROADCAST, bc)
	}
	return b
}

// DefaultRouteMsg is the RTM_NEWROUTE payload of 0.0.0.0/0 via gw out of
// interface index, in the main table.
func DefaultRouteMsg(index int, gw net.IP) []byte {
	b := []byte{unix.AF_INET, 0, 0, 0, unix.RT_TABLE_MAIN, unix.RTPROT_BOOT, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST, 0, 0, 0, 0}
	b = appendAttr(b, unix.RTA_GATEWAY, gw.To4())
	oif := make([]byte, 4)
	binary.NativeEndian.PutUint32(oif, uint32(index))
	return appendAttr(b, unix.RTA_OIF, oif)
}

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	h := make([]byte, unix.SizeofRtAttr)
	binary.NativeEndian.PutUint16(h[0:], uint16(l))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(b, h...)
	b = append(b, data...)
	for len(b)%4 != 0 { // NLA_ALIGNTO
		b = append(b, 0)
	}
	return b
}

// rtnl sends one request with NLM_F_CREATE|NLM_F_EXCL|NLM_F_ACK and reads
// the kernel's answer; EEXIST counts as success.
func rtnl(typ uint16, payload []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink bind: %w", err)
	}
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(payload)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], 1) // seq
	msg = append(msg, payload...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("netlink receive: %w", err)
	}
	return ackError(buf[:n])
}

// ackError reads an NLMSG_ERROR answer: errno 0 is the ACK.
func ackError(b []byte) error {
	if len(b) < unix.SizeofNlMsghdr+4 {
		return fmt.Errorf("netlink: short answer of %d bytes", len(b))
	}
	if typ := binary.NativeEndian.Uint16(b[4:]); typ != unix.NLMSG_ERROR {
		return fmt.Errorf("netlink: answer type %d, expected NLMSG_ERROR (%d)", typ, unix.NLMSG_ERROR)
	}
	errno := -int32(binary.NativeEndian.Uint32(b[unix.SizeofNlMsghdr:]))
	if errno == 0 || unix.Errno(errno) == unix.EEXIST {
		return nil
	}
	return unix.Errno(errno)
}
