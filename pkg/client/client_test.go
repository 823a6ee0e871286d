package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// The retry policy: idempotent requests retry through 503; a POST the
// server may have acted on is never sent twice; errors name the server,
// the request and the status.
func TestRetryPolicy(t *testing.T) {
	cases := map[string]struct {
		method   string
		failures int // 503 answers before a 200
		calls    int32
		wantErr  string
	}{
		"GET through two 503s":   {method: "GET", failures: 2, calls: 3},
		"GET gives up":           {method: "GET", failures: 10, calls: 4, wantErr: "GET /api/v1/version: 503 Service Unavailable: draining"},
		"POST never sent twice":  {method: "POST", failures: 1, calls: 1, wantErr: "POST /api/v1/tokens: 503 Service Unavailable: draining"},
		"DELETE through a 503":   {method: "DELETE", failures: 1, calls: 2},
		"404 is not retried":     {method: "GET", failures: -1, calls: 1, wantErr: "404 Not Found: machine x: not found"},
		"PUT through two 503s":   {method: "PUT", failures: 2, calls: 3},
		"POST 422 is a decision": {method: "POST", failures: -2, calls: 1, wantErr: "422"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				switch {
				case c.failures == -1:
					w.WriteHeader(404)
					w.Write([]byte(`{"error":"machine x: not found"}`))
				case c.failures == -2:
					w.WriteHeader(422)
					w.Write([]byte(`{"error":"preflight failed"}`))
				case int(n) <= c.failures:
					w.WriteHeader(503)
					w.Write([]byte(`{"error":"draining"}`))
				default:
					w.Write([]byte(`{}`))
				}
			}))
			defer srv.Close()
			cl, err := New(Config{Server: srv.URL, Token: "t", RetryWait: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			path := map[string]string{"GET": "/api/v1/version", "POST": "/api/v1/tokens", "DELETE": "/api/v1/tokens/x", "PUT": "/api/v1/machines/x/recipe"}[c.method]
			_, err = cl.do(context.Background(), c.method, path, nil, nil)
			if got := calls.Load(); got != c.calls {
				t.Errorf("%d calls, want %d", got, c.calls)
			}
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), srv.URL)):
				t.Errorf("err = %v, want one naming %s and saying %q", err, srv.URL, c.wantErr)
			}
		})
	}
}

// A POST is retried when the connection was refused: nothing was sent.
func TestRetryRefusedPOST(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the server below starts
	var calls atomic.Int32
	go func() {
		time.Sleep(30 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.WriteHeader(201)
			w.Write([]byte(`{"secret":"s"}`))
		}))
	}()
	cl, _ := New(Config{Server: "http://" + addr, Token: "t", RetryWait: 20 * time.Millisecond, Retries: 5})
	got, err := cl.CreateToken(context.Background(), "ci", "", 0)
	if err != nil || got.Secret != "s" || calls.Load() != 1 {
		t.Fatalf("CreateToken = %+v, %v after %d calls; want one call through the refusals", got, err, calls.Load())
	}
}

func TestVersionWarning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.VersionHeader, "v2")
		w.Write([]byte(`{"version":"v2"}`))
	}))
	defer srv.Close()
	var warnings []string
	cl, _ := New(Config{Server: srv.URL, Version: "v1", Warn: func(m string) { warnings = append(warnings, m) }})
	for range 3 {
		if _, err := cl.Version(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "version v1, the server at "+srv.URL+" is v2") {
		t.Errorf("warnings %q: want exactly one naming both versions", warnings)
	}
}

func TestNewRefusesBadServer(t *testing.T) {
	if _, err := New(Config{Server: "10.0.0.1:8080"}); err == nil || !strings.Contains(err.Error(), "expected a URL") {
		t.Errorf("New = %v", err)
	}
}
