package storm

import (
	"bytes"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// tftpGet is one firmware TFTP read, lock step (RFC 1350): a request with
// options, then each block acknowledged. On a timeout the client resends
// what it sent last (the request, or its last ACK), at most retries times
// in a row (RFC 1350 §2: "If a packet gets lost in the network, the
// intended recipient will timeout and may retransmit his last packet").
type tftpGet struct {
	local   netip.Addr     // the machine's address
	server  netip.AddrPort // where the request goes (port 69)
	name    string
	blksize int // asked; 512 asks for no option
	// probe is EDK2's first request: ask tsize, take the OACK, abort with
	// ERROR 8. The transfer that follows is an ordinary one.
	probe bool
	// windows asks windowsize 4 too, as EDK2 does (RFC 7440): a server that
	// grants it sends that many blocks per ACK; the client ACKs the last
	// of each window, or, on a gap or a timeout, the last block it has in
	// order, from which the server sends again.
	windows bool
	timeout time.Duration
	retries int
}

// tftpResult is what one read brought.
type tftpResult struct {
	bytes   int64
	tsize   int64
	blksize int
	window  int
	resent  int           // requests and ACKs sent again after a timeout
	wait    time.Duration // the transfer's request to the server's first answer
	from    netip.AddrPort
}

// askedWindow is EDK2's windowsize.
const askedWindow = 4

func (g tftpGet) asked() int {
	if g.windows {
		return askedWindow
	}
	return 1
}

func (g tftpGet) options() [][2]string {
	var o [][2]string
	o = append(o, [2]string{"tsize", "0"})
	if g.blksize != 512 {
		o = append(o, [2]string{"blksize", strconv.Itoa(g.blksize)})
	}
	if g.windows {
		o = append(o, [2]string{"windowsize", strconv.Itoa(askedWindow)})
	}
	return o
}

// run reads the file into h.
func (g tftpGet) run(h hash.Hash) (tftpResult, error) {
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.local, 0)))
	if err != nil {
		return tftpResult{}, fmt.Errorf("tftp socket on %s: %w", g.local, err)
	}
	defer conn.Close()
	x := &tftpXfer{g: g, conn: conn, buf: make([]byte, 65536+4)}
	if g.probe {
		if err := x.probe(); err != nil {
			return x.res, fmt.Errorf("tsize probe of %s: %w", g.name, err)
		}
	}
	if err := x.fetch(h); err != nil {
		return x.res, fmt.Errorf("reading %s from %s: %w", g.name, g.server, err)
	}
	return x.res, nil
}

// tftpXfer is one read in progress.
type tftpXfer struct {
	g    tftpGet
	conn *net.UDPConn
	buf  []byte
	res  tftpResult
	peer netip.AddrPort // the server's transfer port, once it answered
	last []byte         // what to resend on a timeout
	// A windowed transfer: the block expected next, whether a gap in the
	// current window was answered with an ACK already, and whether the
	// server was told to start again from expect (a gap or a timeout).
	window    int
	expect    uint16
	gapSent   bool
	restarted bool
}

// probe is EDK2's size query: request, OACK, ERROR 8.
func (x *tftpXfer) probe() error {
	p, err := x.first()
	if err != nil {
		return err
	}
	if p.op != tftpOACK {
		return fmt.Errorf("answer of opcode %d to a request with options, expected an OACK", p.op)
	}
	if _, _, x.res.tsize, err = oackTerms(p.opts, x.g.blksize, x.g.asked()); err != nil {
		return err
	}
	_, err = x.conn.WriteToUDPAddrPort(tftpError(8, "User aborted the transfer"), x.peer)
	return err
}

// first sends the request until the server answers from its transfer port.
func (x *tftpXfer) first() (tftpPacket, error) {
	x.peer, x.last = netip.AddrPort{}, rrq(x.g.name, x.g.options())
	if _, err := x.conn.WriteToUDPAddrPort(x.last, x.g.server); err != nil {
		return tftpPacket{}, err
	}
	return x.next(func(p tftpPacket) bool { return p.op == tftpOACK || p.op == tftpDATA && p.block == 1 })
}

// fetch runs the transfer proper.
func (x *tftpXfer) fetch(h hash.Hash) error {
	start := time.Now()
	p, err := x.first()
	if err != nil {
		return err
	}
	x.res.wait = time.Since(start)
	x.res.from, x.res.blksize, x.window = x.peer, 512, 1
	if p.op == tftpOACK {
		if x.res.blksize, x.window, x.res.tsize, err = oackTerms(p.opts, x.g.blksize, x.g.asked()); err != nil {
			return err
		}
		x.expect = 1
		if p, err = x.send(tftpAck(0), 1); err != nil {
			return err
		}
	}
	x.res.window = x.window
	for block, inWindow := uint16(1), 0; ; {
		if x.restarted { // the server starts a new window here
			inWindow, x.restarted = 0, false
		}
		if len(p.data) > x.res.blksize {
			return fmt.Errorf("DATA %d of %d bytes, more than blksize %d", block, len(p.data), x.res.blksize)
		}
		h.Write(p.data)
		x.res.bytes += int64(len(p.data))
		inWindow++
		if len(p.data) < x.res.blksize {
			// The last block: acknowledge it once (RFC 1350 §6) and stop.
			_, err := x.conn.WriteToUDPAddrPort(tftpAck(block), x.peer)
			if err == nil && x.res.tsize >= 0 && x.res.bytes != x.res.tsize {
				err = fmt.Errorf("%d bytes arrived, the OACK's tsize said %d", x.res.bytes, x.res.tsize)
			}
			return err
		}
		block++ // wraps from 65535 to 0 as servers do for large files
		x.expect, x.gapSent = block, false
		if inWindow == x.window {
			inWindow = 0
			p, err = x.send(tftpAck(block-1), block)
		} else {
			x.last = tftpAck(block - 1) // where we are, should the window stall
			p, err = x.next(func(p tftpPacket) bool { return p.op == tftpDATA && p.block == block })
		}
		if err != nil {
			return err
		}
	}
}

// send sends pkt to the transfer port and waits for DATA block.
func (x *tftpXfer) send(pkt []byte, block uint16) (tftpPacket, error) {
	x.last = pkt
	if _, err := x.conn.WriteToUDPAddrPort(pkt, x.peer); err != nil {
		return tftpPacket{}, err
	}
	return x.next(func(p tftpPacket) bool { return p.op == tftpDATA && p.block == block })
}

// errTFTPTimeout is a packet that drew no answer through every resend.
var errTFTPTimeout = errors.New("tftp timeout")

// next reads until a packet want accepts arrives from the server,
// resending x.last after each timeout. An ERROR ends the transfer; a
// packet from another port of the server once the transfer port is known
// gets ERROR 5 (RFC 1350 §4) and is otherwise ignored, as are duplicates.
func (x *tftpXfer) next(want func(tftpPacket) bool) (tftpPacket, error) {
	for try := 0; ; {
		if err := x.conn.SetReadDeadline(time.Now().Add(x.g.timeout)); err != nil {
			return tftpPacket{}, err
		}
		n, from, err := x.conn.ReadFromUDPAddrPort(x.buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if try++; try > x.g.retries {
				return tftpPacket{}, fmt.Errorf("%w: no answer after %d sends %v apart", errTFTPTimeout, try, x.g.timeout)
			}
			x.res.resent++
			x.restarted = true
			dst := x.peer
			if !dst.IsValid() {
				dst = x.g.server
			}
			if _, err := x.conn.WriteToUDPAddrPort(x.last, dst); err != nil {
				return tftpPacket{}, err
			}
			continue
		}
		if err != nil {
			return tftpPacket{}, err
		}
		if from.Addr().Unmap() != x.g.server.Addr() {
			continue
		}
		if x.peer.IsValid() && from != x.peer {
			x.conn.WriteToUDPAddrPort(tftpError(5, "Unknown transfer ID"), from)
			continue
		}
		p, err := parseTFTP(x.buf[:n])
		if err != nil {
			return p, err
		}
		if p.op == tftpERROR {
			return p, fmt.Errorf("server sent ERROR %d: %s", p.code, p.msg)
		}
		if want(p) {
			x.peer = from
			return p, nil
		}
		switch {
		case p.op == tftpDATA && bytes.Equal(x.last, tftpAck(p.block)):
			// The block we acknowledged, again: our ACK was lost. Answer
			// it at once rather than after our own timeout.
			x.conn.WriteToUDPAddrPort(x.last, from)
		case x.window > 1 && p.op == tftpDATA && p.block-x.expect < 1<<15 && !x.gapSent:
			// A block after a gap: the one expected was lost. Say where we
			// are, once; the server sends again from there.
			x.conn.WriteToUDPAddrPort(tftpAck(x.expect-1), from)
			x.gapSent, x.restarted = true, true
		}
	}
}
