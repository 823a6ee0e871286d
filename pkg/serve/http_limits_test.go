package serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Slow and idle clients are cut, and one client address cannot hold more
// connections than its limit: before, 100 idle keep-alive and 100
// stalled-body connections were all still open after 40 s.
func TestHTTPLimits(t *testing.T) {
	addr := limitedServe(t, 300*time.Millisecond, 4)
	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := io.ReadAll(c)
		return err == nil // EOF: the server closed it; a timeout is an error
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	stalled := dial() // headers, then a body that never comes
	io.WriteString(stalled, "POST /api/v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
	if !closedWithin(stalled, 3*time.Second) {
		t.Error("a stalled request body was not cut within the read timeout")
	}
	idle := dial() // one request, then silence on a keep-alive connection
	io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz on the idle connection: %v", err)
	}
	resp.Body.Close()
	if !closedWithin(idle, 3*time.Second) {
		t.Error("an idle keep-alive connection was not closed within the idle timeout")
	}

	// The cap, on a server whose timeouts are long: only the cap can close
	// the fifth connection this soon.
	addr = limitedServe(t, 10*time.Second, 4)
	var held []net.Conn
	for range 4 {
		held = append(held, dial())
	}
	time.Sleep(50 * time.Millisecond) // the server accepted them
	extra := dial()
	if !closedWithin(extra, time.Second) {
		t.Error("a fifth connection from one address was not closed at once (limit 4)")
	}
	for _, c := range held {
		c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	c := dial()
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if b, _ := io.ReadAll(c); !strings.Contains(string(b), "200 OK") {
		t.Errorf("after the held connections closed, a new one got %q", b)
	}
}

// limitedServe runs serve's HTTP on loopback with these limits.
func limitedServe(t *testing.T, timeout time.Duration, conns int) string {
	t.Helper()
	cfg, d := httpOnly(t)
	cfg.HTTPReadTimeout, cfg.HTTPIdleTimeout, cfg.HTTPMaxConnsPerClient = timeout, timeout, conns
	d.Mount = []func(*http.ServeMux){func(m *http.ServeMux) {
		m.HandleFunc("POST /api/v1/echo", func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) })
	}}
	a, _ := startRun(t, cfg, d)
	return a.HTTP.String()
}

// serve passes its public limit to the boot routes: with --public-rate 1
// (bursts of 2), 20 quick /ipxe requests from one address get 2 answers
// and 18 429s, and /uki/ and a missing /artifacts/ name are limited the
// same way. Before, serve built the boot handler without the limiter and
// /ipxe answered 200 times in 1.9 s.
func TestPublicRateLimitWired(t *testing.T) {
	cfg, d := httpOnly(t)
	cfg.PublicRate = 1
	a, _ := startRun(t, cfg, d)
	for i, path := range []string{"/ipxe?mac=52:54:00:00:00:01", "/uki/52-54-00-00-00-02.efi", "/artifacts/no-such-name"} {
		// Each route from its own loopback address: one bucket per address.
		c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+i))}}).DialContext}}
		limited := 0
		for range 20 {
			resp, err := c.Get("http://" + a.HTTP.String() + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				limited++
			}
		}
		c.CloseIdleConnections()
		if limited < 17 {
			t.Errorf("%s: %d of 20 requests limited, want 18 (a burst of 2)", path, limited)
		}
	}
}
