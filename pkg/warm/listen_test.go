package warm

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveWarm runs Serve for svc on a loopback port until the returned stop
// is called (or the test ends); stop waits for Serve to return.
func serveWarm(t *testing.T, svc *Service, lim Limits) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := TLSConfig("m-1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, svc, tlsCfg, lim, nil) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// newTestService is a service whose boot listener refuses connections (a
// taken request fails at its first fetch; no kexec is attempted).
func newTestService(t *testing.T, key ed25519.PrivateKey, nonceFile string) *Service {
	t.Helper()
	cfg := Config{Server: "http://127.0.0.1:1", Machine: "m-1", MAC: "52:54:00:00:00:01", Key: EncodePublic(key.Public().(ed25519.PublicKey)), Port: Port}
	svc, err := NewService(cfg, Options{Dir: t.TempDir(), Nonces: nonceFile, Kexec: func(string, string, string) error {
		t.Error("kexec without a script")
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// A signed request is taken once, and not again after the service
// restarts within its 2-minute window: the nonce is in a file. Before,
// the nonces lived in memory and the restarted service answered 202.
func TestRestartRefusesReplay(t *testing.T) {
	key := testKey(t)
	nonceFile := filepath.Join(t.TempDir(), "state", "warm-nonces.json")
	ctx := context.Background()
	body, sig := Sign(key, "m-1", "j-1", time.Now())

	addr, stop := serveWarm(t, newTestService(t, key, nonceFile), DefaultLimits())
	if err := Trigger(ctx, addr, body, sig, 5*time.Second); err != nil {
		t.Fatalf("first request: %v", err)
	}
	stop()

	addr, _ = serveWarm(t, newTestService(t, key, nonceFile), DefaultLimits())
	if err := Trigger(ctx, addr, body, sig, 5*time.Second); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "nonce seen") {
		t.Errorf("the same request after a restart: %v, want 409 nonce seen", err)
	}
	fresh, fsig := Sign(key, "m-1", "j-2", time.Now())
	if err := Trigger(ctx, addr, fresh, fsig, 5*time.Second); err != nil {
		t.Errorf("a new request after a restart: %v", err)
	}
}

// The nonce file: expired entries are dropped when it is rewritten, a
// damaged file stops the service naming it, and a file that cannot be
// written refuses the request (503) rather than forget its nonce.
func TestNonceFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "n.json")
	n, err := loadNonces(p)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := n.take("a", t0.Add(time.Minute), t0); !ok || err != nil {
		t.Fatalf("take a: %v %v", ok, err)
	}
	if ok, _ := n.take("a", t0.Add(time.Minute), t0.Add(time.Second)); ok {
		t.Error("a taken twice")
	}
	if ok, err := n.take("b", t0.Add(3*time.Minute), t0.Add(2*time.Minute)); !ok || err != nil {
		t.Fatalf("take b: %v %v", ok, err)
	}
	again, err := loadNonces(p)
	if err != nil || len(again.seen) != 1 || again.seen["b"].IsZero() {
		t.Errorf("reloaded %v (%v), want only b (a expired)", again.seen, err)
	}
	os.WriteFile(p, []byte(`{"b":`), 0o600)
	if _, err := loadNonces(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("damaged file: %v, want an error naming %s", err, p)
	}
	blocked := filepath.Join(dir, "file-not-dir")
	os.WriteFile(blocked, nil, 0o600)
	n = &nonces{path: filepath.Join(blocked, "n.json"), seen: map[string]time.Time{}}
	if ok, err := n.take("c", t0.Add(time.Minute), t0); ok || err == nil || len(n.seen) != 0 {
		t.Errorf("unwritable file: taken %v, err %v, kept %v; want refused and forgotten", ok, err, n.seen)
	}
}

// 40 clients that send their headers and one byte of a body that never
// ends are all cut within the read timeout (before, only a header timeout
// was set and such connections stayed open past 35 s); a 41st connection
// from an address already holding its limit is closed at once.
func TestSlowClientsAreCut(t *testing.T) {
	lim := Limits{ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second, MaxConnsPerClient: 4}
	addr, _ := serveWarm(t, newTestService(t, testKey(t), filepath.Join(t.TempDir(), "n.json")), lim)
	start := time.Now()
	var wg sync.WaitGroup
	open := make([]time.Duration, 40)
	for i := range open {
		wg.Go(func() {
			// Each from its own loopback address, so the per-address cap
			// plays no part: only the timeouts close these.
			c := dialTLS(t, addr, fmt.Sprintf("127.0.0.%d", 10+i))
			io.WriteString(c, "POST "+Path+" HTTP/1.1\r\nHost: node\r\nContent-Length: 200\r\n\r\n{")
			open[i] = closedAfter(c, 10*time.Second)
		})
	}
	wg.Wait()
	for i, d := range open {
		if d < 0 || d > lim.ReadTimeout+2*time.Second {
			t.Errorf("connection %d: closed after %v (-1: still open after 10 s), want within the read timeout %v", i, d, lim.ReadTimeout)
		}
	}
	t.Logf("40 stalled bodies cut within %v", time.Since(start).Round(time.Millisecond))

	lim.ReadTimeout, lim.IdleTimeout = time.Minute, time.Minute // only the cap can close the fifth one soon
	addr, _ = serveWarm(t, newTestService(t, testKey(t), filepath.Join(t.TempDir(), "n.json")), lim)
	for range 4 {
		dialTLS(t, addr, "127.0.0.99")
	}
	raw, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.99")}}).Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if d := closedAfter(raw, 3*time.Second); d < 0 {
		t.Error("a fifth connection from one address stayed open (limit 4)")
	}
}

func dialTLS(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}},
		Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the node's certificate is self-signed
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedAfter is how long until the server closed c (a read ends without a
// timeout), or -1 when it is still open after limit.
func closedAfter(c net.Conn, limit time.Duration) time.Duration {
	if c == nil {
		return -1
	}
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				return -1
			}
			return time.Since(start)
		}
	}
}
