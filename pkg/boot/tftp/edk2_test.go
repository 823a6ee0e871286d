package tftp

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEDK2TsizeProbe replays what OVMF/EDK2 does (LAB.md): RRQ with
// "tsize 0 blksize 1468 windowsize 4", read the OACK, abort with error 8,
// then fetch for real. The OACK must answer tsize with the file size,
// blksize and windowsize (RFC 7440), and the abort must count as
// "aborted", not as an error.
func TestEDK2TsizeProbe(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("x"), 5000)
	os.WriteFile(filepath.Join(dir, "snponly.efi"), data, 0o644)
	addr, s := startServer(t, dir, nil)
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	srv, _ := net.ResolveUDPAddr("udp", addr)
	rrq := []byte{0, 1}
	for _, f := range []string{"snponly.efi", "octet", "tsize", "0", "blksize", "1468", "windowsize", "4"} {
		rrq = append(append(rrq, f...), 0)
	}
	conn.WriteToUDP(rrq, srv)
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 1500)
	n, from, err := conn.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("no OACK: %v", err)
	}
	if op := binary.BigEndian.Uint16(buf[:2]); op != 6 {
		t.Fatalf("got opcode %d, want OACK (6): %q", op, buf[:n])
	}
	opts := map[string]string{}
	fields := strings.Split(strings.TrimSuffix(string(buf[2:n]), "\x00"), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		opts[fields[i]] = fields[i+1]
	}
	if diff := cmp.Diff(map[string]string{"tsize": "5000", "blksize": "1468", "windowsize": "4"}, opts); diff != "" {
		t.Errorf("OACK options (-want +got):\n%s", diff)
	}
	abort := append([]byte{0, 5, 0, 8}, "User aborted the transfer\x00"...)
	conn.WriteToUDP(abort, from)
	waitCounter(t, s.m.transfers.WithLabelValues("aborted"), 1)
	if got := counter(s.m.transfers.WithLabelValues("aborted")); got != 1 {
		t.Errorf("transfers{aborted} = %v, want 1", got)
	}
	if got := counter(s.m.transfers.WithLabelValues("error")); got != 0 {
		t.Errorf("transfers{error} = %v, want 0", got)
	}
	got, size, err := fetch(t, addr, "snponly.efi", 1468)
	if err != nil || !bytes.Equal(got, data) || size != 5000 {
		t.Fatalf("second fetch: %v, %d bytes, tsize %d", err, len(got), size)
	}
}
