package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/tlsca"
)

// StatusError is a non-2xx answer from the server.
type StatusError struct {
	Method, Path string
	Status       int
	Body         string // the first 512 bytes of the answer
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: server answered %d: %s", e.Method, e.Path, e.Status, strings.TrimSpace(e.Body))
}

// Temporary reports whether retrying may help (5xx, 429).
func (e *StatusError) Temporary() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// AgentClient calls the agent API of one ingot server as one machine.
// Requests are retried with exponential backoff on connection errors, 5xx and
// 429, up to Attempts times; other statuses fail at once.
type AgentClient struct {
	Server     string        // base URL, e.g. http://10.77.0.1:8080
	Token      string        // the machine's one-time bearer token
	HTTP       *http.Client  // default: a client with a 30 s timeout
	Attempts   int           // default 8
	Backoff    time.Duration // first wait, doubled each try up to MaxBackoff; default 500 ms
	MaxBackoff time.Duration // default 10 s
	Logger     *slog.Logger  // default: discard
	// MAC identifies the machine instead of Token (discovery agent, installed
	// OS): sent as ?mac=MAC, with no Authorization header.
	MAC string
	// CA is the fingerprint (sha256:HEX) of the certificate the server's
	// TLS chain must contain (pkg/tlsca.Pinned); used when HTTP is nil.
	CA string

	pinOnce sync.Once
	pinned  *http.Client
	pinErr  error
}

// NewAgentClient returns a client with the defaults.
func NewAgentClient(server, token string, logger *slog.Logger) *AgentClient {
	return &AgentClient{Server: strings.TrimRight(server, "/"), Token: token, Logger: logger}
}

// Exchange trades the boot credential in Token for the job's agent
// credential, which replaces Token for every later call. Retried like any
// call: the server answers a repeat from the same address with a fresh
// credential that replaces the one before.
func (c *AgentClient) Exchange(ctx context.Context) (Exchange, error) {
	return c.credential(ctx, PathExchange)
}

// RequestCredential asks for the boot credential by MAC, where no iPXE
// script carried one (UEFI HTTP boot, virtual media). The server gives it
// only to the address tied to MAC, as it does for the script; it replaces
// Token and is then exchanged like the script's.
func (c *AgentClient) RequestCredential(ctx context.Context) error {
	_, err := c.credential(ctx, PathCredential)
	return err
}

// credential posts to path and takes the credential it answers as Token.
func (c *AgentClient) credential(ctx context.Context, path string) (Exchange, error) {
	var x Exchange
	err := c.do(ctx, http.MethodPost, path, []byte("{}"), func(r io.Reader) error {
		if err := json.NewDecoder(io.LimitReader(r, 1<<16)).Decode(&x); err != nil {
			return fmt.Errorf("decoding the credential: %w", err)
		}
		if x.Token == "" {
			return errors.New("the answer has no token")
		}
		return nil
	})
	if err != nil {
		return Exchange{}, err
	}
	c.Token = x.Token
	return x, nil
}

// Peer asks for the partner of a fabric test (the installed OS's burn-in).
func (c *AgentClient) Peer(ctx context.Context, req PeerRequest) (Peer, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return Peer{}, err
	}
	var p Peer
	err = c.do(ctx, http.MethodPost, PathPeer, b, func(r io.Reader) error {
		return json.NewDecoder(io.LimitReader(r, 1<<16)).Decode(&p)
	})
	return p, err
}

// Task fetches the machine's task.
func (c *AgentClient) Task(ctx context.Context) (Task, error) {
	var t Task
	err := c.do(ctx, http.MethodGet, PathTask, nil, func(r io.Reader) error {
		var err error
		t, err = DecodeTask(r)
		return err
	})
	return t, err
}

// Inventory posts the in-band inventory.
func (c *AgentClient) Inventory(ctx context.Context, inv machine.Inventory) error {
	return c.post(ctx, PathInventory, inv)
}

// Progress posts one progress report.
func (c *AgentClient) Progress(ctx context.Context, p Progress) error {
	return c.post(ctx, PathProgress, p)
}

// Checks posts the acceptance check results.
func (c *AgentClient) Checks(ctx context.Context, rs []CheckResult) error {
	if rs == nil {
		rs = []CheckResult{}
	}
	return c.post(ctx, PathChecks, rs)
}

// Log posts console lines.
func (c *AgentClient) Log(ctx context.Context, lines []string) error {
	return c.post(ctx, PathLog, Log{Lines: lines})
}

// Done posts the end of the agent's work.
func (c *AgentClient) Done(ctx context.Context, d Done) error {
	return c.post(ctx, PathDone, d)
}

// FirstBoot posts what the installed OS runs and its burn-in results (used
// by the first-boot unit).
func (c *AgentClient) FirstBoot(ctx context.Context, fb FirstBoot) error {
	return c.post(ctx, PathFirstboot, fb)
}

func (c *AgentClient) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding %s body: %w", path, err)
	}
	return c.do(ctx, http.MethodPost, path, b, nil)
}

func (c *AgentClient) do(ctx context.Context, method, path string, body []byte, read func(io.Reader) error) error {
	attempts, wait := c.Attempts, c.Backoff
	if attempts <= 0 {
		attempts = 8
	}
	if wait <= 0 {
		wait = 500 * time.Millisecond
	}
	maxWait := c.MaxBackoff
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	var last error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			d := wait
			if ra := retryAfter(last); ra > 0 {
				d = ra
			}
			c.logger().Debug("agent api retry", "path", path, "attempt", i+1, "wait", d, "err", last)
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s: %w (last error: %v)", method, path, ctx.Err(), last)
			case <-time.After(d):
			}
			wait = min(wait*2, maxWait)
		}
		last = c.once(ctx, method, path, body, read)
		if last == nil {
			return nil
		}
		var se *StatusError
		if errors.As(last, &se) && !se.Temporary() {
			return last
		}
		var pe *tlsca.PinError
		if errors.Is(last, errDecode) || errors.As(last, &pe) || ctx.Err() != nil {
			return last
		}
	}
	return fmt.Errorf("%s %s: giving up after %d attempts: %w", method, path, attempts, last)
}

var errDecode = errors.New("bad answer body")

type retryAfterError struct {
	*StatusError
	after time.Duration
}

func (e *retryAfterError) Unwrap() error { return e.StatusError }

func retryAfter(err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return min(ra.after, time.Minute)
	}
	return 0
}

// httpClient is HTTP, else a client that pins CA, else a plain one.
func (c *AgentClient) httpClient() (*http.Client, error) {
	if c.HTTP != nil {
		return c.HTTP, nil
	}
	c.pinOnce.Do(func() {
		c.pinned = &http.Client{Timeout: 30 * time.Second}
		if c.CA == "" {
			return
		}
		cfg, err := tlsca.Pinned(c.CA)
		if err != nil {
			c.pinErr = err
			return
		}
		c.pinned.Transport = &http.Transport{Proxy: nil, TLSClientConfig: cfg, TLSHandshakeTimeout: 10 * time.Second}
	})
	return c.pinned, c.pinErr
}

func (c *AgentClient) once(ctx context.Context, method, path string, body []byte, read func(io.Reader) error) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	target := c.Server + path
	if c.Token == "" && c.MAC != "" {
		target += "?mac=" + url.QueryEscape(c.MAC)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc, err := c.httpClient()
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		se := &StatusError{Method: method, Path: path, Status: resp.StatusCode, Body: string(b)}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			return &retryAfterError{StatusError: se, after: time.Duration(s) * time.Second}
		}
		return se
	}
	if read != nil {
		if err := read(resp.Body); err != nil {
			return fmt.Errorf("%s %s: %w: %w", method, path, errDecode, err)
		}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return nil
}

func (c *AgentClient) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// BearerToken returns the token of an `Authorization: Bearer TOKEN` header,
// for the server side.
func BearerToken(r *http.Request) (string, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	return tok, ok && tok != ""
}
