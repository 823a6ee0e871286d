package vbmc

import (
	"net/http"
	"testing"
)

var accountMockups = map[string]string{
	"dmtf-public-rackmount1": "/redfish/v1/AccountService/Accounts/1",
	"dmtf-public-tower":      "/redfish/v1/AccountService/Accounts/1",
	"gigabyte-ami-h262-z63":  "/redfish/v1/AccountService/Accounts/1",
	"hpe-cray-ex235n-a100":   "/redfish/v1/AccountService/Accounts/1",
}

// The enforced user is an account of the mockup; PATCHing its Password
// makes the new one work and the old one fail at once.
func TestPasswordRotation(t *testing.T) {
	for m, acct := range accountMockups {
		t.Run(m, func(t *testing.T) {
			_, c := start(t, m, nil)
			doc := c.get(acct)
			if doc["UserName"] != testUser {
				t.Fatalf("account %s UserName %v, want the enforced user %q", acct, doc["UserName"], testUser)
			}
			if p, ok := doc["Password"]; ok && p != nil {
				t.Errorf("GET account shows Password %v, want null", p)
			}
			// A session opened with the old password stays usable.
			r := c.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": testPass}).want(t, 201, "login")
			sess := *c
			sess.user, sess.token = "", r.header.Get("X-Auth-Token")

			c.do(http.MethodPatch, acct, map[string]any{"Password": "n3w-pass"}).want(t, 200, "rotate password")
			c.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 401, "old password after rotation")
			c.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": testPass}).want(t, 401, "login with old password")
			nc := *c
			nc.pass = "n3w-pass"
			nc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "new password")
			nc.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": "n3w-pass"}).want(t, 201, "login with new password")
			sess.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "old session after rotation")
			if p := nc.get(acct)["Password"]; p != nil {
				t.Errorf("Password readable after PATCH: %v", p)
			}
			nc.do(http.MethodPatch, acct, map[string]any{"Password": 42}).want(t, 400, "non-string password")
			nc.do(http.MethodPatch, acct, map[string]any{"Id": "9"}).want(t, 400, "read-only property")
		})
	}
}

// Another account gets a password and can then log in; disabling it stops that.
func TestSecondAccount(t *testing.T) {
	_, c := start(t, "hpe-cray-ex235n-a100", nil)
	op := *c
	op.user, op.pass = "operator", "op-pass"
	op.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 401, "operator before a password is set")
	c.do(http.MethodPatch, "/redfish/v1/AccountService/Accounts/2", map[string]any{"Password": "op-pass"}).want(t, 200, "set operator password")
	op.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "operator after")
	c.do(http.MethodPatch, "/redfish/v1/AccountService/Accounts/2", map[string]any{"Enabled": false}).want(t, 200, "disable operator")
	op.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 401, "disabled operator")
}

// An enforced user name already in the mockup is that account.
func TestAccountLinkByName(t *testing.T) {
	_, c := start(t, "hpe-cray-ex235n-a100", func(cfg *Config) { cfg.Username = "operator" })
	c.user = "operator"
	if got := c.get("/redfish/v1/AccountService/Accounts/2")["UserName"]; got != "operator" {
		t.Fatalf("Accounts/2 UserName %v", got)
	}
	if got := c.get("/redfish/v1/AccountService/Accounts/1")["UserName"]; got != "root" {
		t.Errorf("Accounts/1 renamed to %v, want root kept", got)
	}
}
