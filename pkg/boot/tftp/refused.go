package tftp

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// read reads the client's next packet. A read can fail with ECONNREFUSED
// while the client's last packets are still queued: a packet we sent after
// the client closed its port (a resend that crossed its final ACK, as a
// loaded network or host makes happen) drew an ICMP port unreachable, and
// Linux reports that error before the queued datagrams. So on ECONNREFUSED
// read returns what is queued already (the final ACK, usually), and the
// error only when nothing is: then the client is gone.
func read(conn *net.UDPConn, buf []byte, deadline time.Time) (int, error) {
	n, err := conn.Read(buf)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return n, err
	}
	if q, ok := readQueued(conn, buf, deadline); ok {
		return q, nil
	}
	return n, err
}

// readQueued reads one datagram already queued on conn without waiting
// for one, and puts back the read deadline.
func readQueued(conn *net.UDPConn, buf []byte, deadline time.Time) (int, bool) {
	defer conn.SetReadDeadline(deadline)
	return recvNow(conn, buf, 0)
}

// refusedQueued reports whether a failed send is that same ICMP error with
// the client's last packets still queued: the error comes from the next
// send when no read took it first (a timeout resends a window after the
// client's final ACK, and the resend's second packet fails). The sender
// then stops sending and reads: the queued ACK ends the transfer. Nothing
// queued means the client is gone, and the error stands. The peek leaves
// the read deadline lifted: the sender's next wait sets its own.
func refusedQueued(conn *net.UDPConn, err error) bool {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	var one [1]byte
	n, ok := recvNow(conn, one[:], syscall.MSG_PEEK)
	return ok && n > 0
}

// recvNow receives from conn with flags and never waits (EAGAIN: nothing
// queued, not ok). RawConn.Read refuses at once past the read deadline, so
// the deadline is lifted; the caller sets the one it wants after.
func recvNow(conn *net.UDPConn, buf []byte, flags int) (int, bool) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, false
	}
	conn.SetReadDeadline(time.Time{})
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, flags|syscall.MSG_DONTWAIT)
		return true
	})
	return n, err == nil && rerr == nil
}
