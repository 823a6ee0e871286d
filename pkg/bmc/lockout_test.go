package bmc_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// edge wraps a virtual BMC with a test's own behaviour for some requests:
// when hook answers (returns true) the BMC never sees the request.
type edge struct {
	b    *vbmc.BMC
	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request, body []byte) bool
}

func (e *edge) setHook(h func(w http.ResponseWriter, r *http.Request, body []byte) bool) {
	e.mu.Lock()
	e.hook = h
	e.mu.Unlock()
}

func (e *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	e.mu.Lock()
	hook := e.hook
	e.mu.Unlock()
	if hook != nil && hook(w, r, body) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	e.b.ServeHTTP(w, r)
}

// lockoutBMC serves mockup with an account-lockout policy (the duration is
// long: nothing in these tests waits for a lock to end), behind an edge.
func lockoutBMC(t *testing.T, mockup string, l vbmc.Lockout, mod ...func(*vbmc.Config)) (*vbmc.BMC, *edge, string) {
	t.Helper()
	cfg := vbmc.Config{Root: mockupDir(t, mockup), Username: testUser, Password: testPassword, Lockout: l}
	for _, m := range mod {
		m(&cfg)
	}
	return edgeBMC(t, cfg)
}

// edgeBMC serves a virtual BMC made from cfg behind an edge.
func edgeBMC(t *testing.T, cfg vbmc.Config) (*vbmc.BMC, *edge, string) {
	t.Helper()
	b, err := vbmc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &edge{b: b}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return b, e, srv.URL
}

// noSessions makes the edge refuse session creation (405), as BMCs without
// a SessionService do: the client falls back to basic auth.
func noSessions(w http.ResponseWriter, r *http.Request, _ []byte) bool {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions") {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return true
	}
	return false
}

// loginPassword is the password a request tries: the session creation's
// Password or the basic credentials' ("" when it carries none).
func loginPassword(r *http.Request, body []byte) string {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions") {
		var login struct{ Password string }
		_ = json.Unmarshal(body, &login)
		return login.Password
	}
	_, p, _ := r.BasicAuth()
	return p
}

// A wrong password costs exactly one failed login per operation: the client
// never retries a 401 and never tries basic auth after a session login was
// refused. With threshold 3, two operations leave the account unlocked.
func TestWrongPasswordCostsOneFailedLogin(t *testing.T) {
	threshold3 := vbmc.Lockout{Threshold: 3, Duration: 10 * time.Minute}
	cases := map[string]struct {
		hook func(http.ResponseWriter, *http.Request, []byte) bool
	}{
		"session login":                  {},
		"basic auth (no SessionService)": {hook: noSessions},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, e, url := lockoutBMC(t, "dmtf-public-rackmount1", threshold3)
			e.setHook(tc.hook)
			cfg := testConfig(url)
			cfg.Password = "wrong"
			for i := 1; i <= 2; i++ {
				if _, err := bmc.Dial(ctxT(t), cfg); !bmc.IsKind(err, bmc.KindAuth) {
					t.Fatalf("Dial %d with a wrong password: %v, want KindAuth", i, err)
				}
				if got := b.Stats().FailedLogins; got != int64(i) {
					t.Fatalf("after %d Dials with a wrong password the BMC counted %d failed logins, want %d", i, got, i)
				}
			}
			if b.Locked(testUser) {
				t.Fatal("locked after 2 failed Dials at threshold 3")
			}
			closeAndCheckSessions(t, dial(t, testConfig(url)), b)
			if got := b.Stats().FailedLogins; got != 2 {
				t.Errorf("FailedLogins = %d after the right password, want still 2", got)
			}
		})
	}
}

// A basic-auth client whose password was changed under it (by another
// tool) stops at the first 401: one operation costs at most the requests it
// already had in flight (MaxInFlight, 2) rather than one per request of its
// fan-out, and later operations cost none.
func TestChangedPasswordBasicClientCostsOneFailedLogin(t *testing.T) {
	b, e, url := lockoutBMC(t, "dmtf-public-rackmount1", vbmc.Lockout{Threshold: 3, Duration: 10 * time.Minute})
	e.setHook(noSessions)
	c := dial(t, testConfig(url))
	defer c.Close()
	other := dial(t, testConfig(url))
	if err := other.RotatePassword(ctxT(t), "", "changed-elsewhere"); err != nil {
		t.Fatal(err)
	}
	before := b.Stats().FailedLogins
	if _, err := c.Inventory(ctxT(t)); !bmc.IsKind(err, bmc.KindAuth) {
		t.Fatalf("Inventory with a stale password: %v, want KindAuth", err)
	}
	first := b.Stats().FailedLogins - before
	if first < 1 || first > 2 {
		t.Errorf("one Inventory with a stale password cost %d failed logins, want 1, or 2 (MaxInFlight) at most", first)
	}
	// The client does not send refused credentials again: the next
	// operation fails at once and costs nothing.
	if _, err := c.PowerState(ctxT(t)); !bmc.IsKind(err, bmc.KindAuth) {
		t.Fatalf("PowerState with a stale password: %v, want KindAuth", err)
	}
	if got := b.Stats().FailedLogins - before; got != first || b.Locked(testUser) {
		t.Errorf("the second operation cost %d more failed logins (locked %v), want none and unlocked", got-first, b.Locked(testUser))
	}
}

// RotatePassword never locks the account, even at threshold 1: a rotation
// that works costs no failed login; a new password the BMC refuses leaves
// the old one working; a new password that is accepted but does not log in,
// or whose proof fails in transit, is sent once, the old one is restored and
// a lockout that one failure caused is ended.
func TestRotatePasswordNeverLocks(t *testing.T) {
	const newPass = "N3w-pass-ok" // the mockup allows 8 to 12 characters
	type hook = func(http.ResponseWriter, *http.Request, []byte) bool
	// ignorePatch answers 200 to the password PATCH without applying it,
	// as BMCs that apply a password late (or never) do.
	ignorePatch := func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method == http.MethodPatch && strings.Contains(string(body), newPass) {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("{}"))
			return true
		}
		return false
	}
	// onProof answers every request that tries the new password with fail.
	onProof := func(fail func(http.ResponseWriter)) hook {
		return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
			if loginPassword(r, body) != newPass {
				return false
			}
			fail(w)
			return true
		}
	}
	unavailable := onProof(func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	dropped := onProof(func(http.ResponseWriter) { panic(http.ErrAbortHandler) })
	both := func(a, b hook) hook {
		return func(w http.ResponseWriter, r *http.Request, body []byte) bool { return a(w, r, body) || b(w, r, body) }
	}
	cases := map[string]struct {
		threshold int
		basic     bool // the BMC offers no sessions
		newPass   string
		hook      hook
		wantErr   string // "" for success
		wantKind  bmc.Kind
		wantFails int64  // failed logins the BMC counted
		works     string // the password that logs in afterwards
		stopped   bool   // the client stops: neither password is known to work
	}{
		"success, threshold 1":             {threshold: 1, newPass: newPass, works: newPass},
		"success, threshold 2":             {threshold: 2, newPass: newPass, works: newPass},
		"success, basic auth, threshold 1": {threshold: 1, basic: true, newPass: newPass, works: newPass},
		"new password refused by the BMC (too short)": {threshold: 1, newPass: "short",
			wantErr: "the old one is unchanged", wantKind: bmc.KindInvalid, works: testPassword},
		"accepted but does not log in, threshold 1": {threshold: 1, newPass: newPass, hook: ignorePatch,
			wantErr: "old password was restored", wantKind: bmc.KindAuth, wantFails: 1, works: testPassword},
		"accepted but does not log in, threshold 2": {threshold: 2, newPass: newPass, hook: ignorePatch,
			wantErr: "old password was restored", wantKind: bmc.KindAuth, wantFails: 1, works: testPassword},
		"proof answered 503": {threshold: 1, newPass: newPass, hook: unavailable,
			wantErr: "old password was restored", wantKind: bmc.KindBusy, works: testPassword},
		"proof connection dropped": {threshold: 1, newPass: newPass, hook: dropped,
			wantErr: "old password was restored", wantKind: bmc.KindUnreachable, works: testPassword},
		// With basic auth a restore would send a password that is likely
		// wrong now: nothing more is sent, the client stops.
		"basic auth, proof connection dropped": {threshold: 1, basic: true, newPass: newPass, hook: dropped,
			wantErr: "keep BOTH", wantKind: bmc.KindUnreachable, works: newPass, stopped: true},
		"basic auth, proof answered 503": {threshold: 1, basic: true, newPass: newPass, hook: unavailable,
			wantErr: "keep BOTH", wantKind: bmc.KindBusy, works: newPass, stopped: true},
		"basic auth, accepted but does not log in, threshold 2": {threshold: 2, basic: true, newPass: newPass, hook: ignorePatch,
			wantErr: "old password was restored", wantKind: bmc.KindAuth, wantFails: 1, works: testPassword},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, e, url := lockoutBMC(t, "hpe-cray-ex235n-a100", vbmc.Lockout{Threshold: tc.threshold, Duration: 10 * time.Minute},
				func(cfg *vbmc.Config) { cfg.EnforcePasswordLength = true })
			var tried atomic.Int64 // requests that carried the new password
			h := tc.hook
			if tc.basic {
				h = noSessions
				if tc.hook != nil {
					h = both(noSessions, tc.hook)
				}
			}
			e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
				if loginPassword(r, body) == tc.newPass {
					tried.Add(1)
				}
				return h != nil && h(w, r, body)
			})
			c := dial(t, testConfig(url))
			if c.BasicAuth() != tc.basic {
				t.Fatalf("BasicAuth() = %v, want %v", c.BasicAuth(), tc.basic)
			}
			err := c.RotatePassword(ctxT(t), "", tc.newPass)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("RotatePassword: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !bmc.IsKind(err, tc.wantKind)):
				t.Fatalf("RotatePassword = %v, want %v saying %q", err, tc.wantKind, tc.wantErr)
			}
			if n := tried.Load(); n > 1 {
				t.Errorf("the new password was sent %d times, want at most once", n)
			}
			if got := b.Stats().FailedLogins; got != tc.wantFails {
				t.Errorf("the rotation cost %d failed logins, want %d", got, tc.wantFails)
			}
			if b.Locked(testUser) {
				t.Fatal("the account is locked after the rotation")
			}
			// The client keeps working (or stops, sending nothing), and the
			// password that should work does.
			if _, err := c.PowerState(ctxT(t)); (err != nil) != tc.stopped {
				t.Errorf("client after the rotation: %v, want stopped %v", err, tc.stopped)
			}
			closeAndCheckSessions(t, c, b)
			if tc.basic {
				e.setHook(noSessions)
			} else {
				e.setHook(nil)
			}
			cfg := testConfig(url)
			cfg.Password = tc.works
			closeAndCheckSessions(t, dial(t, cfg), b)
			if got := b.Stats().FailedLogins; got != tc.wantFails || b.Locked(testUser) {
				t.Errorf("at the end: %d failed logins (want %d), locked %v", got, tc.wantFails, b.Locked(testUser))
			}
		})
	}
}
