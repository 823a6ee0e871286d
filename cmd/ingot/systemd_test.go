package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/serve"
)

func TestSystemdReady(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next := func() string {
		t.Helper()
		buf := make([]byte, 1024)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if f := systemdReady(t.Context(), &env{getenv: func(string) string { return "" }}, log); f != nil {
		t.Error("a Ready hook outside systemd")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := systemdReady(ctx, &env{getenv: func(k string) string { return map[string]string{"NOTIFY_SOCKET": sock}[k] }}, log)
	ready(serve.Addrs{HTTP: &net.TCPAddr{Port: 8080}, API: &net.TCPAddr{Port: 8443}, TFTP: &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 69},
		ServerIP: netip.MustParseAddr("10.0.0.1")})
	const status = "STATUS=serving: boot http :8080, api :8443, tftp 10.0.0.1:69, server ip 10.0.0.1"
	if got := next(); got != "READY=1\n"+status {
		t.Errorf("at start: %q", got)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := next(); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Errorf("on SIGHUP: %q", got)
	}
	if got := next(); got != "READY=1\n"+status {
		t.Errorf("after the reload: %q", got)
	}
	cancel()
	if got := next(); got != "STOPPING=1" {
		t.Errorf("at shutdown: %q", got)
	}
}
