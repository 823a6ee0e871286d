package tftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ptftp "github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
)

// startServer serves dir on 127.0.0.1 and returns the address.
func startServer(t *testing.T, dir string, mod func(*Config)) (string, *Server) {
	t.Helper()
	files, err := bootfiles.New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Addr: "127.0.0.1:0", Files: files, Registerer: prometheus.NewRegistry(), Timeout: time.Second, Retries: 2}
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

func TestBusy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	addr, s := startServer(t, dir, func(c *Config) { c.MaxTransfers = 1 })
	s.sem <- struct{}{} // occupy the only slot
	_, _, err := fetch(t, addr, "f", 0)
	<-s.sem
	if err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("fetch while full: %v, want a busy error", err)
	}
	if _, _, err := fetch(t, addr, "f", 0); err != nil {
		t.Fatalf("fetch after slot freed: %v", err)
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
