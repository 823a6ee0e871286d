// Package bmc talks to a server's baseboard management controller over
// Redfish: power, one-time boot override, BIOS attributes, firmware and
// hardware inventory, sensor readings for telemetry (Readings), virtual
// media and account password rotation.
//
// It wraps gofish with the connection policy real BMCs need: session auth
// with a fallback to HTTP basic, TLS verified by default, separate connect
// and read timeouts, retries with backoff on 5xx/409/connection errors,
// at most MaxInFlight requests at once per BMC (enforced in the
// http.RoundTripper, so gofish's own fan-out obeys it too), a session the
// BMC ended renewed once (never a second try of a refused password), and
// sessions always logged out on Close. A Pool shares one Client per BMC
// among all callers. Every method takes a context that bounds that call
// alone. Errors are *Error values classified by Kind.
package bmc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stmcginnis/gofish"
)

// Config says how to reach and talk to one BMC. Zero fields take the
// defaults noted (Ironic's, which suit slow real BMCs).
type Config struct {
	Endpoint string // https://10.0.0.5 or http://127.0.0.1:8443 (no /redfish/v1)
	Username string
	Password string

	CAFile   string         // PEM bundle to verify the BMC's certificate with
	CAPool   *x509.CertPool // or a pool; both unset: the system roots
	Insecure bool           // skip TLS verification (lab only)

	ConnectTimeout time.Duration // TCP connect + TLS handshake; default 30s
	ReadTimeout    time.Duration // one request's answer; default 60s
	Retries        int           // retries after the first try; default 5, negative: none
	RetryWait      time.Duration // first wait between tries (doubling, capped at 4x); default 4s
	MaxInFlight    int           // requests in flight to this BMC at once; default 2

	SystemID        string        // the System power/boot/BIOS act on; default the first
	PowerOffTimeout time.Duration // graceful shutdown before forcing off; default 5m
	PollInterval    time.Duration // power state polling; default 2s

	Logger *slog.Logger     // default: silent
	Now    func() time.Time // clock for Readings.Taken; default time.Now
}

// DialFunc opens a Client; the engine and tests replace it.
type DialFunc func(ctx context.Context, cfg Config) (*Client, error)

// Client is an authenticated connection to one BMC. It is safe for
// concurrent use (a Pool shares one per BMC); Close logs out its session.
// A session the BMC ends (idle timeout, BMC reset) is renewed once per
// request that meets it (see renewer).
type Client struct {
	cfg    Config
	log    *slog.Logger
	lim    *limiter
	ren    *renewer
	http   *http.Client
	mu     sync.Mutex
	api    *gofish.APIClient
	basic  bool   // authenticated with HTTP basic (the BMC offered no sessions)
	sysURI string // the System power/boot/BIOS act on, once found
	stale  error  // why no password is known to work any more (api is nil): nothing is sent

	finding       sync.Mutex   // one search for sysURI at a time
	probing       sync.Mutex   // one Readings probe at a time
	healthProbing sync.Mutex   // one health probe at a time
	plan          *readingPlan // how Readings reads this BMC, once probed (readings.go)
	quirks        *quirkLog    // deviations met (quirks.go), shared with the transports
	idOnce        sync.Mutex   // one identity read at a time
	id            *identity    // who the BMC says it is, once read
	healthPlan    *healthPlan  // where Readings finds drive, GPU and memory health
}

func (cfg *Config) defaults() {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 60 * time.Second
	}
	if cfg.Retries == 0 {
		cfg.Retries = 5
	} else if cfg.Retries < 0 {
		cfg.Retries = 0
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = 4 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 2
	}
	if cfg.PowerOffTimeout <= 0 {
		cfg.PowerOffTimeout = 5 * time.Minute
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
}

// Dial connects to the BMC and authenticates: a Redfish session first, HTTP
// basic when the BMC offers no session service. A session created on a
// path that then fails is logged out before Dial returns.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	cfg.defaults()
	if !strings.HasPrefix(cfg.Endpoint, "http://") && !strings.HasPrefix(cfg.Endpoint, "https://") {
		return nil, &Error{Kind: KindInvalid, Endpoint: cfg.Endpoint, Op: "dial",
			Err: errors.New("endpoint must start with https:// (or http:// for a lab BMC)")}
	}
	ql := &quirkLog{}
	hc, lim, ren, err := newHTTPClient(cfg, ql)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, log: cfg.Logger, lim: lim, ren: ren, http: hc, quirks: ql}
	ren.login, ren.stop = c.createSession, c.stop
	if err := c.login(ctx); err != nil {
		hc.CloseIdleConnections()
		return nil, err
	}
	return c, nil
}

// newHTTPClient builds the transport chain:
// redirector -> renewer -> checker -> retryablehttp -> limiter -> http.Transport.
// net/http's own redirect following is off: the redirector follows (see
// QuirkRedirect).
func newHTTPClient(cfg Config, ql *quirkLog) (*http.Client, *limiter, *renewer, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.CAPool, InsecureSkipVerify: cfg.Insecure} //nolint:gosec // explicit lab opt-in
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("bmc %s: reading CA file %s: %w", cfg.Endpoint, cfg.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, nil, fmt.Errorf("bmc %s: CA file %s: expected PEM certificates, found none", cfg.Endpoint, cfg.CAFile)
		}
		tlsConf.RootCAs = pool
	}
	base := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: cfg.ConnectTimeout,
		MaxIdleConnsPerHost: cfg.MaxInFlight,
		IdleConnTimeout:     time.Minute,
		ForceAttemptHTTP2:   true,
	}
	fresh := base.Clone()
	fresh.DisableKeepAlives = true
	lim := &limiter{next: base, fresh: fresh, sem: make(chan struct{}, cfg.MaxInFlight), readTimeout: cfg.ReadTimeout, endpoint: cfg.Endpoint}
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	rc := &retryablehttp.Client{
		HTTPClient:   &http.Client{Transport: lim, CheckRedirect: noFollow},
		Logger:       nil,
		RetryWaitMin: cfg.RetryWait,
		RetryWaitMax: 4 * cfg.RetryWait,
		RetryMax:     cfg.Retries,
		CheckRetry:   retryPolicy,
		Backoff:      backoff(cfg.RetryWait),
		ErrorHandler: retryablehttp.PassthroughErrorHandler, // gofish sees the last status and body
		RequestLogHook: func(_ retryablehttp.Logger, r *http.Request, attempt int) {
			if attempt > 0 {
				cfg.Logger.Debug("bmc retry", "bmc", cfg.Endpoint, "method", r.Method, "path", r.URL.Path, "attempt", attempt)
			}
		},
	}
	top := &checker{next: &retryablehttp.RoundTripper{Client: rc}, endpoint: cfg.Endpoint, quirks: ql}
	ren := &renewer{next: top, endpoint: cfg.Endpoint}
	red := &redirector{next: ren, endpoint: cfg.Endpoint, quirks: ql}
	return &http.Client{Transport: red, CheckRedirect: noFollow}, lim, ren, nil
}

func (c *Client) gofishConfig(basic bool, user, password string) gofish.ClientConfig {
	return gofish.ClientConfig{
		Endpoint:              c.cfg.Endpoint,
		Username:              user,
		Password:              password,
		HTTPClient:            c.http,
		BasicAuth:             basic,
		MaxConcurrentRequests: int64(c.cfg.MaxInFlight),
		ReuseConnections:      true,
		NoModifyTransport:     true,
	}
}

// login authenticates c: a session, else basic auth verified by a GET.
func (c *Client) login(ctx context.Context) error {
	api, basic, err := c.connect(ctx, c.cfg.Username, c.cfg.Password)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.api, c.basic = api, basic
	c.mu.Unlock()
	c.adopt(api)
	return nil
}

// adopt makes api's session (none with basic auth) the one the renewer
// keeps alive.
func (c *Client) adopt(api *gofish.APIClient) {
	s, err := api.GetSession()
	if err != nil || s.Token == "" {
		c.ren.adopt("", "")
		return
	}
	c.ren.adopt(s.Token, s.ID)
}

// stop ends the client after the BMC refused its password at a session
// renewal: its calls fail at once, sending nothing.
func (c *Client) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.api, c.stale = nil, err
}

// stopped returns why the client no longer sends anything (nil while it
// works, also nil once closed).
func (c *Client) stopped() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stale
}

// closed reports a client that sends nothing any more: closed, or stopped.
func (c *Client) closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.api == nil
}

// connect opens a gofish client as user, session first.
func (c *Client) connect(ctx context.Context, user, password string) (*gofish.APIClient, bool, error) {
	api, err := gofish.ConnectContext(ctx, c.gofishConfig(false, user, password))
	if err == nil {
		if s, serr := api.GetSession(); serr == nil && s.Token != "" {
			if verr := c.verify(ctx, api); verr != nil {
				c.logout(api)
				return nil, false, wrapErr(c.cfg.Endpoint, "dial: checking the new session", verr)
			}
			return api, false, nil
		}
		// A session without a token is useless; log it out and use basic auth.
		c.logout(api)
	}
	sessErr := wrapErr(c.cfg.Endpoint, "dial: reading the service root and creating a session", err)
	if err != nil && sessionLimit(sessErr) {
		return nil, false, sessionLimitError(c.cfg.Endpoint, err)
	}
	if err != nil && !basicFallback(sessErr) {
		return nil, false, sessErr
	}
	// Fallback for BMCs without a usable SessionService: HTTP basic auth.
	api, berr := gofish.ConnectContext(ctx, c.gofishConfig(true, user, password))
	if berr == nil {
		berr = c.verify(ctx, api)
	}
	if berr != nil {
		if err != nil {
			c.log.Debug("bmc session login failed", "bmc", c.cfg.Endpoint, "err", sessErr)
		}
		return nil, false, wrapErr(c.cfg.Endpoint, "dial: basic auth after the session login failed", berr)
	}
	return api, true, nil
}

// basicFallback reports whether a failed session login may be followed by
// HTTP basic auth: only when the BMC turned the session service down (404,
// 405, 501, 400, 500 ...), never when it judged the credentials (401/403:
// the same password sent again would cost a second failed login towards
// the account lockout) nor when it is unreachable, busy or slow.
func basicFallback(err error) bool {
	var be *Error
	if !errors.As(err, &be) {
		return true
	}
	switch be.Kind {
	case KindAuth, KindBusy, KindTimeout, KindUnreachable, KindCanceled:
		return false
	}
	return true
}

// verify makes one authenticated request: the Systems collection.
func (c *Client) verify(ctx context.Context, api *gofish.APIClient) error {
	resp, err := api.WithContext(ctx).Get("/redfish/v1/Systems")
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

// logout deletes api's session (if any; the renewed one where the BMC
// ended the first) with a fresh short deadline, so a canceled caller still
// leaves no session behind. A session already gone is no error.
func (c *Client) logout(api *gofish.APIClient) error {
	if api == nil {
		return nil
	}
	s, err := api.GetSession()
	if err != nil || s.ID == "" {
		return nil
	}
	token, location := c.ren.current(s.Token, s.ID)
	return c.logoutSession(token, location)
}

// logoutSession deletes the session at location with a fresh deadline.
func (c *Client) logoutSession(token, location string) error {
	if location == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ReadTimeout)
	defer cancel()
	return wrapErr(c.cfg.Endpoint, "logging out session "+location, c.deleteSession(ctx, location, token))
}

// Close logs out the session and drops idle connections.
func (c *Client) Close() error {
	c.mu.Lock()
	api := c.api
	c.api = nil
	c.mu.Unlock()
	err := c.logout(api)
	c.http.CloseIdleConnections()
	return err
}

// Endpoint names the BMC.
func (c *Client) Endpoint() string { return c.cfg.Endpoint }

// BasicAuth reports whether the client fell back to HTTP basic auth.
func (c *Client) BasicAuth() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.basic
}

// Stats are the client's request counters.
type Stats struct {
	Requests    int64 // HTTP attempts sent (retries included)
	MaxInFlight int64 // most requests ever in flight at once
}

// Stats returns the request counters, counted in the RoundTripper.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.lim.requests.Load(), MaxInFlight: c.lim.maxSeen.Load()}
}

// gf returns the gofish client bound to ctx: every request it (and every
// object fetched through it) makes is canceled with ctx.
func (c *Client) gf(ctx context.Context) (*gofish.APIClient, error) {
	c.mu.Lock()
	api, stale := c.api, c.stale
	c.mu.Unlock()
	if api == nil {
		if stale != nil {
			return nil, stale
		}
		return nil, &Error{Kind: KindOther, Endpoint: c.cfg.Endpoint, Err: errors.New("client is closed")}
	}
	return api.WithContext(ctx), nil
}

func (c *Client) wrap(op string, err error) error { return wrapErr(c.cfg.Endpoint, op, err) }
