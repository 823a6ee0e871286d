package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stmcginnis/gofish"
)

// RotatePassword changes the password of account (default: the user this
// client logged in as) without ever locking ingot out: it sets the new
// password, proves a fresh login with it works, and only then forgets the
// old one. If the new password does not work it restores the old one and
// says so; if even that fails the error says both passwords must be kept.
// When account is the client's own user, the client continues on a session
// opened with the new password.
//
// It minds the BMC's account lockout (AccountLockoutThreshold): a rotation
// that works costs no failed login; a new password the BMC refuses costs
// none; the proof sends the new password once (never retried, never tried
// a second way), and if it fails the account is unlocked again where that
// one failure locked it (PATCH "Locked": false). With basic auth (a BMC
// without sessions) a proof that fails without an answer (busy, dropped)
// leaves nothing to send safely: see unproven.
func (c *Client) RotatePassword(ctx context.Context, account, newPassword string) error {
	if account == "" {
		account = c.cfg.Username
	}
	op := fmt.Sprintf("rotating the password of account %q", account)
	if newPassword == "" {
		return &Error{Kind: KindInvalid, Endpoint: c.cfg.Endpoint, Op: op, Err: errors.New("the new password is empty")}
	}
	api, err := c.gf(ctx)
	if err != nil {
		return err
	}
	as, err := api.Service.AccountService()
	if err != nil {
		return c.wrap(op+": reading the AccountService", err)
	}
	accts, err := as.Accounts()
	if len(accts) == 0 && err != nil {
		return c.wrap(op+": listing accounts", err)
	}
	uri := ""
	for _, a := range accts {
		if a.UserName == account {
			uri = a.ODataID
		}
	}
	if uri == "" {
		return &Error{Kind: KindNotFound, Endpoint: c.cfg.Endpoint, Op: op, Err: fmt.Errorf("no account with UserName %q", account)}
	}
	if err := patchPassword(api, uri, newPassword); err != nil {
		return c.wrap(op+": setting the new password (the old one is unchanged)", err)
	}
	// Prove the new password before forgetting the old one.
	own := account == c.cfg.Username
	newAPI, basic, verr := c.proveLogin(ctx, account, newPassword)
	if verr != nil {
		return c.rotationFailed(ctx, api, uri, op, own, verr)
	}
	if !own {
		return c.logout(newAPI) // another account: proven, and nothing of ours changes
	}
	// The new password works: switch to its session and log out the old one
	// (the session in force for it, where the renewer replaced the first).
	c.mu.Lock()
	old := c.api
	c.api, c.basic = newAPI, basic
	c.cfg.Password = newPassword
	c.mu.Unlock()
	var oldToken, oldLocation string
	if old != nil {
		if s, err := old.GetSession(); err == nil && s.ID != "" {
			oldToken, oldLocation = c.ren.current(s.Token, s.ID)
		}
	}
	c.adopt(newAPI)
	if err := c.logoutSession(oldToken, oldLocation); err != nil {
		c.log.Warn("bmc logout of the old session failed after rotation", "bmc", c.cfg.Endpoint, "err", err)
	}
	return nil
}

// proveLogin logs in as user with a password not yet known to work, the way
// this client logs in (a session, or basic auth where the BMC offers none),
// and sends the password once: it is not retried (but for a refused
// connection, which never reached the BMC) nor tried the other way, since
// each try of a wrong password counts towards the account lockout.
func (c *Client) proveLogin(ctx context.Context, user, password string) (*gofish.APIClient, bool, error) {
	const op = "logging in with the new password"
	c.mu.Lock()
	basic := c.basic
	c.mu.Unlock()
	tctx := context.WithValue(ctx, trialKey{}, true)
	api, err := gofish.ConnectContext(tctx, c.gofishConfig(basic, user, password))
	if err != nil {
		return nil, false, c.wrap(op, err)
	}
	if s, serr := api.GetSession(); !basic && (serr != nil || s.Token == "") {
		c.logout(api)
		return nil, false, &Error{Kind: KindBadResponse, Endpoint: c.cfg.Endpoint, Op: op,
			Err: errors.New("the BMC created a session without an X-Auth-Token")}
	}
	if err := c.verify(tctx, api); err != nil { // with basic auth, the one request that sends the password
		c.logout(api)
		return nil, false, c.wrap(op+": checking the new login", err)
	}
	return api, basic, nil
}

// rotationFailed answers a new password that did not prove itself. For the
// client's own account it restores the old password; ingot does not know
// another account's. Either way it ends a lockout the failed login may have
// caused (at AccountLockoutThreshold 1, one failure locks). It works on a
// fresh deadline, so a caller's canceled context does not leave the account
// on an unproven password.
func (c *Client) rotationFailed(ctx context.Context, api *gofish.APIClient, uri, op string, own bool, verr error) error {
	kind := wrapErr("", "", verr).(*Error).Kind
	if own && kind != KindAuth && c.BasicAuth() {
		return c.unproven(op, kind, verr)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ReadTimeout)
	defer cancel()
	api = api.WithContext(rctx)
	fail := func(what string) error {
		if uerr := unlockAccount(api, uri); uerr != nil {
			what += fmt.Sprintf("; the failed login may have locked the account and unlocking it failed (%v): it unlocks after the BMC's AccountLockoutDuration", uerr)
		}
		return &Error{Kind: kind, Endpoint: c.cfg.Endpoint, Err: verr, Op: op + ": " + what}
	}
	if !own {
		return fail("the new password was set but does not log in; ingot does not know this account's old password, so it was not restored")
	}
	// Our session (or basic credentials) still carries the old identity.
	if rerr := patchPassword(api, uri, c.cfg.Password); rerr != nil {
		return fail(fmt.Sprintf("the new password did not work and restoring the old one failed (%v): keep BOTH passwords until the account is checked", rerr))
	}
	return fail("the new password did not work; the old password was restored and stays in use")
}

// unproven answers a new password of the client's own account, with basic
// auth, whose proof failed without a verdict (busy, dropped, timed out): the
// BMC accepted it, so it is most likely in force and the old one most
// likely refused, but neither is known. Restoring would send one of them
// again, and a wrong one counts towards the account lockout (at threshold 1
// it locks), so nothing more is sent: the client stops (its calls fail
// without a request) and the error says to keep both passwords.
func (c *Client) unproven(op string, kind Kind, verr error) error {
	err := &Error{Kind: kind, Endpoint: c.cfg.Endpoint, Err: verr, Op: op + ": the BMC accepted the new password but " +
		"the login that proves it failed; with basic auth ingot cannot put the old one back without a login that may count " +
		"towards the account lockout, so it sent nothing more: the new password is most likely in force; keep BOTH " +
		"until the account is checked, and dial again"}
	c.mu.Lock()
	c.api, c.stale = nil, &Error{Kind: KindAuth, Endpoint: c.cfg.Endpoint,
		Err: errors.New("the client stopped after a password rotation it could not prove; dial again with the new password")}
	c.mu.Unlock()
	return err
}

// unlockAccount ends a lockout of the account at uri ("Locked": true, set by
// the BMC after too many failed logins) by PATCHing "Locked": false, as
// Redfish lets an administrator do. An account that is not locked, or that
// shows no Locked property, is left alone.
func unlockAccount(api *gofish.APIClient, uri string) error {
	resp, err := api.Get(uri)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var acct struct{ Locked bool }
	if err := json.NewDecoder(resp.Body).Decode(&acct); err != nil || !acct.Locked {
		return nil
	}
	resp, err = api.Patch(uri, map[string]bool{"Locked": false})
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

func patchPassword(api *gofish.APIClient, uri, password string) error {
	resp, err := api.Patch(uri, map[string]string{"Password": password})
	if resp != nil {
		resp.Body.Close()
	}
	return err
}
