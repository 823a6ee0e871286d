package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/fleet"
)

// Sessions live in this process's memory, not in the store. A session is
// only a shortcut to a token the store already holds (every use checks
// the token again with fleet.Authenticate), so losing them at a restart
// costs a login and nothing else, and the store needs no new record type.
// With several ingot instances behind one name (an etcd store) a login
// holds on the instance that made it; a store-backed table would then
// implement the same three operations (create, look up by cookie, end).

// CookieName is the session cookie. The __Host- prefix makes the browser
// keep it only when it is Secure, for this host, with Path=/.
const CookieName = "__Host-ingot_session"

// maxSessions bounds the sessions kept: past it the oldest ends.
const maxSessions = 10000

// Why a request has no session; each is shown on the login page.
var (
	errNoSession = errors.New("not logged in")
	errExpired   = errors.New("the session expired")
	errLoggedOut = errors.New("logged out")
)

// session is one logged-in browser.
type session struct {
	key      string // sha256 of the cookie value
	csrf     string // the token every form carries
	secret   string // the operator token, checked again at each use
	name     string // the token's name: the actor of every action
	readOnly bool
	created  time.Time
	expires  time.Time // created + TTL
	// done closes when the session ends (logout, expiry, the token
	// revoked): live streams end with it.
	done chan struct{}

	mu       sync.Mutex
	lastSeen time.Time
	ended    bool
}

// Actor is who the session's actions are recorded as, the form the API
// uses for the same token.
func (s *session) Actor() string { return "operator:" + s.name }

// Name is the token's name.
func (s *session) Name() string { return s.name }

// CanAct reports whether the session may take actions.
func (s *session) CanAct() bool { return s != nil && !s.readOnly }

// CSRF is the token forms carry.
func (s *session) CSRF() string { return s.csrf }

func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		close(s.done)
	}
}

// mayAct checks an action: an operator token, and the form's (or the
// X-CSRF-Token header's) CSRF token.
func (s *session) mayAct(r *http.Request) error {
	if s.readOnly {
		return &statusError{http.StatusForbidden, fmt.Sprintf("token %s is read-only: this needs an operator token", s.name)}
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return &statusError{http.StatusForbidden, "the form's CSRF token is missing or not this session's: reload the page and try again"}
	}
	return nil
}

type sessions struct {
	now       func() time.Time
	ttl, idle time.Duration
	mu        sync.Mutex
	byKey     map[string]*session
}

func newSessions(now func() time.Time, ttl, idle time.Duration) *sessions {
	return &sessions{now: now, ttl: ttl, idle: idle, byKey: map[string]*session{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func keyOf(cookie string) string {
	h := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(h[:])
}

// create starts a session for an authenticated token and returns the
// cookie value that names it.
func (ss *sessions) create(secret string, op fleet.Operator) (string, *session) {
	cookie := randomHex(32)
	now := ss.now()
	s := &session{key: keyOf(cookie), csrf: randomHex(32), secret: secret, name: op.Name, readOnly: op.ReadOnly,
		created: now, expires: now.Add(ss.ttl), lastSeen: now, done: make(chan struct{})}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepLocked(now)
	ss.byKey[s.key] = s
	return cookie, s
}

// sweepLocked ends expired sessions, and the oldest past maxSessions.
func (ss *sessions) sweepLocked(now time.Time) {
	var oldest *session
	for k, s := range ss.byKey {
		if ss.expiredAt(s, now) {
			s.end()
			delete(ss.byKey, k)
		} else if oldest == nil || s.created.Before(oldest.created) {
			oldest = s
		}
	}
	if len(ss.byKey) >= maxSessions && oldest != nil {
		oldest.end()
		delete(ss.byKey, oldest.key)
	}
}

func (ss *sessions) expiredAt(s *session, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !now.Before(s.expires) || now.Sub(s.lastSeen) >= ss.idle
}

// check finds the request's session and checks it is still good: not
// expired, not idle too long, and its token still authenticates (a
// revoked or expired token ends it at once). A page request counts as
// use (touch); a stream's own checks do not.
func (ss *sessions) check(r *http.Request, fl *fleet.Service) (*session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, errNoSession
	}
	ss.mu.Lock()
	s := ss.byKey[keyOf(c.Value)]
	ss.mu.Unlock()
	if s == nil {
		return nil, errNoSession
	}
	if err := ss.alive(r.Context(), s, fl); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lastSeen = ss.now()
	s.mu.Unlock()
	return s, nil
}

// alive checks a session without counting it as use; a session found
// dead is ended.
func (ss *sessions) alive(ctx context.Context, s *session, fl *fleet.Service) error {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	err := error(nil)
	switch {
	case ended:
		err = errLoggedOut
	case ss.expiredAt(s, ss.now()):
		err = errExpired
	default:
		if _, aerr := fl.Authenticate(ctx, s.secret); aerr != nil {
			err = fmt.Errorf("token %s no longer works (%w)", s.name, aerr)
		}
	}
	if err != nil {
		ss.remove(s)
	}
	return err
}

// remove ends a session and forgets it.
func (ss *sessions) remove(s *session) {
	s.end()
	ss.mu.Lock()
	delete(ss.byKey, s.key)
	ss.mu.Unlock()
}

func setCookie(w http.ResponseWriter, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: int(ttl.Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

func clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// Why the login page is shown, by code: a fixed text each, so the query
// string cannot put words on the page.
var loginReasons = map[string]string{
	"none":    "Log in with an operator or read-only token.",
	"expired": "Your session expired: log in again.",
	"revoked": "Your token no longer works (revoked or expired): log in with another.",
	"out":     "You are logged out.",
}

func loginURL(next string, why error) string {
	code := "none"
	switch {
	case errors.Is(why, errExpired):
		code = "expired"
	case errors.Is(why, fleet.ErrUnauthorized):
		code = "revoked"
	case errors.Is(why, errLoggedOut):
		code = "out"
	}
	return Prefix + "login?" + url.Values{"next": {safeNext(next)}, "why": {code}}.Encode()
}

// safeNext keeps a post-login target on the dashboard: a path under
// Prefix, never another host.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, Prefix) || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, "//") {
		return Prefix
	}
	return u.RequestURI()
}

type loginView struct {
	Message, Error, Next string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, _ *session) error {
	if _, err := s.sessions.check(r, s.cfg.Fleet); err == nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return nil
	}
	msg, ok := loginReasons[r.URL.Query().Get("why")]
	if !ok {
		msg = loginReasons["none"]
	}
	return s.render(w, r, http.StatusOK, "login", nil, "Log in", loginView{Message: msg, Next: safeNext(r.URL.Query().Get("next"))})
}

// login turns a token into a session: the same rule as the API's bearer
// tokens (fleet.Authenticate); machine credentials cannot log in.
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ *session) error {
	secret := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	op, err := s.cfg.Fleet.Authenticate(r.Context(), secret)
	if errors.Is(err, fleet.ErrMachineCredential) {
		err = errors.New("a machine's credential cannot log in: use an operator or read-only token")
	}
	if secret == "" {
		err = errors.New("paste a token (ingot token create NAME --scope read-only makes one)")
	}
	if err != nil {
		s.log.Info("dashboard login refused", "from", r.RemoteAddr, "err", err)
		return s.render(w, r, http.StatusUnauthorized, "login", nil, "Log in",
			loginView{Message: loginReasons["none"], Error: err.Error(), Next: next})
	}
	cookie, _ := s.sessions.create(secret, op)
	setCookie(w, cookie, s.cfg.SessionTTL)
	s.log.Info("dashboard login", "token", op.TokenID, "name", op.Name, "read_only", op.ReadOnly, "from", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// logout ends the session (its streams too). It needs the CSRF token:
// another site cannot log an operator out.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) error {
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(sess.csrf)) != 1 {
		return &statusError{http.StatusForbidden, "the form's CSRF token is missing or not this session's: reload the page and try again"}
	}
	s.sessions.remove(sess)
	clearCookie(w)
	http.Redirect(w, r, loginURL(Prefix, errLoggedOut), http.StatusSeeOther)
	return nil
}
