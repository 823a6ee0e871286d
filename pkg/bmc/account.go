package bmc

import (
	"context"
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
	newAPI, _, verr := c.connect(ctx, account, newPassword)
	if verr != nil && account != c.cfg.Username {
		return &Error{Kind: wrapErr("", "", verr).(*Error).Kind, Endpoint: c.cfg.Endpoint, Err: verr,
			Op: op + ": the new password was set but does not log in; ingot does not know this account's old password, so it was not restored"}
	}
	if verr == nil && account != c.cfg.Username {
		return c.logout(newAPI) // another account: proven, and nothing of ours changes
	}
	if verr != nil {
		// Restore the old password; our session (or basic credentials) still
		// carries the old identity.
		kind := wrapErr("", "", verr).(*Error).Kind
		if rerr := patchPassword(api, uri, c.cfg.Password); rerr != nil {
			return &Error{Kind: kind, Endpoint: c.cfg.Endpoint, Err: verr, Op: op + fmt.Sprintf(
				": the new password did not work and restoring the old one failed (%v): keep BOTH passwords until the account is checked", rerr)}
		}
		return &Error{Kind: kind, Endpoint: c.cfg.Endpoint, Err: verr,
			Op: op + ": the new password did not work; the old password was restored and stays in use"}
	}
	// The new password works: switch to its session and log out the old one.
	c.mu.Lock()
	old := c.api
	c.api, c.basic = newAPI, newAPI != nil && isBasic(newAPI)
	c.cfg.Password = newPassword
	c.mu.Unlock()
	if err := c.logout(old); err != nil {
		c.log.Warn("bmc logout of the old session failed after rotation", "bmc", c.cfg.Endpoint, "err", err)
	}
	return nil
}

func isBasic(api *gofish.APIClient) bool {
	_, err := api.GetSession()
	return err != nil
}

func patchPassword(api *gofish.APIClient, uri, password string) error {
	resp, err := api.Patch(uri, map[string]string{"Password": password})
	if resp != nil {
		resp.Body.Close()
	}
	return err
}
