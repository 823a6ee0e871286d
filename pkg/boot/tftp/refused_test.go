package tftp

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// refusedAfterACK makes a transfer socket in the state a resend that
// crossed the client's final ACK leaves: the ACK queued, then an ICMP
// port unreachable for the packet sent after the client closed its port.
func refusedAfterACK(t *testing.T) *net.UDPConn {
	t.Helper()
	cli, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, cli.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if _, err := cli.WriteToUDP(ack(69), srv.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	if _, err := srv.Write([]byte{0, opDATA, 0, 69}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // loopback's ICMP is back long before
	return srv
}

// TestReadQueuedBeforeRefused: Linux reports the ICMP error before the
// queued ACK (a plain Read fails: the old server counted a delivered file
// as an error, seen as TestWindowed's transfers{error} = 1 under load);
// read returns the ACK, then the client is gone.
func TestReadQueuedBeforeRefused(t *testing.T) {
	buf := make([]byte, 64)
	plain := refusedAfterACK(t)
	plain.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := plain.Read(buf); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("plain Read: %v, want ECONNREFUSED first (the case read exists for)", err)
	}

	conn := refusedAfterACK(t)
	deadline := time.Now().Add(time.Second)
	conn.SetReadDeadline(deadline)
	n, err := read(conn, buf, deadline)
	if err != nil {
		t.Fatalf("read: %v, want the queued ACK", err)
	}
	if r := parseReply(buf[:n]); r.op != opACK || r.block != 69 {
		t.Fatalf("read %q, want ACK 69", buf[:n])
	}
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := read(conn, buf, deadline); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read after the ACK: %v, want a timeout (nothing queued, the error reported once)", err)
	}
}

// TestWriteRefusedQueued: the ICMP error can also come from a send (a
// timeout resent the last window after the client's final ACK: the
// window's second packet failed, seen beside stress-ng as TestWindowed's
// transfers{error} = 1, "sending block 4452: write: connection refused").
// refusedQueued says the client's ACK is still queued, without taking it;
// once it is read, the same error with nothing queued stands.
func TestWriteRefusedQueued(t *testing.T) {
	conn := refusedAfterACK(t)
	_, err := conn.Write([]byte{0, opDATA, 0, 69})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Write: %v, want ECONNREFUSED (the case refusedQueued exists for)", err)
	}
	if !refusedQueued(conn, err) {
		t.Fatal("refusedQueued: false, want true (the client's ACK is queued)")
	}
	buf := make([]byte, 64)
	deadline := time.Now().Add(time.Second)
	conn.SetReadDeadline(deadline)
	n, err := read(conn, buf, deadline)
	if err != nil || parseReply(buf[:n]).block != 69 {
		t.Fatalf("read after refusedQueued: %q, %v; want the ACK of 69 still there", buf[:n], err)
	}
	if refusedQueued(conn, err) || refusedQueued(conn, syscall.ECONNREFUSED) {
		t.Error("refusedQueued with nothing queued: true, want false (the client is gone)")
	}
	if refusedQueued(conn, errors.New("other")) {
		t.Error("refusedQueued of another error: true")
	}
}
