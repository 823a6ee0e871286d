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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// maxBody bounds one Redfish response read into memory.
const maxBody = 64 << 20

// limiter is the innermost http.RoundTripper: it admits at most cap(sem)
// requests to the BMC at once (every request gofish makes passes through it,
// including those of its internal collection fan-out), gives each attempt its
// own read deadline and reads the whole body before the deadline ends.
type limiter struct {
	next        http.RoundTripper
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

	ctx, cancel := context.WithTimeout(req.Context(), l.readTimeout)
	defer cancel()
	resp, err := l.next.RoundTrip(req.WithContext(ctx))
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
// *Error of kind KindBadResponse carrying the body's messages.
type checker struct {
	next     http.RoundTripper
	endpoint string
}

func (c *checker) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.Contains(req.URL.Path, "/Actions/") {
		req = req.WithContext(context.WithValue(req.Context(), postKey{}, true))
	}
	resp, err := c.next.RoundTrip(req)
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
		return nil, &Error{Kind: KindBadResponse, Endpoint: c.endpoint, Op: op, Status: resp.StatusCode,
			Err: errors.New("HTTP 200 with an empty body; expected a Redfish resource")}
	}
	if se := errorBody(body); se != nil {
		se.HTTPReturnedStatusCode = resp.StatusCode
		return nil, &Error{Kind: KindBadResponse, Endpoint: c.endpoint, Op: op, Status: resp.StatusCode,
			Messages: redfishMessages(se), Err: se}
	}
	return resp, nil
}

// postKey marks an action POST (Reset, InsertMedia ...) in the request
// context: it must not run twice. (A session login is retried: a duplicate
// session expires on the BMC, a failed login fails the whole command.)
type postKey struct{}

// retryPolicy retries connection errors, 5xx (but 501), 409 and 429. It never
// retries a read timeout (a hung BMC stays hung; the caller hears about it
// within one read timeout), a certificate that does not verify, a canceled
// context, nor an action whose connection failed after it may have been sent
// (only a refused connection is retried: a reset run twice restarts twice).
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
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
	case s >= 500 && s != http.StatusNotImplemented:
		return true, nil
	}
	return false, nil
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
