package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// listen opens a real datagram socket, as systemd does, and returns its
// NOTIFY_SOCKET value and a function that reads the next message.
func listen(t *testing.T, name string) (string, func() []string) {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return name, func() []string {
		t.Helper()
		buf := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("reading the notification: %v", err)
		}
		return strings.Split(string(buf[:k]), "\n")
	}
}

func TestMessages(t *testing.T) {
	path, next := listen(t, filepath.Join(t.TempDir(), "notify"))
	n, err := New(func(k string) string { return map[string]string{"NOTIFY_SOCKET": path}[k] })
	if err != nil || n == nil {
		t.Fatalf("New: %v, %v", n, err)
	}
	n.Monotonic = func() (time.Duration, error) { return 1234567 * time.Microsecond, nil }
	tests := []struct {
		name string
		send func() error
		want []string
	}{
		{"ready", func() error { return n.Ready("") }, []string{"READY=1"}},
		{"ready with status", func() error { return n.Ready("serving: dhcp on eth1") }, []string{"READY=1", "STATUS=serving: dhcp on eth1"}},
		{"reloading", n.Reloading, []string{"RELOADING=1", "MONOTONIC_USEC=1234567"}},
		{"stopping", n.Stopping, []string{"STOPPING=1"}},
		{"status on one line", func() error { return n.Status("a\nb\r\nc") }, []string{"STATUS=a b c"}},
		{"raw", func() error { return n.Notify("WATCHDOG=1", "EXTEND_TIMEOUT_USEC=5000000") }, []string{"WATCHDOG=1", "EXTEND_TIMEOUT_USEC=5000000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.send(); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, next()); d != "" {
				t.Errorf("message (-want +got):\n%s", d)
			}
		})
	}
}

func TestAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@ingot-sdnotify-test-%d", os.Getpid())
	_, next := listen(t, name)
	n, err := New(func(string) string { return name })
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(""); err != nil {
		t.Fatal(err)
	}
	if got := next(); len(got) != 1 || got[0] != "READY=1" {
		t.Errorf("got %q, want READY=1", got)
	}
}

// The real CLOCK_MONOTONIC is what systemd compares MONOTONIC_USEC with.
func TestReloadingUsesMonotonicClock(t *testing.T) {
	path, next := listen(t, filepath.Join(t.TempDir(), "notify"))
	n, _ := New(func(string) string { return path })
	before, _ := monotonic()
	if err := n.Reloading(); err != nil {
		t.Fatal(err)
	}
	after, _ := monotonic()
	msg := next()
	var usec int64
	if len(msg) != 2 || msg[0] != "RELOADING=1" {
		t.Fatalf("got %q", msg)
	}
	if _, err := fmt.Sscanf(msg[1], "MONOTONIC_USEC=%d", &usec); err != nil {
		t.Fatalf("%q: %v", msg[1], err)
	}
	if usec < before.Microseconds() || usec > after.Microseconds() {
		t.Errorf("MONOTONIC_USEC=%d not within [%d, %d]", usec, before.Microseconds(), after.Microseconds())
	}
}

func TestNotUnderSystemd(t *testing.T) {
	n, err := New(func(string) string { return "" })
	if n != nil || err != nil {
		t.Fatalf("New without NOTIFY_SOCKET: %v, %v; want nil, nil", n, err)
	}
	for name, f := range map[string]func() error{"ready": func() error { return n.Ready("x") }, "reloading": n.Reloading,
		"stopping": n.Stopping, "status": func() error { return n.Status("x") }} {
		if err := f(); err != nil {
			t.Errorf("%s on a nil Notifier: %v", name, err)
		}
	}
}

func TestRefusals(t *testing.T) {
	if _, err := New(func(string) string { return "vsock:2:1234" }); err == nil {
		t.Error("New accepted a vsock address")
	}
	path, _ := listen(t, filepath.Join(t.TempDir(), "notify"))
	n, _ := New(func(string) string { return path })
	for _, bad := range []string{"READY", "STATUS=a\nREADY=1"} {
		if err := n.Notify(bad); err == nil {
			t.Errorf("Notify(%q) accepted", bad)
		}
	}
	gone, _ := New(func(string) string { return filepath.Join(t.TempDir(), "nobody-listens") })
	if err := gone.Ready(""); err == nil || !strings.Contains(err.Error(), "nobody-listens") {
		t.Errorf("Ready to a missing socket: %v, want an error naming it", err)
	}
}
