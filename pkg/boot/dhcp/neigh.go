package dhcp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RFC 2131 §4.1 wants an OFFER or ACK to a client that has no address yet
// and did not ask for broadcast unicast to its hardware address and yiaddr.
// The kernel cannot resolve yiaddr by ARP (the client does not answer for
// it yet), so, as dnsmasq does, the server writes the ARP entry itself
// (SIOCSARP) and then sends an ordinary UDP unicast. It needs CAP_NET_ADMIN;
// without it replies are broadcast, which every client accepts.

// arpreq is struct arpreq of <linux/if_arp.h>.
type arpreq struct {
	pa      [16]byte // struct sockaddr_in: the protocol address
	ha      [16]byte // struct sockaddr: sa_family ARPHRD_ETHER, then the MAC
	flags   int32
	netmask [16]byte
	dev     [unix.IFNAMSIZ]byte
}

// setNeighbor writes (or refreshes) the ARP entry ip -> hw on dev, through
// the socket c (any AF_INET socket will do).
func setNeighbor(c *net.UDPConn, dev string, ip netip.Addr, hw net.HardwareAddr) error {
	if !ip.Is4() || len(hw) != 6 || len(dev) >= unix.IFNAMSIZ {
		return fmt.Errorf("setting ARP entry %s -> %s on %s: want an IPv4 address, a 6-byte MAC and an interface name", ip, hw, dev)
	}
	var r arpreq
	binary.NativeEndian.PutUint16(r.pa[0:], unix.AF_INET)
	a := ip.As4()
	copy(r.pa[4:8], a[:])
	binary.NativeEndian.PutUint16(r.ha[0:], unix.ARPHRD_ETHER)
	copy(r.ha[2:8], hw)
	r.flags = atfCom // complete, not permanent: it ages out like a learned entry
	copy(r.dev[:], dev)
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("setting ARP entry %s -> %s on %s: %w", ip, hw, dev, err)
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.SIOCSARP, uintptr(unsafe.Pointer(&r)))
		if errno != 0 {
			ierr = errno
		}
	}); err != nil {
		ierr = err
	}
	if ierr != nil {
		return fmt.Errorf("setting ARP entry %s -> %s on %s: %w", ip, hw, dev, ierr)
	}
	return nil
}

// atfCom is ATF_COM of <linux/if_arp.h>: the entry is complete.
const atfCom = 0x02
