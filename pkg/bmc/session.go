package bmc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/stmcginnis/gofish/schemas"
)

// sessionsURI is where a Redfish session is created (DSP0266 mandates it).
const sessionsURI = "/redfish/v1/SessionService/Sessions"

// renewer is the outermost http.RoundTripper of a Client: it renews the
// client's Redfish session when the BMC ends it. A request that carries the
// session's token and is answered 401 means the token no longer counts
// (the session expired or the BMC dropped it): the renewer logs in once
// more with the client's password and sends the request once more with
// the new token. Requests of the same client that are in flight meanwhile
// wait for that one login rather than each logging in. A login the BMC
// refuses (a password changed elsewhere) is not tried again: it cost one
// failed login, and every later request of the client fails at once
// without being sent (see stop), so a poller cannot lock the account out.
//
// gofish keeps sending the first token; the renewer swaps it for the
// current one on the way out. Requests with other tokens (the proof of a
// rotated password, another client) pass untouched.
type renewer struct {
	next     http.RoundTripper
	endpoint string
	login    func(ctx context.Context) (token, location string, err error)
	stop     func(err error) // called once the BMC refused the password

	renewing sync.Mutex // one login at a time

	mu       sync.Mutex
	token    string          // the client's session token now ("" with basic auth)
	location string          // its session URI
	earlier  map[string]bool // tokens this session replaced
	stopped  error           // the BMC refused the password at a renewal
	renewals int
}

// noRenewKey marks a request that must not cause a login (a logout).
type noRenewKey struct{}

// adopt makes token (and its session URI) the client's session: after
// Dial and after a password rotation. An empty token (basic auth) turns
// renewal off.
func (r *renewer) adopt(token, location string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token, r.location, r.earlier, r.stopped = token, location, nil, nil
}

// current returns the session in force for token: the renewed one when
// token is the client's (now or earlier), else token itself.
func (r *renewer) current(token, location string) (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token != "" && (token == r.token || r.earlier[token]) {
		return r.token, r.location
	}
	return token, location
}

func (r *renewer) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := req.Header.Get("X-Auth-Token")
	if sent == "" {
		return r.next.RoundTrip(req)
	}
	r.mu.Lock()
	own := sent == r.token || r.earlier[sent]
	cur, stopped := r.token, r.stopped
	r.mu.Unlock()
	if !own {
		return r.next.RoundTrip(req)
	}
	if stopped != nil {
		return nil, stopped
	}
	if cur != sent {
		req = withToken(req, cur, nil)
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || req.Context().Value(noRenewKey{}) != nil {
		return resp, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil // cannot send the body again
	}
	fresh, rerr := r.renew(req.Context(), cur)
	if rerr != nil {
		resp.Body.Close()
		return nil, rerr
	}
	var body io.ReadCloser
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	resp.Body.Close()
	return r.next.RoundTrip(withToken(req, fresh, body))
}

// renew logs in again unless another request already did since stale was
// sent, and returns the token in force.
func (r *renewer) renew(ctx context.Context, stale string) (string, error) {
	r.renewing.Lock()
	defer r.renewing.Unlock()
	r.mu.Lock()
	cur, stopped := r.token, r.stopped
	r.mu.Unlock()
	if stopped != nil {
		return "", stopped
	}
	if cur != stale {
		return cur, nil
	}
	token, location, err := r.login(context.WithValue(ctx, noRenewKey{}, true))
	if err != nil {
		err = wrapErr(r.endpoint, "the BMC ended the session (HTTP 401); logging in again", err)
		if IsKind(err, KindAuth) {
			stop := &Error{Kind: KindAuth, Endpoint: r.endpoint, Err: err,
				Op: "not sent: the BMC refused the password when the session was renewed; ingot sends it no more (each try counts towards the account lockout): dial again with the current password"}
			r.mu.Lock()
			r.stopped = stop
			r.mu.Unlock()
			if r.stop != nil {
				r.stop(stop)
			}
		}
		return "", err
	}
	r.mu.Lock()
	if r.earlier == nil {
		r.earlier = map[string]bool{}
	}
	r.earlier[r.token] = true
	r.token, r.location = token, location
	r.renewals++
	r.mu.Unlock()
	return token, nil
}

// withToken copies req with another X-Auth-Token (and body, when given).
func withToken(req *http.Request, token string, body io.ReadCloser) *http.Request {
	out := req.Clone(req.Context())
	out.Header.Set("X-Auth-Token", token)
	if body != nil {
		out.Body = body
	}
	return out
}

// createSession logs in as the client's user with its password now (a
// rotation changes it) and returns the new session's token and URI.
func (c *Client) createSession(ctx context.Context) (string, string, error) {
	c.mu.Lock()
	user, pass := c.cfg.Username, c.cfg.Password
	c.mu.Unlock()
	payload, _ := json.Marshal(map[string]string{"UserName": user, "Password": pass})
	req, err := http.NewRequestWithContext(context.WithValue(ctx, rawKey{}, true), http.MethodPost, c.cfg.Endpoint+sessionsURI, bytes.NewReader(payload))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", "", schemas.ConstructError(resp.StatusCode, body)
	}
	token := resp.Header.Get("X-Auth-Token")
	if token == "" {
		return "", "", errors.New("the BMC created a session without an X-Auth-Token")
	}
	loc := resp.Header.Get("Location")
	if u, err := url.ParseRequestURI(loc); err == nil { // an absolute Location, as gofish reads it
		loc = u.RequestURI()
	}
	if loc == "" {
		var s struct {
			ID string `json:"@odata.id"`
		}
		_ = json.Unmarshal(body, &s)
		loc = s.ID
	}
	return token, loc, nil
}

// deleteSession logs out the session at location with its token. A
// session already gone (401, 404) is not an error.
func (c *Client) deleteSession(ctx context.Context, location, token string) error {
	ctx = context.WithValue(context.WithValue(ctx, noRenewKey{}, true), rawKey{}, true)
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.cfg.Endpoint+location, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode/100 == 2, resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusUnauthorized:
		return nil
	}
	return schemas.ConstructError(resp.StatusCode, body)
}

// Renewals counts the sessions this client opened again after the BMC
// ended its session (an idle timeout, a BMC reset).
func (c *Client) Renewals() int {
	c.ren.mu.Lock()
	defer c.ren.mu.Unlock()
	return c.ren.renewals
}

// sessionLimit reports a login refused because the BMC holds its maximum
// number of sessions: iDRAC answers 503 "The maximum number of user
// sessions is reached." (RAC0218); the Redfish Base registry calls it
// SessionLimitExceeded.
func sessionLimit(err error) bool {
	var be *Error
	if !errors.As(err, &be) {
		return false
	}
	for _, m := range be.Messages {
		if sessionLimitText(m) {
			return true
		}
	}
	return false
}

func sessionLimitText(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "maximum number of user sessions") || strings.Contains(l, "sessionlimitexceeded") ||
		strings.Contains(l, "rac0218")
}

// sessionLimitError names a refusal for lack of sessions and says what to
// do about it.
func sessionLimitError(endpoint string, err error) error {
	e := *wrapErr(endpoint, "", err).(*Error)
	e.Kind = KindBusy
	e.Op = fmt.Sprintf("dial: the BMC refuses a new session: it holds the maximum number of user sessions " +
		"(other tools or leaked sessions); log out sessions on the BMC or wait for them to expire, and share one " +
		"client per BMC (bmc.Pool)")
	return &e
}
