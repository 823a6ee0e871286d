package bmc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stmcginnis/gofish/schemas"
)

// maxBody bounds one Redfish response read into memory.
const maxBody = 64 << 20

// limiter is the innermost http.RoundTripper: it admits at most cap(sem)
// requests to the BMC at once (every request gofish makes passes through it,
// including those of its internal collection fan-out), gives each attempt its
// own read deadline and reads the whole body before the deadline ends.
type limiter struct {
	next        http.RoundTripper
	fresh       http.RoundTripper // for requests sent once (onceKey): a new connection each, so net/http never replays one
	sem         chan struct{}
	readTimeout time.Duration
	endpoint    string
	inFlight    atomic.Int64
	maxSeen     atomic.Int64
	requests    atomic.Int64
}

func (l *limiter) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case l.sem <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	defer func() { <-l.sem }()
	n := l.inFlight.Add(1)
	defer l.inFlight.Add(-1)
	for {
		m := l.maxSeen.Load()
		if n <= m || l.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	l.requests.Add(1)
	if n, ok := req.Context().Value(countKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}

	ctx, cancel := context.WithTimeout(req.Context(), l.readTimeout)
	defer cancel()
	next := l.next
	if once, _ := req.Context().Value(onceKey{}).(bool); once && l.fresh != nil {
		next = l.fresh
	}
	resp, err := next.RoundTrip(req.WithContext(ctx))
	if err == nil {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
	}
	if err != nil && ctx.Err() != nil && req.Context().Err() == nil {
		return nil, &Error{Kind: KindTimeout, Endpoint: l.endpoint,
			Op:  fmt.Sprintf("%s %s: no answer within the read timeout %s", req.Method, req.URL.Path, l.readTimeout),
			Err: context.DeadlineExceeded}
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// checker is the outermost http.RoundTripper: a GET answered 200 with an
// empty body or a Redfish error body (some captured BMCs do this) becomes a
// *Error of kind KindBadResponse carrying the body's messages. It also keeps
// the client from burning account-lockout attempts: basic credentials the
// BMC refused (401) are never sent again by this client, and a request that
// carries a password on trial (see trialKey) is sent once.
type checker struct {
	next     http.RoundTripper
	endpoint string
	quirks   *quirkLog

	mu      sync.Mutex
	refused map[string]bool // Authorization headers answered 401
}

func (c *checker) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/Actions/") {
		req = req.WithContext(context.WithValue(req.Context(), postKey{}, true))
	}
	if trial, _ := req.Context().Value(trialKey{}).(bool); trial && carriesPassword(req) {
		req = req.WithContext(context.WithValue(req.Context(), onceKey{}, true))
	}
	basic := req.Header.Get("Authorization")
	if basic != "" && c.wasRefused(basic) {
		return refusedBefore(req), nil
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && basic != "" && resp.StatusCode == http.StatusUnauthorized {
		c.mu.Lock()
		if c.refused == nil {
			c.refused = map[string]bool{}
		}
		c.refused[basic] = true
		c.mu.Unlock()
	}
	if err == nil && resp.StatusCode >= 400 && resp.StatusCode != http.StatusUnauthorized && req.Context().Value(rawKey{}) == nil {
		return nil, c.statusError(req, resp)
	}
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	op := fmt.Sprintf("GET %s", req.URL.Path)
	if len(bytes.TrimSpace(body)) == 0 {
		c.quirks.record(QuirkErrorBody200)
		return nil, &Error{Kind: KindBadResponse, Endpoint: c.endpoint, Op: op, Status: resp.StatusCode,
			Err: errors.New("HTTP 200 with an empty body; expected a Redfish resource")}
	}
	if se := errorBody(body); se != nil {
		c.quirks.record(QuirkErrorBody200)
		se.HTTPReturnedStatusCode = resp.StatusCode
		return nil, &Error{Kind: KindBadResponse, Endpoint: c.endpoint, Op: op, Status: resp.StatusCode,
			Messages: redfishMessages(se), Err: se}
	}
	return resp, nil
}

// statusError turns an answer of 400 or more into a *Error that names the
// request (method and path), the status and the BMC's Redfish messages, so
// a deviation no quirk knows reads "PATCH /redfish/v1/Systems/1: request
// rejected (HTTP 400): Base.1.0.PropertyUnknown: ...", never a bare 400.
// Err is gofish's *schemas.Error of the body (errors.As still finds it).
// A 401 is left to the renewer; requests marked rawKey read their status
// themselves.
func (c *checker) statusError(req *http.Request, resp *http.Response) error {
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	se := schemas.ConstructError(resp.StatusCode, body).(*schemas.Error)
	e := &Error{Kind: kindForStatus(resp.StatusCode), Endpoint: c.endpoint, Op: req.Method + " " + req.URL.Path,
		Status: resp.StatusCode, Messages: redfishMessages(se), Err: se}
	if len(se.ExtendedInfos) == 0 && se.Message != "" {
		c.quirks.record(QuirkMessageOnly)
	}
	if len(e.Messages) == 0 {
		if t := strings.TrimSpace(string(body)); t != "" && len(t) < 512 {
			e.Messages = []string{t}
		}
	}
	return e
}

func (c *checker) wasRefused(auth string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused[auth]
}

// refusedBefore answers, without sending it, a request whose basic
// credentials the BMC already refused: sent again, each request of an
// operation's fan-out would count as one more failed login towards the
// account lockout. Dial again (with the right password) to try again.
func refusedBefore(req *http.Request) *http.Response {
	body := `{"error":{"code":"Base.1.0.NoValidSession","message":"not sent: the BMC refused these basic credentials (HTTP 401) earlier; ` +
		`ingot does not send them again, so that they cost no more failed logins towards the account lockout"}}`
	return &http.Response{
		Status: "401 Unauthorized", StatusCode: http.StatusUnauthorized, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// carriesPassword reports whether req sends a password: a session login or
// basic credentials.
func carriesPassword(req *http.Request) bool {
	return req.Header.Get("Authorization") != "" ||
		req.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/SessionService/Sessions")
}

// trialKey marks a context whose requests carry a password not yet known to
// work (RotatePassword proving a new one): each try of a wrong password
// counts towards the BMC's account lockout, so the checker marks those
// requests with onceKey.
type trialKey struct{}

// onceKey marks a request that carries a password on trial: it is sent
// once, never retried (only a refused connection, which never reached the
// BMC, is tried again).
type onceKey struct{}

// countKey holds an *atomic.Int64 in a request context: the limiter counts
// there every attempt it sends, so one call (Readings) can report what it
// cost on a client that other callers share.
type countKey struct{}

// rawKey marks a request whose caller reads the status itself (session
// login and logout): the checker hands any answer back as it came.
type rawKey struct{}

// postKey marks an action POST (Reset, InsertMedia ...) in the request
// context: it must not run twice. (A session login is retried: a duplicate
// session expires on the BMC, a failed login fails the whole command.)
type postKey struct{}

// retryPolicy retries connection errors, 5xx (but 501), 409 and 429. It never
// retries a 401 (each try of a wrong password counts towards the BMC's
// account lockout), a request carrying a password on trial (onceKey) but
// for a refused connection, a read timeout (a hung BMC stays hung; the
// caller hears about it within one read timeout), a certificate that does
// not verify, a canceled context, nor an action whose connection failed
// after it may have been sent (only a refused connection is retried: a
// reset run twice restarts twice).
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		if resp != nil && err == nil {
			// The answer came: hand it back alone (a response with an error
			// is dropped by net/http with a complaint on the global log);
			// the caller sees its context's end when it reads on.
			return false, nil
		}
		return false, ctx.Err()
	}
	if once, _ := ctx.Value(onceKey{}).(bool); once {
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			return true, nil
		}
		return false, err
	}
	if err != nil {
		var be *Error
		if errors.As(err, &be) && be.Kind == KindTimeout || isCertError(err) {
			return false, err
		}
		if post, _ := ctx.Value(postKey{}).(bool); post && !errors.Is(err, syscall.ECONNREFUSED) {
			return false, err
		}
		if k := wrapErr("", "", err).(*Error).Kind; k == KindUnreachable || k == KindOther || k == KindBadResponse {
			return true, nil
		}
		return false, err
	}
	switch s := resp.StatusCode; {
	case s == http.StatusConflict, s == http.StatusTooManyRequests:
		return true, nil
	case s == http.StatusServiceUnavailable && refusedForSessions(resp):
		return false, nil // only a logout or an expiring session frees one: not seconds away
	case s >= 500 && s != http.StatusNotImplemented:
		return true, nil
	}
	return false, nil
}

// refusedForSessions reports a login answered "maximum number of user
// sessions" (iDRAC's 503 RAC0218, Redfish SessionLimitExceeded). The
// limiter has read the body into memory; it is put back for the caller.
func refusedForSessions(resp *http.Response) bool {
	if resp.Request == nil || resp.Request.Method != http.MethodPost ||
		!strings.HasSuffix(strings.TrimSuffix(resp.Request.URL.Path, "/"), "/SessionService/Sessions") || resp.Body == nil {
		return false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return err == nil && sessionLimitText(string(body))
}

// backoff waits wait, 2*wait, 4*wait, capped at 4*wait; a Retry-After header
// is honoured up to that cap.
func backoff(wait time.Duration) retryablehttp.Backoff {
	return func(_, _ time.Duration, attempt int, resp *http.Response) time.Duration {
		limit := 4 * wait
		if resp != nil {
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
				return min(time.Duration(s)*time.Second, limit)
			}
		}
		d := wait << min(attempt, 2)
		return min(d, limit)
	}
}
