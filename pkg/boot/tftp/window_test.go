package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// getWindowed is an RFC 7440 client: it asks blksize and windowsize, ACKs
// the last block of each window, and on a gap (a block lost: lose says
// which, by block number and how often it was seen) or a timeout ACKs the
// last block it has in order, from which the server sends again. It
// returns the file and how many DATA packets arrived.
func getWindowed(t *testing.T, srv, name string, blksize, window int, lose func(block uint16, seen int) bool) ([]byte, int, error) {
	t.Helper()
	c := sendFrom(t, "127.0.0.1", srv, rrq(name, "blksize", strconv.Itoa(blksize), "windowsize", strconv.Itoa(window)))
	buf := make([]byte, 4+max(blksize, 512))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, peer, err := c.ReadFromUDP(buf)
	if err != nil || binary.BigEndian.Uint16(buf) != opOACK {
		return nil, 0, fmt.Errorf("no OACK: %v %q", err, buf[:n])
	}
	want := fmt.Sprintf("blksize\x00%d\x00windowsize\x00%d\x00", blksize, min(window, maxWindow))
	if string(buf[2:n]) != want {
		return nil, 0, fmt.Errorf("OACK %q, want %q", buf[2:n], want)
	}
	c.WriteToUDP(ack(0), peer)
	var got []byte
	next, inWindow, packets := uint16(1), 0, 0
	seen := map[uint16]int{}
	for {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := c.ReadFromUDP(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.WriteToUDP(ack(next-1), peer)
			inWindow = 0
			continue
		}
		if err != nil {
			return got, packets, err
		}
		if binary.BigEndian.Uint16(buf) != opDATA {
			return got, packets, fmt.Errorf("opcode %d: %q", binary.BigEndian.Uint16(buf), buf[:n])
		}
		packets++
		block := binary.BigEndian.Uint16(buf[2:])
		seen[block]++
		if lose != nil && lose(block, seen[block]) {
			continue
		}
		if block != next {
			c.WriteToUDP(ack(next-1), peer) // a gap: say where we are
			inWindow = 0
			continue
		}
		got = append(got, buf[4:n]...)
		next++
		inWindow++
		if n-4 < blksize {
			c.WriteToUDP(ack(block), peer)
			return got, packets, nil
		}
		if inWindow == min(window, maxWindow) {
			c.WriteToUDP(ack(block), peer)
			inWindow = 0
		}
	}
}

// TestWindowed: RFC 7440 transfers from ingot's server, whole, with lost
// blocks resent from the client's last ACK, across the block number's
// wrap from 65535 to 0, and sizes that end on a window or block boundary.
func TestWindowed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string][]byte{
		"f":     writeRandom(t, filepath.Join(dir, "f"), 100_001),
		"exact": writeRandom(t, filepath.Join(dir, "exact"), 512*8), // ends in an empty block after a full window
		"empty": writeRandom(t, filepath.Join(dir, "empty"), 0),
		"wrap":  writeRandom(t, filepath.Join(dir, "wrap"), 8*70_000), // 70000 blocks of 8 bytes
	}
	addr, s := startServer(t, dir, nil)
	tests := map[string]struct {
		file            string
		blksize, window int
		lose            func(block uint16, seen int) bool
	}{
		"EDK2's window of 4":                 {"f", 1468, 4, nil},
		"a window of 1 is lock step":         {"f", 1468, 1, nil},
		"windowsize above maxWindow":         {"f", 512, 64, nil},
		"full windows, then an empty block":  {"exact", 512, 4, nil},
		"an empty file":                      {"empty", 512, 4, nil},
		"the block number wraps":             {"wrap", 8, 16, nil},
		"a block lost once in each window":   {"f", 512, 4, func(b uint16, seen int) bool { return b%4 == 2 && seen == 1 }},
		"the last block of a window lost":    {"f", 1468, 4, func(b uint16, seen int) bool { return b == 8 && seen == 1 }},
		"the final block lost twice":         {"f", 1468, 4, func(b uint16, seen int) bool { return b == 69 && seen <= 2 }},
		"every first copy lost after a wrap": {"wrap", 8, 16, func(b uint16, seen int) bool { return b == 3 && seen == 2 }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, packets, err := getWindowed(t, addr, tc.file, tc.blksize, tc.window, tc.lose)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, files[tc.file]) {
				t.Fatalf("got %d bytes, want %d", len(got), len(files[tc.file]))
			}
			t.Logf("%d bytes in %d DATA packets", len(got), packets)
		})
	}
	waitCounter(t, s.m.transfers.WithLabelValues("ok"), float64(len(tests)))
	if got := counter(s.m.transfers.WithLabelValues("error")); got != 0 {
		t.Errorf("transfers{error} = %v, want 0", got)
	}
}

// TestWindowedDuplicateACK: an ACK of the block before the window (the
// client lost the window's first block) draws the window again at once,
// but only once before the server's timeout: duplicate ACKs do not
// multiply what the server sends (RFC 1123 4.2.3.1, for windows).
func TestWindowedDuplicateACK(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "f"), 512*20)
	addr, _ := startServer(t, dir, nil) // Timeout 1 s
	c := sendFrom(t, "127.0.0.1", addr, rrq("f", "windowsize", "4"))
	buf := make([]byte, 1024)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, peer, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	c.WriteToUDP(ack(0), peer)
	read := func(within time.Duration) []uint16 {
		var blocks []uint16
		deadline := time.Now().Add(within)
		for {
			c.SetReadDeadline(deadline)
			if _, _, err := c.ReadFromUDP(buf); err != nil {
				return blocks
			}
			blocks = append(blocks, binary.BigEndian.Uint16(buf[2:]))
		}
	}
	if got := read(300 * time.Millisecond); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("first window: blocks %v, want [1 2 3 4]", got)
	}
	for range 3 {
		c.WriteToUDP(ack(0), peer) // "I have nothing after block 0", three times
	}
	if got := read(300 * time.Millisecond); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("three ACKs of block 0 drew blocks %v, want the window once", got)
	}
	if got := read(1500 * time.Millisecond); len(got) < 4 || fmt.Sprint(got[:4]) != "[1 2 3 4]" {
		t.Fatalf("after the timeout: blocks %v, want the window again", got)
	}
	c.WriteToUDP(ack(2), peer) // blocks 1-2 arrived: the next window starts at 3
	if got := read(300 * time.Millisecond); fmt.Sprint(got) != "[3 4 5 6]" {
		t.Fatalf("after ACK 2: blocks %v, want [3 4 5 6]", got)
	}
}
