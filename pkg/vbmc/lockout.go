package vbmc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Lockout is an account-lockout policy, as Redfish defines it on the
// AccountService: Threshold failed logins in a row (a session creation or a
// request with basic credentials) lock the account for Duration. While it
// is locked every login is refused, the right password too (401), and the
// account shows "Locked": true; it unlocks when Duration has passed or an
// administrator PATCHes "Locked": false. A successful login clears the
// count, and so does CounterResetAfter without a failure. The zero Lockout
// never locks.
//
// The policy shows in the AccountService resource (AccountLockoutThreshold,
// AccountLockoutDuration, AccountLockoutCounterResetAfter, in seconds) and
// PATCHing those properties changes it, as on a real BMC. Without a
// configured policy the AccountService shows AccountLockoutThreshold 0
// whatever the mockup captured, since nothing is enforced.
type Lockout struct {
	// Threshold is AccountLockoutThreshold: failed logins in a row that lock
	// the account; 0 never locks.
	Threshold int
	// Duration is AccountLockoutDuration, whole seconds: how long a locked
	// account stays locked. Required with a Threshold (Redfish reads 0 as
	// "no lockout").
	Duration time.Duration
	// CounterResetAfter is AccountLockoutCounterResetAfter, whole seconds:
	// failures are forgotten this long after the last one. 0 takes
	// Duration; Redfish requires it to be at most Duration.
	CounterResetAfter time.Duration
}

const accountSvcPath = "/redfish/v1/AccountService"

// check rejects a policy that cannot mean anything, saying how to fix it.
func (l Lockout) check() error {
	if l.Threshold < 0 {
		return fmt.Errorf("lockout Threshold = %d: expected 0 (never lock) or more", l.Threshold)
	}
	for name, d := range map[string]time.Duration{"Duration": l.Duration, "CounterResetAfter": l.CounterResetAfter} {
		if d < 0 || d%time.Second != 0 {
			return fmt.Errorf("lockout %s = %v: expected whole seconds >= 0 (Redfish shows seconds)", name, d)
		}
	}
	if l.Threshold > 0 && l.Duration == 0 {
		return fmt.Errorf("lockout Threshold = %d with Duration 0: Redfish reads AccountLockoutDuration 0 as no lockout; expected a Duration of 1s or more", l.Threshold)
	}
	if l.CounterResetAfter > l.Duration {
		return fmt.Errorf("lockout CounterResetAfter = %v > Duration = %v: Redfish requires it to be at most the Duration", l.CounterResetAfter, l.Duration)
	}
	return nil
}

// lockoutPolicy is the policy in force: the AccountService's properties
// where the mockup has an AccountService, else Config.Lockout.
type lockoutPolicy struct {
	threshold    int
	duration     time.Duration // 0: no lockout
	resetAfter   time.Duration
	resetEnabled bool // AccountLockoutCounterResetEnabled (default true)
}

// failures is one account's run of failed logins.
type failures struct {
	count  int
	last   time.Time // the latest failure
	locked bool
	until  time.Time // when a lock ends (zero: until an administrator unlocks)
}

// initLockout puts Config.Lockout into force and into the AccountService
// resource. b.mu need not be held (called from newBMC).
func (b *BMC) initLockout() {
	l := b.cfg.Lockout
	if l.CounterResetAfter == 0 {
		l.CounterResetAfter = l.Duration
	}
	b.policy = lockoutPolicy{threshold: l.Threshold, duration: l.Duration, resetAfter: l.CounterResetAfter, resetEnabled: true}
	doc, ok := b.peek(accountSvcPath)
	if !ok {
		return
	}
	set := map[string]any{}
	switch {
	case l.Threshold > 0:
		set["AccountLockoutThreshold"] = jsonInt(int64(l.Threshold))
		set["AccountLockoutDuration"] = jsonInt(int64(l.Duration / time.Second))
		set["AccountLockoutCounterResetAfter"] = jsonInt(int64(l.CounterResetAfter / time.Second))
		if _, has := doc["AccountLockoutCounterResetEnabled"]; has {
			set["AccountLockoutCounterResetEnabled"] = true
		}
	case doc["AccountLockoutThreshold"] != nil && doc["AccountLockoutThreshold"] != json.Number("0"):
		set["AccountLockoutThreshold"] = json.Number("0") // the captured policy is not enforced: do not show it
	}
	if len(set) > 0 {
		doc, _ = b.mutable(accountSvcPath)
		for k, v := range set {
			doc[k] = v
		}
		b.touch(accountSvcPath)
	}
	b.policy = readPolicy(doc)
}

// readPolicy reads the lockout policy from an AccountService resource.
func readPolicy(doc map[string]any) lockoutPolicy {
	return lockoutPolicy{
		threshold:    int(intProp(doc, "AccountLockoutThreshold")),
		duration:     time.Duration(intProp(doc, "AccountLockoutDuration")) * time.Second,
		resetAfter:   time.Duration(intProp(doc, "AccountLockoutCounterResetAfter")) * time.Second,
		resetEnabled: doc["AccountLockoutCounterResetEnabled"] != false,
	}
}

// checkLogin checks one login (a session creation or basic credentials) and
// keeps the account's run of failures. b.mu held.
func (b *BMC) checkLogin(user, pass string) bool {
	now := b.cfg.Now()
	if b.lockedAt(user, now) {
		// Refused without counting: a lock is not extended by attempts.
		b.failedLogins.Add(1)
		return false
	}
	if !b.checkPassword(user, pass) {
		b.failedLogins.Add(1)
		b.loginFailed(user, now)
		return false
	}
	delete(b.fails, user)
	return true
}

// lockedAt reports whether user is locked at now, ending a lock whose
// Duration has passed. b.mu held.
func (b *BMC) lockedAt(user string, now time.Time) bool {
	f := b.fails[user]
	if f == nil || !f.locked {
		return false
	}
	if f.until.IsZero() || now.Before(f.until) {
		return true
	}
	b.unlock(user)
	return false
}

// loginFailed counts a failed login of user and locks the account at the
// threshold. Names that cannot log in are not tracked. b.mu held.
func (b *BMC) loginFailed(user string, now time.Time) {
	if _, ok := b.creds[user]; !ok {
		return
	}
	p := b.policy
	f := b.fails[user]
	if f == nil {
		f = &failures{}
		b.fails[user] = f
	}
	if p.resetEnabled && f.count > 0 && now.Sub(f.last) >= p.resetAfter {
		f.count = 0
	}
	f.count++
	f.last = now
	if p.threshold == 0 || f.count < p.threshold {
		return
	}
	switch {
	case !p.resetEnabled: // Redfish: locked until an administrator resets it
		f.locked, f.until = true, time.Time{}
	case p.duration > 0:
		f.locked, f.until = true, now.Add(p.duration)
	default:
		return // AccountLockoutDuration 0: no lockout
	}
	b.showLocked(user, true)
}

// unlock ends user's lock and forgets its failures. b.mu held.
func (b *BMC) unlock(user string) {
	if f := b.fails[user]; f != nil && f.locked {
		b.showLocked(user, false)
	}
	delete(b.fails, user)
}

// expireLocks ends the locks whose Duration has passed, so that a GET shows
// "Locked": false without a login attempt first. b.mu held.
func (b *BMC) expireLocks() {
	if len(b.fails) == 0 {
		return
	}
	now := b.cfg.Now()
	for user := range b.fails {
		b.lockedAt(user, now)
	}
}

// showLocked sets "Locked" on user's account resource, if it has one. b.mu held.
func (b *BMC) showLocked(user string, locked bool) {
	for _, p := range b.tree.accounts {
		if doc, _ := b.peek(p); doc["UserName"] == user {
			doc, _ = b.mutable(p)
			doc["Locked"] = locked
			b.touch(p)
			return
		}
	}
}

// Locked reports whether user's account is locked now, for tests.
func (b *BMC) Locked(user string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lockedAt(user, b.cfg.Now())
}

// patchAccountService changes the lockout policy and the password length
// rules. Other properties are not writable here.
func (b *BMC) patchAccountService(p string, body map[string]any) (int, *message) {
	for k, v := range body {
		switch k {
		case "AccountLockoutThreshold", "AccountLockoutDuration", "AccountLockoutCounterResetAfter",
			"AuthFailureLoggingThreshold", "MinPasswordLength", "MaxPasswordLength":
			n, ok := v.(json.Number)
			if !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
			if i, err := n.Int64(); err != nil || i < 0 || i > 1<<31-1 {
				return http.StatusBadRequest, ptr(msgOutOfRange(n.String(), k))
			}
		case "AccountLockoutCounterResetEnabled":
			if _, ok := v.(bool); !ok {
				return http.StatusBadRequest, ptr(msgTypeError(fmt.Sprint(v), k))
			}
		default:
			if strings.HasPrefix(k, "@") {
				continue
			}
			return http.StatusBadRequest, ptr(msgPropertyNotWritable(k))
		}
	}
	doc, _ := b.mutable(p)
	for k, v := range body {
		if !strings.HasPrefix(k, "@") {
			doc[k] = v
		}
	}
	b.touch(p)
	b.policy = readPolicy(doc)
	return 0, nil
}

// checkPasswordLength applies the AccountService's MinPasswordLength and
// MaxPasswordLength when Config.EnforcePasswordLength is set. b.mu held.
func (b *BMC) checkPasswordLength(pass string) *message {
	if !b.cfg.EnforcePasswordLength {
		return nil
	}
	doc, ok := b.peek(accountSvcPath)
	if !ok {
		return nil
	}
	lo, hi := intProp(doc, "MinPasswordLength"), intProp(doc, "MaxPasswordLength")
	n := int64(len([]rune(pass)))
	if n >= lo && (hi == 0 || n <= hi) {
		return nil
	}
	rule := fmt.Sprintf("at least %d characters", lo)
	if hi > 0 {
		rule = fmt.Sprintf("%d to %d characters", lo, hi)
	}
	return ptr(msgPasswordFormat(rule))
}

// intProp reads an integer property; absent or not an integer reads 0.
func intProp(doc map[string]any, k string) int64 {
	n, _ := doc[k].(json.Number)
	i, _ := n.Int64()
	return i
}

// jsonInt is i as the json.Number decoded documents hold.
func jsonInt(i int64) json.Number { return json.Number(strconv.FormatInt(i, 10)) }
