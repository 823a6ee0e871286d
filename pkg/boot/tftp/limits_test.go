package tftp

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// These tests play clients with raw UDP sockets on loopback addresses
// (127.0.0.0/8 is all local on Linux): floods of read requests that are
// never acknowledged, from one address or from several, as a spoofer would
// send them. The flood's sockets stay open and never read, so the kernel
// answers no ICMP: the server sees what it would see from forged addresses.

func rrq(name string, opts ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, opRRQ)
	for _, f := range append([]string{name, "octet"}, opts...) {
		b = append(append(b, f...), 0)
	}
	return b
}

func ack(block uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, opACK), block)
}

// sendFrom sends pkt to srv from a new socket on ip, and returns the socket
// (closed when the test ends).
func sendFrom(t *testing.T, ip, srv string, pkt []byte) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatalf("binding %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	dst, err := net.ResolveUDPAddr("udp", srv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteToUDP(pkt, dst); err != nil {
		t.Fatalf("sending from %s: %v", ip, err)
	}
	return c
}

// flood sends n read requests that will never be acknowledged, from the
// loopback addresses 127.0.0.(first+i%addrs), half bare (answered with
// DATA 1) and half with options (answered with an OACK).
func flood(t *testing.T, srv string, n, first, addrs int) {
	t.Helper()
	for i := range n {
		req := rrq("big.bin")
		if i%2 == 1 {
			req = rrq("big.bin", "tsize", "0", "blksize", "1468")
		}
		sendFrom(t, fmt.Sprintf("127.0.0.%d", first+i%addrs), srv, req)
	}
}

// getFrom fetches name from srv in lock step from a socket on ip, without
// options, and fails on any loss (loopback loses nothing).
func getFrom(t *testing.T, ip, srv, name string) ([]byte, error) {
	t.Helper()
	c := sendFrom(t, ip, srv, rrq(name))
	var got []byte
	buf := make([]byte, 516)
	for blk := uint16(1); ; blk++ {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, from, err := c.ReadFromUDP(buf)
		if err != nil {
			return got, fmt.Errorf("waiting for block %d: %w", blk, err)
		}
		if op, b := binary.BigEndian.Uint16(buf), binary.BigEndian.Uint16(buf[2:]); op != opDATA || b != blk {
			return got, fmt.Errorf("got opcode %d block %d, want DATA %d: %q", op, b, blk, buf[:n])
		}
		got = append(got, buf[4:n]...)
		c.WriteToUDP(ack(blk), from)
		if n < len(buf) {
			return got, nil
		}
	}
}

func writeRandom(t *testing.T, path string, size int) []byte {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFloodThenRealClient: 64 read requests that are never acknowledged
// used to fill every slot for 12-17 s, and the next client got "server
// busy". Now a flood from one address holds MaxPerClient slots; a flood
// from many holds the slots only until FirstACKWait, while the real
// client's request waits for the first one free.
func TestFloodThenRealClient(t *testing.T) {
	t.Parallel()
	const within = 2*time.Second + 2*time.Second // FirstACKWait and a margin for a loaded machine
	tests := map[string]struct {
		n, addrs    int
		clientLimit float64 // flood requests refused by MaxPerClient
		within      time.Duration
	}{
		"64 from one address":    {64, 1, 60, 1500 * time.Millisecond},
		"64 from 2 addresses":    {64, 2, 56, 1500 * time.Millisecond},
		"64 from 16 addresses":   {64, 16, 0, within},
		"64 from 64 addresses":   {64, 64, 0, within},
		"256 from 128 addresses": {256, 128, 0, within},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := writeRandom(t, filepath.Join(dir, "undionly.kpxe"), 100_001)
			writeRandom(t, filepath.Join(dir, "big.bin"), 1<<20)
			addr, s := startServer(t, dir, nil)
			flood(t, addr, tc.n, 2, tc.addrs)
			time.Sleep(200 * time.Millisecond) // the server takes the flood in
			start := time.Now()
			got, _, err := fetch(t, addr, "undionly.kpxe", 1468)
			d := time.Since(start)
			if err != nil {
				t.Fatalf("real client after the flood: %v (after %v)", err, d.Round(time.Millisecond))
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("real client got %d bytes, want %d", len(got), len(want))
			}
			t.Logf("real client had its file %v after a flood of %d never-ACKed requests from %d address(es)", d.Round(time.Millisecond), tc.n, tc.addrs)
			if d > tc.within {
				t.Errorf("real client waited %v, want at most %v", d.Round(time.Millisecond), tc.within)
			}
			if got := counter(s.m.transfers.WithLabelValues("client_limit")); got != tc.clientLimit {
				t.Errorf("transfers{client_limit} = %v, want %v", got, tc.clientLimit)
			}
		})
	}
}

// TestPerClientLimit: MaxPerClient+1 transfers from one address at once;
// the extra one gets no answer at all (not an ERROR, which would end a
// PXE client's boot), while the others run to the end, and another address
// is served meanwhile.
func TestPerClientLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := writeRandom(t, filepath.Join(dir, "f"), 5*512+100) // 6 blocks
	addr, s := startServer(t, dir, nil)
	const limit = 4 // the default MaxPerClient
	var conns []*net.UDPConn
	for range limit + 1 {
		conns = append(conns, sendFrom(t, "127.0.0.1", addr, rrq("f")))
	}
	// Every answered client reads DATA 1; one of them must get nothing.
	type peer struct {
		c    *net.UDPConn
		from *net.UDPAddr
		got  []byte
	}
	var served []*peer
	silent := 0
	buf := make([]byte, 1024)
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, from, err := c.ReadFromUDP(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			silent++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if op, blk := binary.BigEndian.Uint16(buf), binary.BigEndian.Uint16(buf[2:]); op != opDATA || blk != 1 {
			t.Fatalf("got opcode %d block %d, want DATA 1 (or nothing): %q", op, blk, buf[:n])
		}
		served = append(served, &peer{c, from, append([]byte(nil), buf[4:n]...)})
	}
	if len(served) != limit || silent != 1 {
		t.Fatalf("%d of %d requests from one address answered, %d unanswered; want %d answered and 1 unanswered",
			len(served), limit+1, silent, limit)
	}
	// Another address is not held back by this one's limit.
	if got, err := getFrom(t, "127.0.0.2", addr, "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch from another address while 127.0.0.1 is at its limit: %d bytes, %v", len(got), err)
	}
	// The four admitted transfers proceed to the end, interleaved.
	for blk := uint16(1); blk <= 6; blk++ {
		for _, p := range served {
			if blk > 1 {
				p.c.SetReadDeadline(time.Now().Add(2 * time.Second))
				n, _, err := p.c.ReadFromUDP(buf)
				if err != nil {
					t.Fatalf("block %d: %v", blk, err)
				}
				if got := binary.BigEndian.Uint16(buf[2:]); got != blk {
					t.Fatalf("got block %d, want %d", got, blk)
				}
				p.got = append(p.got, buf[4:n]...)
			}
			p.c.WriteToUDP(ack(blk), p.from)
		}
	}
	for i, p := range served {
		if !bytes.Equal(p.got, data) {
			t.Errorf("transfer %d got %d bytes, want %d", i, len(p.got), len(data))
		}
	}
	waitCounter(t, s.m.transfers.WithLabelValues("ok"), limit+1)
	if got := counter(s.m.transfers.WithLabelValues("ok")); got != limit+1 {
		t.Errorf("transfers{ok} = %v, want %d (the four and 127.0.0.2's)", got, limit+1)
	}
	if got := counter(s.m.transfers.WithLabelValues("client_limit")); got < 1 {
		t.Errorf("transfers{client_limit} = %v, want at least 1", got)
	}
}

// TestUnackedRequestBound measures what one read request that is never
// acknowledged costs the server: datagrams and bytes sent, and how long its
// slot is held. The bound is firstSends datagrams of at most 516 bytes
// (DATA 1 at 512 bytes; an OACK is smaller), the slot free by
// FirstACKWait (default 2 s), no ERROR at the end.
func TestUnackedRequestBound(t *testing.T) {
	t.Parallel()
	const wait = 2*time.Second + time.Second // the default FirstACKWait and a margin for a loaded machine
	tests := map[string]struct {
		req       []byte
		result    string
		maxPkts   int
		maxBytes  int
		firstOp   uint16
		freedWith time.Duration // slot free within this
	}{
		"bare RRQ: DATA 1": {
			rrq("big.bin"), "no_ack", 2, 2 * 516, opDATA, wait},
		"RRQ blksize 65464 tsize: OACK, no large block": {
			rrq("big.bin", "blksize", "65464", "tsize", "0"), "no_ack", 2, 2 * 42, opOACK, wait},
		"RRQ for a missing file: one ERROR": {
			rrq("missing"), "refused", 1, 21, opERROR, time.Second},
		"WRQ: one ERROR": {
			append([]byte{0, opWRQ}, "up\x00octet\x00"...), "refused", 1, 21, opERROR, time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeRandom(t, filepath.Join(dir, "big.bin"), 1<<20)
			// The package defaults throughout (Timeout 2s, Retries 5, as serve has).
			addr, s := startServer(t, dir, func(c *Config) { c.Timeout, c.Retries = 0, 0 })
			start := time.Now()
			c := sendFrom(t, "127.0.0.1", addr, tc.req)
			done := s.m.transfers.WithLabelValues(tc.result)
			var pkts, total int
			var first uint16
			var last, freed time.Duration
			buf := make([]byte, 65536)
			// Read until the server has counted the transfer as ended (it
			// can send nothing more) plus a grace, or 20 s.
			for time.Since(start) < 20*time.Second {
				if freed == 0 && counter(done) == 1 {
					freed = time.Since(start)
				}
				if freed > 0 && time.Since(start) > freed+300*time.Millisecond {
					break
				}
				c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				n, _, err := c.ReadFromUDP(buf)
				if err != nil {
					continue
				}
				if pkts == 0 {
					first = binary.BigEndian.Uint16(buf)
				}
				pkts, total, last = pkts+1, total+n, time.Since(start)
			}
			t.Logf("server sent %d datagrams, %d bytes of UDP payload, for a %d-byte request; last at %v; slot free after %v",
				pkts, total, len(tc.req), last.Round(time.Millisecond), freed.Round(time.Millisecond))
			if first != tc.firstOp {
				t.Errorf("first datagram has opcode %d, want %d", first, tc.firstOp)
			}
			if pkts > tc.maxPkts || total > tc.maxBytes {
				t.Errorf("server sent %d datagrams, %d bytes; want at most %d and %d", pkts, total, tc.maxPkts, tc.maxBytes)
			}
			if freed == 0 || freed > tc.freedWith {
				t.Errorf("transfer counted %s after %v (0: never), want within %v", tc.result, freed, tc.freedWith)
			}
			if r, w := s.slots.counts(); r != 0 || w != 0 {
				t.Errorf("slots: %d running, %d waiting after the transfer ended; want none", r, w)
			}
		})
	}
}

// TestClientGoneFreesSlot: when the request's source port is closed (the
// client went away, or the address was forged and its owner says so), the
// ICMP port unreachable ends the transfer at once.
func TestClientGoneFreesSlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "f"), 5000)
	addr, s := startServer(t, dir, nil)
	sendFrom(t, "127.0.0.1", addr, rrq("f")).Close()
	waitCounter(t, s.m.transfers.WithLabelValues("no_ack"), 1)
	if got := counter(s.m.transfers.WithLabelValues("no_ack")); got != 1 {
		t.Fatalf("transfers{no_ack} = %v within 1s, want 1 (ended by ICMP port unreachable, not by FirstACKWait)", got)
	}
}
