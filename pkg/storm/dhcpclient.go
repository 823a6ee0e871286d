package storm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// dhcpClient is the DHCP side of every simulated machine on one interface:
// requests leave through a packet socket, each frame from its machine's own
// MAC and from 0.0.0.0 (dhcpFrame); replies, broadcast because every
// request sets the broadcast flag, arrive on one UDP socket on port 68 and
// are handed to the exchange waiting for their transaction ID and MAC.
type dhcpClient struct {
	ifindex int
	send    int // AF_PACKET socket, send only
	recv    *net.UDPConn

	mu   sync.Mutex
	wait map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4
}

func newDHCPClient(iface string) (*dhcpClient, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("dhcp client: interface %s: %w", iface, err)
	}
	// Protocol 0: the socket receives nothing, it only sends.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dhcp client: packet socket (needs CAP_NET_RAW): %w", err)
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = errors.Join(
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1),
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1),
				unix.BindToDevice(int(fd), iface),
				// Hundreds of replies can arrive in one burst.
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20))
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:68")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dhcp client: listening on %s port 68: %w", iface, err)
	}
	c := &dhcpClient{ifindex: ifi.Index, send: fd, recv: pc.(*net.UDPConn), wait: map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4{}}
	go c.read()
	return c, nil
}

func (c *dhcpClient) Close() error {
	return errors.Join(c.recv.Close(), unix.Close(c.send))
}

// read hands each reply to the exchange waiting for its transaction.
func (c *dhcpClient) read() {
	buf := make([]byte, 1500)
	for {
		n, _, err := c.recv.ReadFromUDP(buf)
		if err != nil {
			return
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || m.OpCode != dhcpv4.OpcodeBootReply {
			continue
		}
		c.mu.Lock()
		ch := c.wait[m.TransactionID]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default: // the exchange has what it needs
			}
		}
	}
}

// transmit sends m as mac's frame.
func (c *dhcpClient) transmit(mac net.HardwareAddr, m *dhcpv4.DHCPv4) error {
	to := &unix.SockaddrLinklayer{Ifindex: c.ifindex, Halen: 6, Protocol: htons(unix.ETH_P_IP)}
	copy(to.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	return unix.Sendto(c.send, dhcpFrame(mac, m.ToBytes()), 0, to)
}

// dhcpResult is one DORA: the ACK and how many requests were resent, and
// how many times a NAK sent the client back to DISCOVER.
type dhcpResult struct {
	Offer, Ack *dhcpv4.DHCPv4
	Resent     int
	NAKs       int
}

// maxNAKs bounds how often a NAK sends a machine back to DISCOVER.
const maxNAKs = 4

// dora runs DISCOVER/OFFER/REQUEST/ACK for mac at stage st, resending each
// request after the waits in schedule (firmware: 4, 8, 16, 32 s). A NAK
// starts over with a new DISCOVER, as RFC 2131 §4.4.1 has a client do
// (PXE ROMs and iPXE do): two servers' offers, or one server offering one
// address twice in a burst, end that way.
func (c *dhcpClient) dora(ctx context.Context, mac net.HardwareAddr, fw Firmware, st stage, schedule []time.Duration) (dhcpResult, error) {
	var res dhcpResult
	for {
		err := c.doraOnce(ctx, mac, fw, st, schedule, &res)
		var nak *nakError
		if !errors.As(err, &nak) || res.NAKs >= maxNAKs {
			return res, err
		}
		res.NAKs++
	}
}

// nakError is a NAK's message.
type nakError struct{ server, msg string }

func (e *nakError) Error() string { return fmt.Sprintf("NAK from %s: %s", e.server, e.msg) }

func (c *dhcpClient) doraOnce(ctx context.Context, mac net.HardwareAddr, fw Firmware, st stage, schedule []time.Duration, res *dhcpResult) error {
	var xid dhcpv4.TransactionID
	if _, err := rand.Read(xid[:]); err != nil {
		return err
	}
	ch := make(chan *dhcpv4.DHCPv4, 4)
	c.mu.Lock()
	c.wait[xid] = ch
	c.mu.Unlock()
	defer func() { c.mu.Lock(); delete(c.wait, xid); c.mu.Unlock() }()

	disc, err := discover(mac, fw, st, xid)
	if err != nil {
		return err
	}
	if res.Offer, err = c.await(ctx, mac, disc, dhcpv4.MessageTypeOffer, ch, schedule, &res.Resent); err != nil {
		return fmt.Errorf("%s DISCOVER: %w", st, err)
	}
	if err := checkOffer(res.Offer, st); err != nil {
		return err
	}
	req, err := request(res.Offer, fw, st)
	if err != nil {
		return err
	}
	if res.Ack, err = c.await(ctx, mac, req, dhcpv4.MessageTypeAck, ch, schedule, &res.Resent); err != nil {
		return fmt.Errorf("%s REQUEST of %s: %w", st, res.Offer.YourIPAddr, err)
	}
	if !res.Ack.YourIPAddr.Equal(res.Offer.YourIPAddr) {
		return fmt.Errorf("%s ACK gives %s, the OFFER %s", st, res.Ack.YourIPAddr, res.Offer.YourIPAddr)
	}
	return nil
}

// errNoReply is a request that got no answer through the whole schedule.
var errNoReply = errors.New("no reply")

// await sends m and resends it after each wait of schedule until a reply of
// type want for mac arrives. A NAK ends it.
func (c *dhcpClient) await(ctx context.Context, mac net.HardwareAddr, m *dhcpv4.DHCPv4, want dhcpv4.MessageType,
	ch chan *dhcpv4.DHCPv4, schedule []time.Duration, resent *int) (*dhcpv4.DHCPv4, error) {
	for i, wait := range schedule {
		if i > 0 {
			*resent++
		}
		if err := c.transmit(mac, m); err != nil {
			return nil, fmt.Errorf("sending: %w", err)
		}
		t := time.NewTimer(wait)
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
				waiting = false
			case r := <-ch:
				if !bytes.Equal(r.ClientHWAddr, mac) {
					continue
				}
				switch r.MessageType() {
				case want:
					t.Stop()
					return r, nil
				case dhcpv4.MessageTypeNak:
					t.Stop()
					return nil, &nakError{server: fmt.Sprint(r.ServerIdentifier()), msg: r.Message()}
				}
			}
		}
	}
	return nil, fmt.Errorf("%w to %d sends (waits %v)", errNoReply, len(schedule), schedule)
}

// htons is v in network byte order, as sockaddr_ll's protocol wants it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
