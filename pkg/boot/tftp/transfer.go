package tftp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/pin/tftp/v3/netascii"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
)

// job is one read request, from its arrival to the end of its transfer.
type job struct {
	client  netip.AddrPort
	ifIndex int // interface the request came in on; 0: unknown
	req     request
	since   time.Time // arrival
	// While it waits for a slot (see slots): how often the client has
	// sent it, and when it last did.
	asked int
	last  time.Time
}

// readAhead is how much of the file a transfer reads at once.
const readAhead = 64 << 10

// errNoACK ends a transfer whose client never acknowledged its first packet.
var errNoACK = errors.New("no ACK of the first packet")

// clientAbort is an ERROR the client sent, ending the transfer.
type clientAbort struct {
	code uint16
	msg  string
}

func (e *clientAbort) Error() string { return fmt.Sprintf("client sent error %d: %s", e.code, e.msg) }

// firstSends is how often the first packet of a transfer (an OACK, or DATA
// 1 of a request without options) is sent before the client has answered:
// at 0 and at FirstACKWait/2.
//
// The amplification bound: a read request that is never acknowledged makes
// the server send at most firstSends = 2 datagrams of at most 516 bytes of
// UDP payload each (DATA 1 at the RFC 1350 block size of 512, or an OACK of
// at most 56 bytes), 1032 bytes in all, and nothing more: no ERROR when the
// wait ends, nothing at all for a request refused or dropped for want of a
// slot, and a single datagram if the address answers with ICMP port
// unreachable (the transfer socket is connected, so that ends the wait).
// Blocks larger than 512 bytes, and windows of more than one block, go out
// only after the client has acknowledged the OACK sent from the transfer's
// new port, which a sender of spoofed requests does not see. A refused file or write costs one
// ERROR of at most 21 bytes. With MaxPerClient, requests forged in the name
// of one silent address draw at most MaxPerClient x 1032 bytes per
// FirstACKWait towards it (4 x 1032 B / 2 s, about 2 KB/s, by default).
const firstSends = 2

// sender sends one file in lock step (RFC 1350 section 2): a block, then
// its ACK, resending on timeout and never on a duplicate ACK (RFC 1123
// 4.2.3.1, the Sorcerer's Apprentice bug).
type sender struct {
	conn  *net.UDPConn    // connected to the client's address and port
	first []time.Duration // wait after each send of the first packet
	rest  []time.Duration // wait after each send of any later packet
	in    []byte
	acked bool // the client has acknowledged a packet
}

func newSender(conn *net.UDPConn, firstWait, timeout time.Duration, retries int) *sender {
	x := &sender{conn: conn, in: make([]byte, 1024)}
	for i := range firstSends {
		x.first = append(x.first, firstWait*time.Duration(i+1)/firstSends-firstWait*time.Duration(i)/firstSends)
	}
	for range retries + 1 {
		x.rest = append(x.rest, timeout)
	}
	return x
}

// send sends r in blocks of blksize, after oack if there is one, and
// returns the file bytes the client acknowledged.
func (x *sender) send(r io.Reader, blksize int, oack []byte) (n int64, err error) {
	if oack != nil {
		if err := x.exchange(oack, 0); err != nil {
			return 0, err
		}
	}
	buf := make([]byte, 4+blksize)
	binary.BigEndian.PutUint16(buf, opDATA)
	// The block number wraps from 65535 to 0 in files of more than 65535
	// blocks, which curl, tftp-hpa, atftp and iPXE all accept.
	for block := uint16(1); ; block++ {
		l, err := io.ReadFull(r, buf[4:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			x.conn.Write(appendError(nil, codeUndefined, "read error"))
			return n, fmt.Errorf("reading block %d: %w", block, err)
		}
		binary.BigEndian.PutUint16(buf[2:], block)
		if err := x.exchange(buf[:4+l], block); err != nil {
			return n, err
		}
		n += int64(l)
		if l < blksize {
			return n, nil
		}
	}
}

// exchange sends pkt until the client acknowledges block, waiting after
// each send as x.first (nothing acknowledged yet) or x.rest says.
func (x *sender) exchange(pkt []byte, block uint16) error {
	waits := x.rest
	if !x.acked {
		waits = x.first
	}
	for _, w := range waits {
		if _, err := x.conn.Write(pkt); err != nil && !refusedQueued(x.conn, err) {
			return fmt.Errorf("sending block %d: %w", block, err)
		}
		ok, err := x.await(block, time.Now().Add(w))
		if ok || err != nil {
			return err
		}
	}
	if !x.acked {
		return errNoACK
	}
	return fmt.Errorf("no ACK of block %d after %d sends", block, len(waits))
}

// await reads until the ACK of block, an ERROR, or deadline (ok false, err
// nil). Duplicate ACKs and stray packets neither resend nor extend the wait.
func (x *sender) await(block uint16, deadline time.Time) (ok bool, err error) {
	if err := x.conn.SetReadDeadline(deadline); err != nil {
		return false, fmt.Errorf("waiting for ACK %d: %w", block, err)
	}
	for {
		n, err := read(x.conn, x.in, deadline)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("waiting for ACK %d: %w", block, err)
		}
		switch r := parseReply(x.in[:n]); {
		case r.op == opACK && r.block == block:
			x.acked = true
			return true, nil
		case r.op == opERROR:
			return false, &clientAbort{r.code, r.msg}
		}
	}
}

// transfer serves one admitted request and counts how it ended.
func (s *Server) transfer(j *job) {
	start := s.cfg.Now()
	log := s.log.With("client", j.client.String(), "file", j.req.name)
	conn, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.addr.Addr(), 0)), net.UDPAddrFromAddrPort(j.client))
	if err != nil {
		s.count("error")
		log.Warn("tftp: opening a transfer socket", "err", err)
		return
	}
	defer conn.Close()
	f, err := s.cfg.Files.Open(j.req.name)
	if err != nil {
		s.count("refused")
		if errors.Is(err, bootfiles.ErrChanged) {
			log.Error("tftp refused a changed first stage", "err", err)
		} else {
			log.Info("tftp refused", "err", err)
		}
		conn.Write(clientError(err))
		return
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	octet := !strings.EqualFold(j.req.mode, "netascii")
	neg := negotiate(j.req.options, size, octet, s.blockLimit(j.ifIndex))
	// One read of the file per readAhead bytes, not one per block: at
	// blksize 512 the per-block read was an eighth of the server's CPU
	// (BenchmarkIntegrationTFTP32MiB's profile), beside the send and the
	// receive every block needs.
	var r io.Reader = bufio.NewReaderSize(f, readAhead)
	if !octet {
		r = netascii.ToReader(r)
	}
	var oack []byte
	if len(neg.oack) > 0 {
		oack = appendOACK(nil, neg.oack)
	}
	x := newSender(conn, s.cfg.FirstACKWait, s.cfg.Timeout, s.cfg.Retries)
	log = log.With("blksize", neg.blksize, "window", max(neg.window, 1))
	var n int64
	if neg.window > 1 {
		n, err = x.sendWindows(r, neg.blksize, neg.window, oack)
	} else {
		n, err = x.send(r, neg.blksize, oack)
	}
	s.report(log, n, s.cfg.Now().Sub(start), x.acked, err)
}

// report counts and logs how a transfer ended.
func (s *Server) report(log *slog.Logger, n int64, d time.Duration, acked bool, err error) {
	s.m.bytes.Add(float64(n))
	var abort *clientAbort
	switch {
	case err == nil:
		s.count("ok")
		s.m.duration.Observe(d.Seconds())
		log.Info("tftp sent", "bytes", n, "duration", d)
	case errors.As(err, &abort) && n == 0:
		// The client stopped after the OACK. EDK2 does this on purpose: it
		// asks tsize, aborts (error 8), then asks again. Normal; debug only.
		s.count("aborted")
		log.Debug("tftp aborted by client after options", "err", err, "duration", d)
	case !acked:
		// Never acknowledged: a lost client, or a request from a spoofed
		// address. Debug only: a flood of them must not flood the log.
		s.count("no_ack")
		log.Debug("tftp dropped: first packet never acknowledged", "err", err, "duration", d)
	default:
		s.count("error")
		log.Warn("tftp transfer failed", "bytes", n, "duration", d, "err", err)
	}
}

// blockLimit is the largest blksize for a request that came in on ifIndex:
// MaxBlockSize, and no more than the interface's MTU less the IP and UDP
// headers, so that no block is IP-fragmented on the boot network. Unknown
// interface: 512.
func (s *Server) blockLimit(ifIndex int) int {
	if ifIndex == 0 {
		return defaultBlock
	}
	ifi, err := net.InterfaceByIndex(ifIndex)
	if err != nil {
		return defaultBlock
	}
	hdr := 28 // IPv4 20 + UDP 8
	if !s.addr.Addr().Unmap().Is4() {
		hdr = 48 // IPv6 40 + UDP 8
	}
	return max(defaultBlock, min(s.cfg.MaxBlockSize, ifi.MTU-hdr))
}
