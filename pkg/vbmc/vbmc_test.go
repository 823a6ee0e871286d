package vbmc

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Every mockup serves its service root, its systems and a Redfish 404.
func TestServeMockups(t *testing.T) {
	wantSystems := map[string][]string{
		"dmtf-public-rackmount1":      {"/redfish/v1/Systems/437XR1138R2"},
		"dmtf-public-tower":           {"/redfish/v1/Systems/437XR1238R2"},
		"gigabyte-ami-h262-z63":       {"/redfish/v1/Systems/Self"},
		"hpe-cray-ex235n-a100":        {"/redfish/v1/Systems/Node0", "/redfish/v1/Systems/Node1"},
		"hpe-ilo5-xl675d-a40":         {"/redfish/v1/Systems/1"},
		"supermicro-hgx-b200-partial": {"/redfish/v1/Systems/1", "/redfish/v1/Systems/HGX_Baseboard_0"},
	}
	for _, m := range mockups {
		t.Run(m, func(t *testing.T) {
			_, c := start(t, m, nil)
			anon := *c
			anon.user = ""
			v := anon.do(http.MethodGet, "/redfish", nil).want(t, 200, "GET /redfish")
			if v.body["v1"] != "/redfish/v1/" {
				t.Errorf("/redfish = %v, want v1 -> /redfish/v1/", v.body)
			}
			for _, p := range []string{"/redfish/v1", "/redfish/v1/"} {
				r := anon.do(http.MethodGet, p, nil).want(t, 200, "GET "+p+" without credentials")
				if id := r.body["@odata.id"]; id != "/redfish/v1" && id != "/redfish/v1/" {
					t.Errorf("GET %s: @odata.id %v", p, r.body["@odata.id"])
				}
				if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("GET %s: Content-Type %q", p, ct)
				}
				if r.header.Get("OData-Version") != "4.0" || r.header.Get("ETag") == "" {
					t.Errorf("GET %s: headers %v, want OData-Version 4.0 and an ETag", p, r.header)
				}
			}
			coll := c.get("/redfish/v1/Systems/")
			var got []string
			for _, mm := range coll["Members"].([]any) {
				got = append(got, mm.(map[string]any)["@odata.id"].(string))
			}
			slices.Sort(got)
			if diff := cmp.Diff(wantSystems[m], got); diff != "" {
				t.Errorf("systems (-want +got):\n%s", diff)
			}
			for _, s := range got {
				if doc := c.get(s); doc["@odata.id"] != s {
					t.Errorf("GET %s: @odata.id %v", s, doc["@odata.id"])
				}
			}
			r := c.do(http.MethodGet, "/redfish/v1/NoSuchThing", nil).want(t, 404, "GET missing")
			if ids := errorMessageIDs(r.body); !slices.Equal(ids, []string{"Base.1.0.ResourceMissingAtURI"}) {
				t.Errorf("404 body MessageIds %v: %s", ids, r.raw)
			}
			if r.body["error"].(map[string]any)["code"] != "Base.1.0.GeneralError" {
				t.Errorf("404 body code: %s", r.raw)
			}
		})
	}
}

// The partial HGX tree has no Managers: a real 404, not an empty 200.
func TestPartialTree404(t *testing.T) {
	_, c := start(t, "supermicro-hgx-b200-partial", nil)
	c.do(http.MethodGet, "/redfish/v1/Managers", nil).want(t, 404, "GET Managers on the partial tree")
	c.do(http.MethodGet, "/redfish/v1/Systems/HGX_Baseboard_0/Processors/GPU_SXM_1", nil).want(t, 200, "GET GPU")
}

// Everything but the service root needs credentials; wrong ones get 401
// with a Redfish body.
func TestAuthEnforced(t *testing.T) {
	for _, m := range mockups {
		t.Run(m, func(t *testing.T) {
			_, c := start(t, m, nil)
			for _, tc := range []struct {
				name, user, pass, token string
				want                    int
			}{
				{"none", "", "", "", 401},
				{"wrong password", testUser, "nope", "", 401},
				{"wrong user", "root2", testPass, "", 401},
				{"bad token", "", "", "deadbeef", 401},
				{"basic", testUser, testPass, "", 200},
			} {
				cc := *c
				cc.user, cc.pass, cc.token = tc.user, tc.pass, tc.token
				r := cc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, tc.want, tc.name)
				if tc.want == 401 && !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.NoValidSession"}) {
					t.Errorf("%s: 401 body %s", tc.name, r.raw)
				}
			}
		})
	}
}

// Without Username every request is served.
func TestNoAuthConfigured(t *testing.T) {
	_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Username, cfg.Password = "", "" })
	c.user = ""
	c.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "GET Systems without auth configured")
}

// Sessions: login gives a token and Location, the token works, logout
// deletes the session, and the count returns to 0.
func TestSessions(t *testing.T) {
	for _, m := range mockups {
		t.Run(m, func(t *testing.T) {
			b, c := start(t, m, nil)
			if n := b.OpenSessions(); n != 0 {
				t.Fatalf("sessions at start = %d, want 0 (captured sessions are dropped)", n)
			}
			anon := *c
			anon.user = ""
			anon.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": "bad"}).want(t, 401, "login with a bad password")
			var locs []string
			for i := range 3 {
				r := anon.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": testPass}).want(t, 201, "login")
				tok, loc := r.header.Get("X-Auth-Token"), r.header.Get("Location")
				if tok == "" || !strings.HasPrefix(loc, sessionsPath+"/") {
					t.Fatalf("login %d: token %q Location %q", i, tok, loc)
				}
				tc := anon
				tc.token = tok
				tc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "GET with token")
				if got := tc.get(loc)["UserName"]; got != testUser {
					t.Errorf("session UserName %v", got)
				}
				locs = append(locs, loc)
			}
			if n := b.OpenSessions(); n != 3 {
				t.Errorf("open sessions = %d, want 3", n)
			}
			if n := len(c.get(sessionsPath)["Members"].([]any)); n != 3 {
				t.Errorf("Sessions collection has %d members, want 3", n)
			}
			for _, loc := range locs {
				c.do(http.MethodDelete, loc, nil).want(t, 204, "logout")
			}
			c.do(http.MethodDelete, locs[0], nil).want(t, 404, "second logout")
			if n := b.OpenSessions(); n != 0 {
				t.Errorf("open sessions after logout = %d, want 0", n)
			}
			if n := len(c.get(sessionsPath)["Members"].([]any)); n != 0 {
				t.Errorf("Sessions collection has %d members after logout", n)
			}
		})
	}
}

// A deleted session's token stops working.
func TestLogoutRevokesToken(t *testing.T) {
	_, c := start(t, "gigabyte-ami-h262-z63", nil)
	r := c.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": testPass}).want(t, 201, "login")
	tc := *c
	tc.user, tc.token = "", r.header.Get("X-Auth-Token")
	tc.do(http.MethodDelete, r.header.Get("Location"), nil).want(t, 204, "logout with its own token")
	tc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 401, "GET with a deleted token")
}

// Methods a resource does not support get 405, missing resources 404.
func TestMethodNotAllowed(t *testing.T) {
	_, c := start(t, "dmtf-public-rackmount1", nil)
	c.do(http.MethodPut, "/redfish/v1/Systems", nil).want(t, 405, "PUT")
	c.do(http.MethodPost, "/redfish/v1/Chassis", map[string]any{}).want(t, 405, "POST Chassis")
	c.do(http.MethodPatch, "/redfish/v1/Chassis/1U", map[string]any{"AssetTag": "x"}).want(t, 405, "PATCH Chassis")
	c.do(http.MethodPatch, "/redfish/v1/Nope", map[string]any{}).want(t, 404, "PATCH missing")
	c.do(http.MethodDelete, "/redfish/v1/Systems", nil).want(t, 405, "DELETE Systems")
}

// A client that leaks sessions is locked out at MaxSessions, as on real BMCs
// (503, iDRAC's wording), until it logs one out.
func TestMaxSessions(t *testing.T) {
	_, c := start(t, "gigabyte-ami-h262-z63", func(cfg *Config) { cfg.MaxSessions = 2 })
	login := func() reply {
		return c.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": testPass})
	}
	first := login().want(t, 201, "login 1")
	login().want(t, 201, "login 2")
	r := login().want(t, 503, "login 3")
	if !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.SessionLimitExceeded"}) ||
		!strings.Contains(string(r.raw), "maximum number of user sessions") {
		t.Errorf("body %s, want iDRAC's \"maximum number of user sessions\"", r.raw)
	}
	c.do(http.MethodDelete, first.header.Get("Location"), nil).want(t, 204, "logout 1")
	login().want(t, 201, "login after a logout")
}

// HEAD answers the headers of GET without a body.
func TestHead(t *testing.T) {
	_, c := start(t, "dmtf-public-tower", nil)
	r := c.do(http.MethodHead, "/redfish/v1/Systems", nil).want(t, 200, "HEAD")
	if len(r.raw) != 0 || r.header.Get("ETag") == "" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("HEAD: body %d bytes, headers %v", len(r.raw), r.header)
	}
}

// A mockup's settings object starts equal to the current attributes: no
// pending change is invented from the capture.
func TestSettingsObjectStartsClean(t *testing.T) {
	b, c := start(t, "dmtf-public-rackmount1", nil)
	sys := "/redfish/v1/Systems/437XR1138R2"
	cur := c.get(sys + "/Bios")["Attributes"]
	if diff := cmp.Diff(cur, c.get(sys + "/Bios/Settings")["Attributes"]); diff != "" {
		t.Errorf("settings object differs from current (-current +settings):\n%s", diff)
	}
	if p := b.PendingBIOS(sys); len(p) != 0 {
		t.Errorf("pending at start: %v", p)
	}
	c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceRestart"}).want(t, 204, "restart")
	if diff := cmp.Diff(cur, c.get(sys + "/Bios")["Attributes"]); diff != "" {
		t.Errorf("a reset without pending settings changed the BIOS:\n%s", diff)
	}
}

// An idle session expires after SessionTimeout (on the injected clock).
func TestSessionTimeout(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.SessionTimeout = time.Minute; cfg.Now = clock })
	r := c.do(http.MethodPost, sessionsPath, map[string]any{"UserName": testUser, "Password": testPass}).want(t, 201, "login")
	tc := *c
	tc.user, tc.token = "", r.header.Get("X-Auth-Token")
	advance(50 * time.Second)
	tc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "used within the timeout")
	advance(50 * time.Second)
	tc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 200, "idle 50 s since last use")
	advance(61 * time.Second)
	tc.do(http.MethodGet, "/redfish/v1/Systems", nil).want(t, 401, "idle past the timeout")
	if n := b.OpenSessions(); n != 0 {
		t.Errorf("expired session still counted: %d", n)
	}
}
