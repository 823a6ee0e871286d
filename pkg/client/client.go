// Package client is the typed client of ingot's operator API, the one way
// the CLI (cmd/ingot) and the lab (pkg/lab) reach a server. It has one
// retry and error policy:
//
//   - Reads and idempotent writes (GET, PUT, DELETE) are retried with
//     exponential backoff on connection errors and on 502, 503 and 504.
//     POST is retried only when the connection was refused, so a request
//     the server may have acted on is never sent twice.
//   - Every other failure is an *Error naming the server, the request and
//     the HTTP status, with the server's message.
//   - The first answer whose version differs from Config.Version calls
//     Config.Warn once.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// Config builds a Client.
type Config struct {
	Server string // base URL, e.g. https://ingot.mgmt:8443
	Token  string // operator token
	// HTTP is the transport (TLS settings, a namespace's dialer); nil: a
	// client with a 60 s timeout.
	HTTP *http.Client
	// Version is the caller's own version; Warn is called once with a
	// message when the server answers with another.
	Version string
	Warn    func(msg string)
	// Retries is how many times a retryable request is tried again
	// (default 3); RetryWait the first wait, doubled each time (default
	// 500 ms, at most 5 s).
	Retries   int
	RetryWait time.Duration
	Logger    *slog.Logger
}

// Client calls one ingot server's operator API. Safe for concurrent use.
type Client struct {
	cfg  Config
	base string
	rc   *retryablehttp.Client
	once sync.Once
}

// New returns a client for cfg.Server.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(cfg.Server, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("server %q: expected a URL such as https://ingot.example:8443 or http://127.0.0.1:8080", cfg.Server)
	}
	if cfg.Retries == 0 {
		cfg.Retries = 3
	}
	if cfg.RetryWait == 0 {
		cfg.RetryWait = 500 * time.Millisecond
	}
	rc := retryablehttp.NewClient()
	hc := &http.Client{Timeout: 60 * time.Second}
	if cfg.HTTP != nil {
		copied := *cfg.HTTP
		hc = &copied
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = methodTransport{next: next}
	rc.HTTPClient = hc
	rc.RetryMax, rc.RetryWaitMin, rc.RetryWaitMax = max(cfg.Retries, 0), cfg.RetryWait, 5*time.Second
	rc.CheckRetry = checkRetry
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.Logger = nil
	if cfg.Logger != nil {
		rc.Logger = cfg.Logger
	}
	return &Client{cfg: cfg, base: base, rc: rc}, nil
}

// Server is the base URL the client talks to.
func (c *Client) Server() string { return c.base }

// Error is an answer of the server with a failing status, or a request
// that never got one (Status 0).
type Error struct {
	Server, Method, Path string
	Status               int
	Message              string
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("ingot server %s: %s %s: %s", e.Server, e.Method, e.Path, e.Message)
	}
	return fmt.Sprintf("ingot server %s: %s %s: %d %s: %s", e.Server, e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Message)
}

// StatusOf returns the HTTP status of an *Error in err's chain, 0 if none.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// checkRetry: idempotent methods retry on transport errors and 502-504;
// POST only when the connection was refused (nothing was sent).
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	var method string
	if resp != nil && resp.Request != nil {
		method = resp.Request.Method
	}
	if err != nil {
		if untrusted(err) {
			return false, nil // asking again will not make the certificate trusted
		}
		return errors.Is(err, syscall.ECONNREFUSED) || idempotentErr(err), nil
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return method != http.MethodPost, nil
	}
	return false, nil
}

// untrusted reports a TLS verification failure: the server is not the one
// --ca says, or no CA was given.
func untrusted(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var ve *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &ve) || errors.As(err, &rh)
}

// idempotentErr marks transport errors of requests safe to repeat
// (methodTransport tags them with the request's method).
func idempotentErr(err error) bool {
	var m *methodError
	return errors.As(err, &m) && m.method != http.MethodPost
}

type methodError struct {
	method string
	err    error
}

func (e *methodError) Error() string { return e.err.Error() }
func (e *methodError) Unwrap() error { return e.err }

// methodTransport tags transport errors with the request's method, so
// checkRetry (which sees no request on a transport error) can decide.
type methodTransport struct{ next http.RoundTripper }

func (t methodTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, &methodError{method: r.Method, err: err}
	}
	return resp, nil
}

// do sends a JSON request and decodes a JSON answer into out; a status of
// 300 or more is an *Error unless listed in also (answers whose body still
// holds the result). It returns the answer's headers.
func (c *Client) do(ctx context.Context, method, path string, in, out any, also ...int) (http.Header, error) {
	return c.doHeader(ctx, method, path, nil, in, out, also...)
}

// doHeader is do with request headers.
func (c *Client) doHeader(ctx context.Context, method, path string, header http.Header, in, out any, also ...int) (http.Header, error) {
	resp, err := c.send(ctx, method, path, header, in)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	c.checkVersion(resp.Header.Get(wire.VersionHeader))
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, &Error{Server: c.base, Method: method, Path: path, Status: resp.StatusCode, Message: "reading the answer: " + err.Error()}
	}
	if resp.StatusCode >= 300 && !slices.Contains(also, resp.StatusCode) {
		return resp.Header, &Error{Server: c.base, Method: method, Path: path, Status: resp.StatusCode, Message: message(data)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.Header, &Error{Server: c.base, Method: method, Path: path, Status: resp.StatusCode, Message: "decoding the answer: " + err.Error()}
		}
	}
	return resp.Header, nil
}

// send sends a request (in as JSON, if any) and returns the answer, whose
// body the caller closes; a request that got no answer is an *Error.
func (c *Client) send(ctx context.Context, method, path string, header http.Header, in any) (*http.Response, error) {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, c.base+path, bytesOrNil(body))
	if err != nil {
		return nil, &Error{Server: c.base, Method: method, Path: path, Message: err.Error()}
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.rc.Do(req)
	if err != nil {
		msg := err.Error()
		if untrusted(err) {
			msg += " (trust the server's CA with --ca FILE: `ingot serve` makes it as DATA/tls/ca.pem and logs its fingerprint)"
		}
		return nil, &Error{Server: c.base, Method: method, Path: path, Message: msg}
	}
	return resp, nil
}

func bytesOrNil(b []byte) any {
	if b == nil {
		return nil
	}
	return bytes.NewReader(b)
}

// message is the server's {"error": ...}, else the answer's first line.
func message(data []byte) string {
	var e wire.Error
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return e.Error
	}
	s := strings.TrimSpace(string(data))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func (c *Client) checkVersion(server string) {
	if server == "" || c.cfg.Version == "" || server == c.cfg.Version || c.cfg.Warn == nil {
		return
	}
	c.once.Do(func() {
		c.cfg.Warn(fmt.Sprintf("this client is version %s, the server at %s is %s: commands and answers may differ", c.cfg.Version, c.base, server))
	})
}
