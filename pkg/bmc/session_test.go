package bmc_test

import (
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

// sessionBMC serves rackmount1 with sessions that expire after a minute
// idle on a clock the test moves, and an account lockout at threshold 2.
func sessionBMC(t *testing.T, mod ...func(*vbmc.Config)) (*vbmc.BMC, *edge, string, *manualClock) {
	t.Helper()
	clock := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b, e, url := lockoutBMC(t, "dmtf-public-rackmount1", vbmc.Lockout{Threshold: 2, Duration: 10 * time.Minute},
		append([]func(*vbmc.Config){func(cfg *vbmc.Config) { cfg.SessionTimeout, cfg.Now = time.Minute, clock.Now }}, mod...)...)
	return b, e, url, clock
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A session the BMC ended (idle timeout) is renewed once and the request
// repeated: the caller never sees the 401, the BMC keeps one session, no
// failed login is counted, and Close logs out the renewed session.
func TestSessionRenewedAfterExpiry(t *testing.T) {
	b, _, url, clock := sessionBMC(t)
	c := dial(t, testConfig(url))
	if _, err := c.PowerState(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Minute)
	if st, err := c.PowerState(ctxT(t)); err != nil || st != "On" {
		t.Fatalf("PowerState after the session expired: %q, %v", st, err)
	}
	// A PATCH (a body to send again) after another expiry.
	clock.advance(2 * time.Minute)
	if err := c.SetBootOverride(ctxT(t), "Pxe", "", true); err != nil {
		t.Fatalf("SetBootOverride after the session expired: %v", err)
	}
	if got, err := c.GetBootOverride(ctxT(t)); err != nil || got.Target != "Pxe" {
		t.Errorf("boot override %+v, %v; want Pxe", got, err)
	}
	if n := c.Renewals(); n != 2 {
		t.Errorf("Renewals() = %d, want 2", n)
	}
	if n := b.OpenSessions(); n != 1 {
		t.Errorf("%d sessions open on the BMC, want 1", n)
	}
	if n := b.Stats().FailedLogins; n != 0 {
		t.Errorf("renewals cost %d failed logins, want 0", n)
	}
	closeAndCheckSessions(t, c, b)
}

// Requests in flight when the session ends share one renewal.
func TestSessionConcurrentRequestsRenewOnce(t *testing.T) {
	b, e, url, clock := sessionBMC(t)
	var logins atomic.Int64
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions") {
			logins.Add(1)
		}
		return false
	})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	if _, err := c.Readings(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	clock.advance(5 * time.Minute)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := c.Readings(ctxT(t)); err != nil || r.NodeWatts != 344 {
				t.Errorf("Readings after expiry: %v W, %v", r.NodeWatts, err)
			}
		}()
	}
	wg.Wait()
	if n := logins.Load(); n != 2 {
		t.Errorf("%d logins (Dial included), want 2: one renewal for all callers", n)
	}
	if n := b.OpenSessions(); n != 1 {
		t.Errorf("%d sessions open, want 1", n)
	}
}

// When the password was changed elsewhere, the renewal costs exactly one
// failed login; the client then stops and later calls send nothing.
func TestSessionRenewalWithChangedPasswordCostsOneFailedLogin(t *testing.T) {
	b, _, url, clock := sessionBMC(t)
	c := dial(t, testConfig(url))
	defer c.Close()
	other := dial(t, testConfig(url))
	if err := other.RotatePassword(ctxT(t), "", "changed-elsewhere"); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Minute)
	_, err := c.Readings(ctxT(t))
	if !bmc.IsKind(err, bmc.KindAuth) {
		t.Fatalf("Readings with a stale password after expiry: %v, want KindAuth", err)
	}
	if n := b.Stats().FailedLogins; n != 1 {
		t.Fatalf("the renewal cost %d failed logins, want 1", n)
	}
	before := b.Stats().Requests
	for range 3 {
		if _, err := c.PowerState(ctxT(t)); !bmc.IsKind(err, bmc.KindAuth) || !strings.Contains(err.Error(), "dial again") {
			t.Fatalf("PowerState on the stopped client: %v, want KindAuth saying to dial again", err)
		}
	}
	if n := b.Stats().Requests - before; n != 0 {
		t.Errorf("the stopped client sent %d requests, want 0", n)
	}
	if b.Locked(testUser) || b.Stats().FailedLogins != 1 {
		t.Errorf("locked %v after %d failed logins; want unlocked after 1 (threshold 2)", b.Locked(testUser), b.Stats().FailedLogins)
	}
}

// A login refused for lack of sessions (iDRAC's 503 "maximum number of
// user sessions") is a busy error that says so, sent once, not retried and
// not followed by basic auth.
func TestSessionLimitIsBusy(t *testing.T) {
	b, e, url, _ := sessionBMC(t, func(cfg *vbmc.Config) { cfg.MaxSessions = 1 })
	first := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, first, b)
	var logins, basic atomic.Int64
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Sessions") {
			logins.Add(1)
		}
		if _, _, ok := r.BasicAuth(); ok {
			basic.Add(1)
		}
		return false
	})
	_, err := bmc.Dial(ctxT(t), testConfig(url))
	if !bmc.IsKind(err, bmc.KindBusy) || !strings.Contains(err.Error(), "maximum number of user sessions") {
		t.Fatalf("Dial beyond the session limit: %v, want KindBusy naming the session limit", err)
	}
	if logins.Load() != 1 || basic.Load() != 0 {
		t.Errorf("%d session logins and %d basic-auth requests, want 1 and 0", logins.Load(), basic.Load())
	}
	if n := b.Stats().FailedLogins; n != 0 {
		t.Errorf("%d failed logins, want 0", n)
	}
}

// A PATCH answered 401 because the BMC dropped the session (a BMC reset)
// is sent again, body and all, on a renewed session.
func TestSessionRenewalRepeatsBody(t *testing.T) {
	b, e, url, _ := sessionBMC(t)
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	if _, err := c.GetBootOverride(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int64
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method != http.MethodPatch {
			return false
		}
		if patches.Add(1) == 1 { // the BMC forgets every session just now
			del := httptest.NewRequest(http.MethodDelete, "/redfish/v1/SessionService/Sessions/1", nil)
			del.Header.Set("X-Auth-Token", r.Header.Get("X-Auth-Token"))
			e.b.ServeHTTP(httptest.NewRecorder(), del)
		}
		if !strings.Contains(string(body), "Pxe") {
			t.Errorf("PATCH %d without its body: %q", patches.Load(), body)
		}
		return false
	})
	if err := c.SetBootOverride(ctxT(t), "Pxe", "", true); err != nil {
		t.Fatalf("SetBootOverride across a dropped session: %v", err)
	}
	if got, err := c.GetBootOverride(ctxT(t)); err != nil || got.Target != "Pxe" || patches.Load() != 2 {
		t.Errorf("boot override %+v, %v after %d PATCHes; want Pxe after 2", got, err, patches.Load())
	}
	if c.Renewals() != 1 {
		t.Errorf("Renewals() = %d, want 1", c.Renewals())
	}
}
