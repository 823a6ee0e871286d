package vbmc

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is an injectable Config.Now that tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// login is one login attempt of the enforced user: a session creation or a
// request with basic credentials.
func (c *client) login(how, pass string) reply {
	c.t.Helper()
	if how == "session" {
		return c.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": pass})
	}
	bc := *c
	bc.token, bc.pass = "", pass
	return bc.do(http.MethodGet, "/redfish/v1/Systems", nil)
}

// N failed logins in a row lock the account for the Duration: even the
// right password is refused and the account shows Locked; a success clears
// the count; failures older than CounterResetAfter are forgotten.
func TestAccountLockout(t *testing.T) {
	const acct = "/redfish/v1/AccountService/Accounts/1"
	policy := Lockout{Threshold: 3, Duration: time.Minute, CounterResetAfter: 30 * time.Second}
	type step struct {
		advance time.Duration
		how     string // "session" or "basic"
		pass    string
		want    int  // status of the attempt
		locked  bool // Locked after it
	}
	fail := func(how string, locked bool) step { return step{how: how, pass: "wrong", want: 401, locked: locked} }
	okSess := step{how: "session", pass: testPass, want: 201}
	okBasic := step{how: "basic", pass: testPass, want: 200}
	cases := map[string]struct {
		lockout Lockout
		steps   []step
	}{
		"session failures lock, then the right password is refused": {policy, []step{
			fail("session", false), fail("session", false), fail("session", true),
			{how: "session", pass: testPass, want: 401, locked: true},
			{how: "basic", pass: testPass, want: 401, locked: true},
		}},
		"basic failures count too, and mixed": {policy, []step{
			fail("basic", false), fail("session", false), fail("basic", true),
			{how: "basic", pass: testPass, want: 401, locked: true},
		}},
		"unlocks after the duration": {policy, []step{
			fail("session", false), fail("session", false), fail("session", true),
			{advance: 59 * time.Second, how: "session", pass: testPass, want: 401, locked: true},
			{advance: time.Second, how: "session", pass: testPass, want: 201},
			// The count starts again from zero.
			fail("session", false), fail("session", false), okBasic,
		}},
		"attempts while locked do not extend the lock": {policy, []step{
			fail("basic", false), fail("basic", false), fail("basic", true),
			{advance: 50 * time.Second, how: "basic", pass: "wrong", want: 401, locked: true},
			{advance: 10 * time.Second, how: "basic", pass: testPass, want: 200},
		}},
		"a success resets the counter": {policy, []step{
			fail("session", false), fail("session", false), okSess,
			fail("session", false), fail("basic", false), okBasic,
			fail("session", false), fail("session", false), fail("session", true),
		}},
		"failures older than CounterResetAfter are forgotten": {policy, []step{
			fail("session", false), fail("session", false),
			{advance: 30 * time.Second, how: "session", pass: "wrong", want: 401},
			fail("session", false), fail("session", true),
		}},
		"threshold 1": {Lockout{Threshold: 1, Duration: time.Second}, []step{
			fail("basic", true),
			{how: "session", pass: testPass, want: 401, locked: true},
			{advance: time.Second, how: "session", pass: testPass, want: 201},
		}},
		"no policy never locks": {Lockout{}, []step{
			fail("session", false), fail("session", false), fail("session", false), fail("basic", false),
			fail("basic", false), fail("basic", false), okSess,
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Lockout = tc.lockout; cfg.Now = clock.Now })
			// An admin session opened first keeps reading the account
			// while basic and session logins are locked out.
			r := c.login("session", testPass).want(t, 201, "admin session")
			admin := *c
			admin.token = r.header.Get("X-Auth-Token")
			fails := b.Stats().FailedLogins
			for i, s := range tc.steps {
				clock.advance(s.advance)
				r := c.login(s.how, s.pass)
				if r.status != s.want {
					t.Fatalf("step %d (%s, %s): status %d, want %d: %s", i, s.how, s.pass, r.status, s.want, r.raw)
				}
				if s.want == 401 {
					fails++
				}
				if got := admin.get(acct)["Locked"]; got != s.locked || b.Locked(testUser) != s.locked {
					t.Fatalf("step %d: account shows Locked %v, Locked() %v; want %v", i, got, b.Locked(testUser), s.locked)
				}
			}
			if got := b.Stats().FailedLogins; got != fails {
				t.Errorf("Stats().FailedLogins = %d, want %d (every refused login)", got, fails)
			}
		})
	}
}

// The policy shows in the AccountService resource and PATCH changes it; an
// administrator unlocks an account by PATCHing Locked false.
func TestLockoutPolicyResource(t *testing.T) {
	const acct = "/redfish/v1/AccountService/Accounts/1"
	lockoutProps := func(doc map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range doc {
			if strings.HasPrefix(k, "AccountLockout") {
				out[k] = v
			}
		}
		return out
	}
	t.Run("configured", func(t *testing.T) {
		_, c := start(t, "gigabyte-ami-h262-z63", func(cfg *Config) {
			cfg.Lockout = Lockout{Threshold: 2, Duration: 90 * time.Second}
		})
		want := map[string]any{
			"AccountLockoutThreshold": 2.0, "AccountLockoutDuration": 90.0,
			"AccountLockoutCounterResetAfter": 90.0, "AccountLockoutCounterResetEnabled": true,
		}
		if diff := cmp.Diff(want, lockoutProps(c.get(accountSvcPath))); diff != "" {
			t.Errorf("AccountService (-want +got):\n%s", diff)
		}
	})
	t.Run("not configured shows threshold 0", func(t *testing.T) {
		_, c := start(t, "dmtf-public-rackmount1", nil) // the capture says 5
		if got := c.get(accountSvcPath)["AccountLockoutThreshold"]; got != 0.0 {
			t.Errorf("AccountLockoutThreshold = %v, want 0: nothing is enforced", got)
		}
	})
	t.Run("PATCH sets the policy; Locked false unlocks", func(t *testing.T) {
		clock := newFakeClock()
		b, c := start(t, "hpe-cray-ex235n-a100", func(cfg *Config) { cfg.Now = clock.Now })
		r := c.login("session", testPass).want(t, 201, "admin session")
		admin := *c
		admin.token = r.header.Get("X-Auth-Token")
		c.do(http.MethodPatch, accountSvcPath, map[string]any{"AccountLockoutThreshold": 1, "AccountLockoutDuration": 600}).
			want(t, 200, "PATCH the lockout policy")
		doc := c.get(accountSvcPath)
		if doc["AccountLockoutThreshold"] != 1.0 || doc["AccountLockoutDuration"] != 600.0 {
			t.Errorf("after PATCH: %v", lockoutProps(doc))
		}
		c.login("basic", "wrong").want(t, 401, "one failure")
		c.login("basic", testPass).want(t, 401, "locked at threshold 1")
		if !b.Locked(testUser) {
			t.Fatal("not locked after one failure at threshold 1")
		}
		admin.do(http.MethodPatch, acct, map[string]any{"Locked": true}).want(t, 400, "Locked true (only the service locks)")
		admin.do(http.MethodPatch, acct, map[string]any{"Locked": false}).want(t, 200, "unlock")
		if got := admin.get(acct)["Locked"]; got != false || b.Locked(testUser) {
			t.Errorf("after unlock: Locked %v, Locked() %v", got, b.Locked(testUser))
		}
		c.login("basic", testPass).want(t, 200, "right password after unlock")
		// Threshold 0 turns it off.
		c.do(http.MethodPatch, accountSvcPath, map[string]any{"AccountLockoutThreshold": 0}).want(t, 200, "threshold 0")
		for range 3 {
			c.login("session", "wrong").want(t, 401, "wrong password, no lockout")
		}
		c.login("session", testPass).want(t, 201, "right password")
		// CounterResetEnabled false: locked until an administrator unlocks.
		c.do(http.MethodPatch, accountSvcPath, map[string]any{"AccountLockoutThreshold": 1, "AccountLockoutCounterResetEnabled": false}).
			want(t, 200, "reset disabled")
		c.login("session", "wrong").want(t, 401, "one failure")
		clock.advance(24 * time.Hour)
		c.login("session", testPass).want(t, 401, "still locked a day later")
		admin.do(http.MethodPatch, acct, map[string]any{"Locked": false}).want(t, 200, "unlock")
		c.login("session", testPass).want(t, 201, "after unlock")
	})
	t.Run("PATCH refused", func(t *testing.T) {
		_, c := start(t, "dmtf-public-tower", nil)
		for name, body := range map[string]map[string]any{
			"negative":     {"AccountLockoutThreshold": -1},
			"not a number": {"AccountLockoutDuration": "30"},
			"fraction":     {"AccountLockoutCounterResetAfter": 1.5},
			"bool":         {"AccountLockoutCounterResetEnabled": "yes"},
			"read-only":    {"Id": "X"},
		} {
			c.do(http.MethodPatch, accountSvcPath, body).want(t, 400, name)
		}
		if got := c.get(accountSvcPath)["AccountLockoutThreshold"]; got != 0.0 {
			t.Errorf("a refused PATCH changed the policy: threshold %v", got)
		}
	})
}

// A Lockout that cannot mean anything is refused by New, saying why.
func TestLockoutCheck(t *testing.T) {
	root := filepath.Join(mockupDir(t), "dmtf-public-tower")
	for name, l := range map[string]Lockout{
		"negative threshold":       {Threshold: -1},
		"threshold without time":   {Threshold: 3},
		"fractional seconds":       {Threshold: 3, Duration: 1500 * time.Millisecond},
		"reset after the duration": {Threshold: 3, Duration: time.Second, CounterResetAfter: time.Minute},
	} {
		if _, err := New(Config{Root: root, Lockout: l}); err == nil {
			t.Errorf("%s: New accepted %+v", name, l)
		}
	}
}

// EnforcePasswordLength refuses a new password outside the AccountService's
// MinPasswordLength..MaxPasswordLength, and the old one keeps working.
func TestEnforcePasswordLength(t *testing.T) {
	const acct = "/redfish/v1/AccountService/Accounts/1"
	_, c := start(t, "hpe-cray-ex235n-a100", func(cfg *Config) { cfg.EnforcePasswordLength = true }) // 8..12
	for name, tc := range map[string]struct {
		pass string
		want int
	}{
		"too short": {"short", 400},
		"too long":  {"much-too-long-password", 400},
	} {
		r := c.do(http.MethodPatch, acct, map[string]any{"Password": tc.pass}).want(t, tc.want, name)
		if strings.Contains(string(r.raw), tc.pass) {
			t.Errorf("%s: the refusal echoes the password: %s", name, r.raw)
		}
		c.login("basic", testPass).want(t, 200, name+": old password still works")
	}
	c.do(http.MethodPatch, acct, map[string]any{"Password": "just-right"}).want(t, 200, "8..12 characters")
	c.login("basic", "just-right").want(t, 200, "new password")
}
