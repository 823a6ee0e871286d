package storm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// addrs puts each machine's leased address on the client interface, as the
// machine's own stack would configure it after its ACK: a /32 (the
// interface's own address carries the route to the server), added with one
// rtnetlink message. Adding a leased address is what firmware does, keeps
// each machine's traffic from its own address (the server ties boot
// credentials to the leased address), makes the namespace answer the
// server's ARP for it, and costs tens of microseconds per machine: it
// scales to thousands, where running `ip addr add` would fork hundreds of
// processes beside the server under test. IP_FREEBIND alone would send
// from the address but drop the answers (the kernel would not own it).
type addrs struct {
	ifindex int
	mu      sync.Mutex
	fd      int
	seq     uint32
}

func newAddrs(ifindex int) (*addrs, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("rtnetlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("rtnetlink bind: %w", err)
	}
	return &addrs{ifindex: ifindex, fd: fd}, nil
}

func (a *addrs) Close() error { return unix.Close(a.fd) }

// add configures ip/32 on the interface; adding it again is no error (iPXE
// is leased the firmware's address a second time).
func (a *addrs) add(ip netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	msg, err := newAddrMsg(a.seq, a.ifindex, ip)
	if err != nil {
		return err
	}
	if err := unix.Sendto(a.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("adding %s/32: %w", ip, err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(a.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("adding %s/32: reading the answer: %w", ip, err)
		}
		seq, errno, err := parseAck(buf[:n])
		if err != nil {
			return fmt.Errorf("adding %s/32: %w", ip, err)
		}
		if seq != a.seq {
			continue // an answer to an earlier request that timed out
		}
		if errno != 0 && !errors.Is(errno, unix.EEXIST) {
			return fmt.Errorf("adding %s/32: %w", ip, errno)
		}
		return nil
	}
}

// newAddrMsg is the RTM_NEWADDR request for ip/32 on ifindex: nlmsghdr,
// ifaddrmsg, then IFA_LOCAL and IFA_ADDRESS (rtnetlink(7)).
func newAddrMsg(seq uint32, ifindex int, ip netip.Addr) ([]byte, error) {
	if !ip.Is4() {
		return nil, fmt.Errorf("address %s: expected IPv4", ip)
	}
	const hdr, ifa, attr = unix.SizeofNlMsghdr, unix.SizeofIfAddrmsg, 8
	b := make([]byte, hdr+ifa+2*attr)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.RTM_NEWADDR)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	ne.PutUint32(b[8:], seq)
	b[hdr] = unix.AF_INET
	b[hdr+1] = 32 // prefix length
	ne.PutUint32(b[hdr+4:], uint32(ifindex))
	a4 := ip.As4()
	for i, typ := range []uint16{unix.IFA_LOCAL, unix.IFA_ADDRESS} {
		o := hdr + ifa + i*attr
		ne.PutUint16(b[o:], attr)
		ne.PutUint16(b[o+2:], typ)
		copy(b[o+4:], a4[:])
	}
	return b, nil
}

// parseAck reads the NLMSG_ERROR answer to a request: its sequence number
// and the error (0: done).
func parseAck(b []byte) (seq uint32, errno unix.Errno, err error) {
	ne := binary.NativeEndian
	if len(b) < unix.SizeofNlMsghdr+4 {
		return 0, 0, fmt.Errorf("rtnetlink answer of %d bytes, expected an NLMSG_ERROR of at least %d", len(b), unix.SizeofNlMsghdr+4)
	}
	if typ := ne.Uint16(b[4:]); typ != unix.NLMSG_ERROR {
		return 0, 0, fmt.Errorf("rtnetlink answer of type %d, expected NLMSG_ERROR (%d)", typ, unix.NLMSG_ERROR)
	}
	code := int32(ne.Uint32(b[unix.SizeofNlMsghdr:]))
	return ne.Uint32(b[8:]), unix.Errno(-code), nil
}
