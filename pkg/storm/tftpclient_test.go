package storm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"hash/crc32"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/boot/tftp"
)

// ingotTFTP serves dir with ingot's TFTP server on 127.0.0.1.
func ingotTFTP(t *testing.T, dir string) netip.AddrPort {
	t.Helper()
	files, err := bootfiles.New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tftp.New(tftp.Config{Addr: "127.0.0.1:0", Files: files})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return addr.(*net.UDPAddr).AddrPort()
}

// TestTFTPGet fetches files from ingot's TFTP server as the simulated
// firmware does: one request (BIOS), or EDK2's tsize probe, its abort, and
// the request again (UEFI); sizes that end in a short block and in an
// empty one.
func TestTFTPGet(t *testing.T) {
	dir := t.TempDir()
	files := map[string]int{"undionly.kpxe": 100_001, "exact.bin": 1468 * 40, "tiny": 3}
	sums := map[string]uint32{}
	for name, size := range files {
		b := make([]byte, size)
		rand.Read(b)
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
		sums[name] = crc32.Checksum(b, castagnoli)
	}
	srv := ingotTFTP(t, dir)
	for _, probe := range []bool{false, true} {
		for name, size := range files {
			g := tftpGet{local: netip.MustParseAddr("127.0.0.1"), server: srv, name: name, blksize: 1468, probe: probe,
				windows: probe, timeout: time.Second, retries: 3}
			h := crc32.New(castagnoli)
			res, err := g.run(h)
			if err != nil {
				t.Fatalf("%s (probe %v): %v", name, probe, err)
			}
			window := map[bool]int{false: 1, true: askedWindow}[probe] // UEFI asks windowsize 4, as EDK2 does
			if res.bytes != int64(size) || res.tsize != int64(size) || h.Sum32() != sums[name] || res.blksize != 1468 || res.window != window {
				t.Errorf("%s (probe %v): %d bytes, tsize %d, blksize %d, window %d, crc %08x; want %d bytes, blksize 1468, window %d, crc %08x",
					name, probe, res.bytes, res.tsize, res.blksize, res.window, h.Sum32(), size, window, sums[name])
			}
		}
	}
}

// fakeServer answers each datagram on a loopback socket with what answer
// returns (nil: nothing; packets joined by "|" are sent one after the
// other), from a second socket as a TFTP server's transfer port would, and
// counts the datagrams.
func fakeServer(t *testing.T, answer func(n int, req []byte) []byte) (netip.AddrPort, func() int) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	xfer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); xfer.Close() })
	var mu sync.Mutex
	n := 0
	serve := func(conn *net.UDPConn) {
		buf := make([]byte, 1500)
		for {
			k, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mu.Lock()
			n++
			a := answer(n, buf[:k])
			mu.Unlock()
			for _, p := range bytes.Split(a, []byte("|")) {
				if len(p) > 0 {
					xfer.WriteToUDPAddrPort(p, from)
				}
			}
		}
	}
	go serve(c)
	go serve(xfer)
	return c.LocalAddr().(*net.UDPAddr).AddrPort(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestTFTPGetFailures: what ends a transfer, and how many requests it
// took.
func TestTFTPGetFailures(t *testing.T) {
	tests := map[string]struct {
		answer func(n int, req []byte) []byte
		want   string
		sends  int
	}{
		"silent server: the request is sent retries+1 times": {
			func(int, []byte) []byte { return nil }, "tftp timeout", 3},
		"ERROR": {
			func(int, []byte) []byte { return tftpError(1, "File not found") }, "ERROR 1: File not found", 1},
		"blksize above the one asked": {
			func(int, []byte) []byte { return append([]byte{0, tftpOACK}, "blksize\x009000\x00"...) }, "OACK blksize", 1},
		"an option not asked": {
			func(int, []byte) []byte { return append([]byte{0, tftpOACK}, "multicast\x00x\x00"...) }, "was not asked", 1},
		"fewer bytes than tsize": {
			func(n int, req []byte) []byte {
				if n == 1 {
					return append([]byte{0, tftpOACK}, "tsize\x00100\x00blksize\x001468\x00"...)
				}
				return append([]byte{0, tftpDATA, 0, 1}, "short"...)
			}, "tsize said 100", 2},
		"a window with a gap: the last block in order is ACKed, the server sends again from there": {
			func(n int, req []byte) []byte {
				switch string(req) {
				case string(tftpAck(0)): // block 2 lost
					return []byte("\x00\x03\x00\x01aaaaaaaa|\x00\x03\x00\x03cccc")
				case string(tftpAck(1)):
					return []byte("\x00\x03\x00\x02bbbbbbbb|\x00\x03\x00\x03cccc")
				case string(tftpAck(3)):
					return nil
				}
				return append([]byte{0, tftpOACK}, "tsize\x0020\x00blksize\x008\x00windowsize\x004\x00"...)
			}, "", 4},
		"a lost block: the ACK is resent until the server answers": {
			func(n int, req []byte) []byte {
				switch {
				case n == 1:
					return append([]byte{0, tftpOACK}, "tsize\x005\x00blksize\x001468\x00"...)
				case n < 4: // ACK 0 and its first resend get no DATA
					return nil
				}
				return append([]byte{0, tftpDATA, 0, 1}, "hello"...)
			}, "", 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv, n := fakeServer(t, tc.answer)
			g := tftpGet{local: netip.MustParseAddr("127.0.0.1"), server: srv, name: "f", blksize: 1468, windows: true,
				timeout: 100 * time.Millisecond, retries: 2}
			_, err := g.run(crc32.New(castagnoli))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("run: %v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("run: %v, want an error containing %q", err, tc.want)
			}
			if tc.want == "tftp timeout" && !errors.Is(err, errTFTPTimeout) {
				t.Errorf("error %v is not errTFTPTimeout", err)
			}
			time.Sleep(50 * time.Millisecond)
			if got := n(); got < tc.sends {
				t.Errorf("the server got %d datagrams, want at least %d", got, tc.sends)
			}
		})
	}
}
