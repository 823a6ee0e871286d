package tftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ptftp "github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// startServer serves dir on 127.0.0.1 and returns the address.
func startServer(t *testing.T, dir string, mod func(*Config)) (string, *Server) {
	t.Helper()
	files, err := bootfiles.New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The server's warnings (a failed transfer says why) are shown when
	// the test fails.
	var logBuf lockedLog
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log (warnings):\n%s", logBuf.String())
		}
	})
	cfg := Config{Addr: "127.0.0.1:0", Files: files, Registerer: prometheus.NewRegistry(), Timeout: time.Second, Retries: 2,
		Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return addr.String(), s
}

func fetch(t *testing.T, addr, name string, blksize int) ([]byte, int64, error) {
	t.Helper()
	c, err := ptftp.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(time.Second)
	if blksize > 0 {
		c.SetBlockSize(blksize)
		c.RequestTSize(true)
	}
	wt, err := c.Receive(name, "octet")
	if err != nil {
		return nil, 0, err
	}
	size, _ := wt.(ptftp.IncomingTransfer).Size()
	var buf bytes.Buffer
	_, err = wt.WriteTo(&buf)
	return buf.Bytes(), size, err
}

func TestServeFiles(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 300_001)
	rand.Read(data)
	os.WriteFile(filepath.Join(dir, "undionly.kpxe"), data, 0o644)
	os.MkdirAll(filepath.Join(dir, "efi"), 0o755)
	os.WriteFile(filepath.Join(dir, "efi", "snponly.efi"), data[:1000], 0o644)
	addr, s := startServer(t, dir, nil)
	tests := map[string]struct {
		name    string
		blksize int
		want    []byte
	}{
		"default 512":          {"undionly.kpxe", 0, data},
		"blksize 1468":         {"undionly.kpxe", 1468, data},
		"blksize 8192":         {"undionly.kpxe", 8192, data},
		"subdir":               {"efi/snponly.efi", 1468, data[:1000]},
		"backslash dos syntax": {`efi\snponly.efi`, 0, data[:1000]},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, size, err := fetch(t, addr, tc.name, tc.blksize)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got %d bytes, want %d (content differs)", len(got), len(tc.want))
			}
			if tc.blksize > 0 && size != int64(len(tc.want)) {
				t.Errorf("tsize answered %d, want %d", size, len(tc.want))
			}
		})
	}
	waitCounter(t, s.m.transfers.WithLabelValues("ok"), float64(len(tests)))
	if got := counter(s.m.transfers.WithLabelValues("ok")); got != float64(len(tests)) {
		t.Errorf("transfers{ok} = %v, want %d", got, len(tests))
	}
	wantBytes := 3*len(data) + 2000
	if got := counter(s.m.bytes); got != float64(wantBytes) {
		t.Errorf("bytes = %v, want %d", got, wantBytes)
	}
}

// TestServeIPv6: the same over IPv6 loopback, where the interface comes
// from an IPv6 control message and blksize is held to the MTU - 48.
func TestServeIPv6(t *testing.T) {
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		netnstest.Missing(t, "no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	dir := t.TempDir()
	data := make([]byte, 70_000)
	rand.Read(data)
	os.WriteFile(filepath.Join(dir, "f"), data, 0o644)
	addr, _ := startServer(t, dir, func(c *Config) { c.Addr = "[::1]:0" })
	for _, blk := range []int{0, 8192} {
		got, _, err := fetch(t, addr, "f", blk)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("blksize %d over IPv6: %d bytes, %v", blk, len(got), err)
		}
	}
}

// TestNetascii: a netascii request gets CR LF line ends (tftp-hpa asks for
// netascii unless told "-m binary"), and no tsize, which would not be exact.
func TestNetascii(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "menu"), []byte("a\nb\rc\n"), 0o644)
	addr, _ := startServer(t, dir, nil)
	req := append([]byte{0, opRRQ}, "menu\x00NetASCII\x00tsize\x000\x00"...)
	c := sendFrom(t, "127.0.0.1", addr, req)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 600)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	c.WriteToUDP(ack(1), from)
	if want := "\x00\x03\x00\x01a\r\nb\r\x00c\r\n"; string(buf[:n]) != want {
		t.Fatalf("got %q, want DATA 1 %q", buf[:n], want)
	}
}

func TestRefused(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "tftp")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(root, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(root, "secret"), filepath.Join(dir, "escape"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "passwd"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	addr, s := startServer(t, dir, nil)
	for _, name := range []string{"../secret", "/etc/passwd", "escape", "passwd", "sub", "sub/../../secret", "missing"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			got, _, err := fetch(t, addr, name, 0)
			if err == nil {
				t.Fatalf("fetching %q succeeded with %q, want a TFTP error", name, got)
			}
			if strings.Contains(err.Error(), root) {
				t.Errorf("error tells the client a server path: %v", err)
			}
		})
	}
	waitCounter(t, s.m.transfers.WithLabelValues("refused"), 7)
	if got := counter(s.m.transfers.WithLabelValues("refused")); got != 7 {
		t.Errorf("transfers{refused} = %v, want 7", got)
	}
}

func TestWriteRefused(t *testing.T) {
	dir := t.TempDir()
	addr, _ := startServer(t, dir, nil)
	c, _ := ptftp.NewClient(addr)
	c.SetTimeout(time.Second)
	rf, err := c.Send("upload", "octet")
	if err == nil {
		_, err = rf.ReadFrom(strings.NewReader("data"))
	}
	if err == nil {
		t.Fatal("write request succeeded, want refusal")
	}
	if _, err := os.Stat(filepath.Join(dir, "upload")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file was written: %v", err)
	}
}

func TestRefusesWildcardBind(t *testing.T) {
	files, _ := bootfiles.New([]string{t.TempDir()}, nil)
	for _, addr := range []string{"0.0.0.0:69", ":69", "[::]:69"} {
		if _, err := New(Config{Addr: addr, Files: files}); err == nil {
			t.Errorf("New(%q) succeeded, want refusal of a wildcard bind", addr)
		}
	}
}

// TestBusy: a request that finds every slot taken is not answered (no
// ERROR, which would end the client's boot) but waits, and is served as
// soon as the slot comes free: here when the request holding it goes
// unacknowledged for FirstACKWait.
func TestBusy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	const wait = 300 * time.Millisecond
	addr, s := startServer(t, dir, func(c *Config) { c.MaxTransfers, c.FirstACKWait = 1, wait })
	start := time.Now()
	sendFrom(t, "127.0.0.9", addr, rrq("f")) // holds the only slot, never acknowledged
	if _, _, err := fetch(t, addr, "f", 0); err != nil {
		t.Fatalf("fetch while the only slot was held: %v", err)
	}
	if d := time.Since(start); d < wait-50*time.Millisecond || d > wait+600*time.Millisecond {
		t.Errorf("fetch done %v after the slot was taken, want it served when the slot came free (%v), not before or after a retransmit", d, wait)
	}
	for r, want := range map[string]float64{"ok": 1, "no_ack": 1, "busy": 0} {
		waitCounter(t, s.m.transfers.WithLabelValues(r), want)
		if got := counter(s.m.transfers.WithLabelValues(r)); got != want {
			t.Errorf("transfers{%s} = %v, want %v", r, got, want)
		}
	}
}

func counter(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// waitCounter waits briefly for the server side to finish counting: the
// client sees the last block before the server's handler returns.
func waitCounter(t *testing.T, c prometheus.Metric, want float64) {
	t.Helper()
	for i := 0; i < 100 && counter(c) != want; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

// lockedLog is a log buffer the server's goroutines share.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
