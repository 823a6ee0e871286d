package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/catalog"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/serve"
	"github.com/ingot-dev/ingot/pkg/web"
	"github.com/ingot-dev/ingot/pkg/web/webtest"
)

// browserish is a Go HTTP client that keeps cookies like a browser: what
// the unit tier checks the dashboard's rules with (the integration tier
// does the same in Chromium).
type browserish struct {
	t    *testing.T
	c    *http.Client
	base string
}

func (b *browserish) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func (b *browserish) get(path string) (*http.Response, string) { return b.do("GET", path, nil, nil) }

func (b *browserish) login(token string) *http.Response {
	b.t.Helper()
	resp, body := b.do("POST", "/ui/login", url.Values{"token": {token}, "next": {"/ui/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("login: %d\n%s", resp.StatusCode, body)
	}
	return resp
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF token a page's forms carry.
func (b *browserish) csrf(path string) string {
	b.t.Helper()
	_, body := b.get(path)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("%s has no CSRF token in its forms", path)
	}
	return m[1]
}

func newBrowserish(t *testing.T, l *lab) *browserish {
	return &browserish{t: t, c: l.client(newJar()), base: l.url}
}

// Login turns a token into a session cookie (HttpOnly, Secure,
// SameSite=Strict, __Host-); every page then renders; logout needs the
// CSRF token and ends the session.
func TestLoginPagesLogout(t *testing.T) {
	l := newLab(t, labOptions{machines: 60})
	b := newBrowserish(t, l)
	if resp, _ := b.get("/ui/"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?") {
		t.Fatalf("without a session: %d %s, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := b.do("POST", "/ui/login", url.Values{"token": {"ingot_not-a-token"}}, nil); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(body, "unknown token") {
		t.Fatalf("a wrong token: %d, want 401 saying why", resp.StatusCode)
	}
	resp := b.login(l.op)
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == web.CookieName {
			c = k
		}
	}
	if c == nil || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, Secure, SameSite=Strict, Path=/", c)
	}
	for path, want := range map[string][]string{
		"/ui/":                 {"60 of 60 machines", "r01-n01", "Failed (", "input/output error", "gpu-h100"},
		"/ui/?q=S821GE00042":   {"1 of 60 machines"},
		"/ui/?view=drift":      {"off its pin"},
		"/ui/machines/r01-n02": {"r01-n02", "SXM8", "Time in each state", "Firmware against", "96.00.74.00.01"},
		"/ui/recipes":          {"gpu-h100", "cpu-std", "not scale-ready"},
		"/ui/jobs":             {"Jobs and rollouts"},
		"/ui/power":            {"no power readings"},
		"/ui/alerts":           {"no alerts"},
	} {
		resp, body := b.get(path)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s does not say %q", path, w)
			}
		}
	}
	if resp, _ := b.do("POST", "/ui/logout", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %d, want 403", resp.StatusCode)
	}
	tok := b.csrf("/ui/")
	if resp, _ := b.do("POST", "/ui/logout", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther ||
		!strings.Contains(resp.Header.Get("Location"), "why=out") {
		t.Errorf("logout: %d %s, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.get("/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after logout: %d, want 303 to the login page", resp.StatusCode)
	}
}

// Every action needs the session's CSRF token and a same-origin request;
// a read-only token's session sees no action and is refused one anyway.
func TestActionsRefused(t *testing.T) {
	l := newLab(t, labOptions{machines: 10})
	op := newBrowserish(t, l)
	op.login(l.op)
	tok := op.csrf("/ui/machines/r01-n02")
	confirm := url.Values{"confirm": {"r01-n02"}, "reason": {"test"}}
	for name, c := range map[string]struct {
		form url.Values
		hdr  map[string]string
	}{
		"no CSRF token":      {confirm, nil},
		"another CSRF token": {merge(confirm, url.Values{"csrf": {strings.Repeat("0", 64)}}), nil},
		"another origin":     {merge(confirm, url.Values{"csrf": {tok}}), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
	} {
		if resp, body := op.do("POST", "/ui/machines/r01-n02/reimage", c.form, c.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", name, resp.StatusCode, body)
		}
	}
	ro := newBrowserish(t, l)
	ro.login(l.ro)
	_, page := ro.get("/ui/machines/r01-n02")
	if strings.Contains(page, `id="reimage"`) || strings.Contains(page, "Cancel job") {
		t.Error("a read-only session is offered actions")
	}
	roTok := ro.csrf("/ui/")
	for path, form := range map[string]url.Values{
		"/ui/machines/r01-n02/reimage": merge(confirm, url.Values{"csrf": {roTok}}),
		"/ui/rollouts":                 {"csrf": {roTok}, "recipe": {"cpu-std"}, "batch": {"1"}},
		"/ui/alerts/silence":           {"csrf": {roTok}, "machine": {"r01-n02"}, "rule": {"inlet-temperature"}, "for": {"1h"}},
	} {
		if resp, body := ro.do("POST", path, form, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("read-only POST %s: %d, want 403 naming read-only", path, resp.StatusCode)
		}
	}
	m, _ := l.p.Fleet.Get(context.Background(), "r01-n02")
	if m.State != machine.StateReady {
		t.Errorf("r01-n02 is %s after refused actions, want ready", m.State)
	}
	if jobs, _ := l.p.Engine.Jobs(context.Background(), ""); len(jobs) != 0 {
		t.Errorf("%d jobs after refused actions, want none", len(jobs))
	}
}

func merge(a, b url.Values) url.Values {
	out := url.Values{}
	for _, v := range []url.Values{a, b} {
		for k, vs := range v {
			out[k] = slices.Clone(vs)
		}
	}
	return out
}

// A session ends when its token is revoked, at its next use.
func TestRevokedTokenEndsSession(t *testing.T) {
	l := newLab(t, labOptions{machines: 5})
	b := newBrowserish(t, l)
	b.login(l.op)
	if resp, _ := b.get("/ui/"); resp.StatusCode != 200 {
		t.Fatalf("fleet page: %d", resp.StatusCode)
	}
	revokeAll(t, l, "alice")
	resp, _ := b.get("/ui/")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "why=revoked") {
		t.Fatalf("after the token was revoked: %d %s, want 303 to the login page saying why", resp.StatusCode, resp.Header.Get("Location"))
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// A session ends after SessionIdle without use and after SessionTTL in
// any case (the dashboard's clock, moved by hand).
func TestSessionExpires(t *testing.T) {
	l := newLab(t, labOptions{machines: 5})
	clk := &fakeClock{t: time.Now()}
	_, b := ownDashboard(t, l, web.Config{Now: clk.Now, SessionIdle: 10 * time.Minute, SessionTTL: time.Hour})
	b.login(l.op)
	for range 6 { // used every 9 minutes for 54: alive past the idle limit, until the TTL
		clk.Add(9 * time.Minute)
		if resp, _ := b.get("/ui/jobs"); resp.StatusCode != 200 {
			t.Fatalf("a session used every 9 minutes: %d at %s", resp.StatusCode, clk.Now())
		}
	}
	clk.Add(9 * time.Minute) // 63 minutes after login
	if resp, _ := b.get("/ui/jobs"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "why=expired") {
		t.Fatalf("past the session's TTL: %d %s, want 303 to the login page saying it expired", resp.StatusCode, resp.Header.Get("Location"))
	}
	b.login(l.op)
	clk.Add(11 * time.Minute)
	if resp, _ := b.get("/ui/jobs"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "why=expired") {
		t.Fatalf("idle past SessionIdle: %d %s, want 303 to the login page saying it expired", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// With --api-addr ” (the API in plain HTTP on the boot listener) serve
// mounts no dashboard, and says so when it starts.
func TestNoDashboardInPlainMode(t *testing.T) {
	data := t.TempDir()
	cfg := serve.Defaults()
	cfg.Data, cfg.DB, cfg.Recipes, cfg.SecretKeyFile = data, filepath.Join(data, "ingot.db"), writeRecipes(t, filepath.Join(data, "artifacts")), filepath.Join(data, "secrets.key")
	cfg.DHCP, cfg.TFTP, cfg.HTTPAddr, cfg.APIAddr, cfg.TelemetryInterval = "off", false, "127.0.0.1:0", "", 0
	log := &webtest.Buffer{}
	ready := make(chan serve.Addrs, 1)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := serve.Build(ctx, cfg, serve.Options{Logger: slog.New(slog.NewTextHandler(log, nil)), Ready: func(a serve.Addrs) { ready <- a }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	var a serve.Addrs
	select {
	case a = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	for _, path := range []string{"/ui/", "/ui/login"} {
		resp, err := http.Get("http://" + a.HTTP.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("plain HTTP GET %s: %d, want 404 (no dashboard without TLS)", path, resp.StatusCode)
		}
	}
	if !strings.Contains(log.String(), "no dashboard is served") {
		t.Errorf("serve did not say the dashboard is off:\n%s", log)
	}
}

// ownDashboard serves a dashboard of its own over the lab's core (its
// fleet, engine and recipes) with cfg's other settings, on a TLS test
// server, and returns it with a client of it.
func ownDashboard(t *testing.T, l *lab, cfg web.Config) (*httptest.Server, *browserish) {
	t.Helper()
	cat, err := catalog.New(catalog.Config{Dir: l.recipes})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Fleet, cfg.Engine, cfg.Recipes, cfg.RecipeNames = l.p.Fleet, l.p.Engine, cat.Get, cat.Names
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(ts.Close)
	c := ts.Client()
	c.Jar = newJar()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return ts, &browserish{t: t, c: c, base: ts.URL}
}
