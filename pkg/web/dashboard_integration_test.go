//go:build integration

package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/web"
	"github.com/ingot-dev/ingot/pkg/web/webtest"
)

// The dashboard in Debian's Chromium against a real `ingot serve` (its TLS
// listener, the browser trusting its CA by public key) over 500 seeded
// machines in 10 racks, 20 of them behind virtual BMCs polled by
// telemetry, with the simulated agent playing every machine that boots:
// each page shows the seeded data; login, logout, an expired session, a
// revoked token, CSRF and read-only refusals; a reimage started from the
// page runs to ready while the progress bar moves, its stream outliving
// the server's write timeout; a rollout stops and says why; a job is
// cancelled; an alert is silenced. Screenshots go to build/test-artifacts/web.
func TestIntegrationDashboardInChromium(t *testing.T) {
	netnstest.NeedPrograms(t, webtest.Program)
	l := newLab(t, labOptions{machines: 500, bmcs: 20, telemetry: 5 * time.Second, slow: []string{"r01-n01", "r02-n01"}})
	clk := &fakeClock{t: time.Now()}
	exp := expiringDashboard(t, l, clk)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/ui/machines/r01-n03/reimage"><input name="confirm" value="r01-n03"></form>
<script>document.forms[0].submit()</script>`, l.url)
	}))
	defer evil.Close()
	b := webtest.Start(t, webtest.Options{TrustCAs: []string{l.ca, writeCertPEM(t, exp.Certificate())}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	art := artifacts(t)
	tab := func() *ui {
		p, err := b.NewPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return newUI(t, ctx, p, l.url, art)
	}
	op := tab()
	steps := []struct {
		name string
		f    func(*testing.T)
	}{
		{"login", func(t *testing.T) { loginSteps(t, op, l) }},
		{"fleet", func(t *testing.T) { fleetSteps(t, op, l) }},
		{"machine", func(t *testing.T) { machineSteps(t, op) }},
		{"recipes, jobs, power", func(t *testing.T) { overviewSteps(t, op) }},
		{"alerts and silence", func(t *testing.T) { alertSteps(t, op, l) }},
		{"reimage from the page", func(t *testing.T) { reimageSteps(t, op, l) }},
		{"stream ends with the session, cancel", func(t *testing.T) { cancelSteps(t, b, op, l) }},
		{"rollout stops and says why", func(t *testing.T) { rolloutSteps(t, op, l) }},
		{"read-only", func(t *testing.T) { readOnlySteps(t, tab(), l) }},
		{"CSRF", func(t *testing.T) { csrfSteps(t, op, l, evil.URL) }},
		{"expired session", func(t *testing.T) { expiredSteps(t, tab(), l, exp.URL, clk) }},
		{"revoked token", func(t *testing.T) { revokedSteps(t, tab(), l) }},
		{"phone and dark", func(t *testing.T) { phoneDarkSteps(t, op) }},
	}
	for _, s := range steps {
		op.t = t
		if !t.Run(s.name, func(t *testing.T) { op.t = t; s.f(t) }) {
			log := b.Log()
			t.Logf("chromium's output (its end):\n%s", log[max(0, len(log)-3000):])
			return
		}
	}
}

func loginSteps(t *testing.T, u *ui, l *lab) {
	u.open("/ui/")
	if p := u.path(); !strings.HasPrefix(p, "/ui/login?next=%2Fui%2F") {
		t.Fatalf("without a session the fleet page went to %s, want the login page", p)
	}
	u.shot("login", false)
	u.fill("#token", "ingot_0000")
	u.submit("form button[type=submit]")
	if s := u.text("#login-error"); !strings.Contains(s, "unknown token") {
		t.Errorf("a wrong token: %q, want it named unknown", s)
	}
	u.fill("#token", l.op)
	u.submit("form button[type=submit]")
	if p := u.path(); p != "/ui/" {
		t.Fatalf("after login: %s, want /ui/", p)
	}
	cs, err := u.p.Cookies(u.ctx, l.url)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cs, func(c webtest.Cookie) bool { return c.Name == web.CookieName })
	if i < 0 || !cs[i].HTTPOnly || !cs[i].Secure || cs[i].SameSite != "Strict" || cs[i].Path != "/" {
		t.Errorf("the session cookie as Chromium keeps it: %+v, want HttpOnly, Secure, SameSite=Strict, Path=/", cs)
	}
	var js string
	u.eval("document.cookie", &js)
	if js != "" {
		t.Errorf("scripts see the cookies %q: the session cookie must be HttpOnly", js)
	}
	if u.text("#who") != "alice" {
		t.Errorf("logged in as %q, want alice", u.text("#who"))
	}
	u.clean("401") // the wrong token's answer
}

func fleetSteps(t *testing.T, u *ui, l *lab) {
	u.open("/ui/")
	u.has("500 of 500 machines", "By state", "ready", "failed", "gpu-h100 430", "gpu-h100-lab 20", "cpu-std 50")
	if n := u.count(".rack"); n != 10 {
		t.Errorf("%d racks, want 10", n)
	}
	if n := u.count(".cell"); n != 500 {
		t.Errorf("%d cells, want 500", n)
	}
	if n := u.count(".cell i"); n < 3500 {
		t.Errorf("%d GPU pips, want one per GPU of 450 8-GPU machines", n)
	}
	for sel, what := range map[string]string{".cell.c-bad i.p-bad": "a bad GPU", ".cell.c-warn i.p-warn": "a degraded link", ".cell i.p-missing": "a missing GPU", ".cell.c-bad": "failed"} {
		if u.count(sel) == 0 {
			t.Errorf("no cell shows %s (%s)", what, sel)
		}
	}
	if n := u.count("#failed tbody tr"); n == 0 || !strings.Contains(u.text("#failed"), "input/output error") {
		t.Errorf("the failed list has %d rows without their reasons", n)
	}
	var title string
	u.eval(`document.querySelector("time").title`, &title)
	if !strings.Contains(title, "local time") {
		t.Errorf("a time's hover text %q, want the local time", title)
	}
	u.shot("fleet-status", true)
	for view, sel := range map[string]string{"power": ".cell.c-p0,.cell.c-p1,.cell.c-p2,.cell.c-p3,.cell.c-high", "inlet": ".cell.c-t0,.cell.c-t1,.cell.c-t2,.cell.c-t3,.cell.c-hot",
		"drift": ".cell.c-dbad"} {
		u.open("/ui/?view=" + view)
		if n := u.count(sel); n == 0 {
			t.Errorf("view %s colours no cell (%s)", view, sel)
		}
		u.shot("fleet-"+view, false)
	}
	// Search as one types (htmx, the URL follows), by MAC, BMC address and
	// serial; the selects filter without JavaScript too.
	u.open("/ui/")
	bmcHost := strings.TrimPrefix(l.bmcs.URLs[5], "http://")
	for q, want := range map[string]string{"52:54:01:00:01:2c": "r07-n01", bmcHost: "", "S821GE00042": "r01-n43"} {
		u.fill("#q", q)
		u.waitFor(fmt.Sprintf(`new URLSearchParams(location.search).get("q") === %q && document.querySelector("#shown").innerText.startsWith("1 of 500")`, q), 10*time.Second)
		if want != "" && u.count(fmt.Sprintf(`.cell[href$="/%s"]`, want)) != 1 {
			t.Errorf("searching %q does not show %s", q, want)
		}
	}
	u.open("/ui/?rack=r03&state=failed")
	if n := u.count(".cell"); n == 0 || n != u.count(".cell.c-bad") || !strings.Contains(u.text("#shown"), "of 500") {
		t.Errorf("rack r03, state failed: %d cells, not all failed", n)
	}
	u.clean()
}

func machineSteps(t *testing.T, u *ui) {
	u.open("/ui/machines/r01-n04") // GPU SXM3 runs at Gen4 x8
	u.has("r01-n04", "gpu-h100", "Time in each state", "Gen4 x8 of Gen5 x16 (degraded)", "96.00.74.00.01", "Firmware against the recipe's pins", "Events")
	if n := u.count("#gpus tbody tr"); n != 8 {
		t.Errorf("%d GPUs listed, want 8", n)
	}
	if !strings.Contains(u.text("#findings"), "pcie") && !strings.Contains(strings.ToLower(u.text("#findings")), "link") {
		t.Errorf("drift findings %q do not name the degraded link", u.text("#findings"))
	}
	u.shot("machine", true)
	u.open("/ui/machines/r01-n02") // behind a virtual BMC, with a day of readings
	if u.count("svg.chart polyline") == 0 {
		t.Error("r01-n02 has no power chart")
	}
	u.clean()
}

func overviewSteps(t *testing.T, u *ui) {
	u.open("/ui/recipes")
	u.has("gpu-h100", "cpu-std", "not scale-ready", "No rollout of this recipe yet")
	u.shot("recipes", true)
	u.open("/ui/jobs")
	u.has("Jobs and rollouts")
	u.open("/ui/power")
	if n := u.count("#racks tbody tr"); n != 10 {
		t.Errorf("%d racks in the power report, want 10", n)
	}
	if n := u.count(".charts svg.chart"); n != 10 {
		t.Errorf("%d rack charts, want 10", n)
	}
	u.has("kWh a day", "per GPU-hour", "Nodes by cost a day", "Inefficient nodes")
	if u.count("#inefficient li") != 1 {
		t.Errorf("inefficient nodes: %q, want the one seeded 40%% above its class", u.text("#inefficient"))
	}
	u.shot("power", true)
	u.submit("#node-list tbody tr a")
	if u.count("#node + figure svg.chart, section[aria-labelledby=node] svg.chart") == 0 {
		t.Error("a node's power chart is missing")
	}
	u.clean()
}

func alertSteps(t *testing.T, u *ui, l *lab) {
	// r04-n02's virtual BMC reads 33 °C at the inlet, the recipe's limit
	// is 30 °C for 1 s: it fires at its second poll.
	deadline := time.Now().Add(90 * time.Second)
	for {
		u.open("/ui/alerts")
		if strings.Contains(u.text("#firing"), "inlet-temperature") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no inlet-temperature alert fired within 90 s; alerts page:\n%s", u.text("main"))
		}
		time.Sleep(2 * time.Second)
	}
	u.has("inlet air too hot", "Limit", "30 °C", "check the rack's cooling")
	u.shot("alerts", true)
	u.fill("#firing form.silence select", "4h")
	u.fill("#firing form.silence input[name=reason]", "CRAC 3 in repair")
	u.submit("#firing form.silence button")
	if !strings.Contains(u.text("#firing"), "silenced by operator:alice") || u.count("#silences li") != 1 {
		t.Errorf("after silencing: firing %q, silences %d", u.text("#firing"), u.count("#silences li"))
	}
	var id string
	u.eval(`document.querySelector("#firing form.silence input[name=machine]").value`, &id)
	evs, _ := l.p.Fleet.Events(u.ctx, id, 0, 0)
	if !slices.ContainsFunc(evs, func(e machine.Event) bool {
		return e.Kind == "alert.silenced" && e.Actor == "operator:alice" && strings.Contains(e.Message, "CRAC 3")
	}) {
		t.Errorf("no alert.silenced event by operator:alice: %+v", evs)
	}
	u.clean()
}

// reimageSteps starts a reimage from the machine page and follows it to
// ready: the progress bar moves by server-sent events, past the server's
// 3 s write timeout.
func reimageSteps(t *testing.T, u *ui, l *lab) {
	u.open("/ui/machines/r01-n01")
	u.submit("#reimage")
	u.has("Reimage r01-n01?", "Type r01-n01 to confirm")
	u.fill("#confirm", "r01-n0")
	u.submit("#reimage-go")
	u.has("type the machine's name, r01-n01, to confirm")
	u.fill("#confirm", "r01-n01")
	u.fill("#reason", "dashboard test")
	u.shot("machine-reimage-confirm", false)
	u.submit("#reimage-go")
	if !strings.HasPrefix(u.path(), "/ui/machines/r01-n01") || u.count("#progress[data-stream]") != 1 {
		t.Fatalf("after the confirmation: %s without a live progress", u.path())
	}
	start := time.Now()
	var seen []float64
	var late bool // the bar moved after the write timeout
	opens, shot := 0, false
	for time.Since(start) < 40*time.Second {
		var st struct{ Pct, Opens float64 }
		u.eval(`(function(){var e=document.querySelector("#progress");
return e?{Pct:Number(e.getAttribute("data-percent")||-1),Opens:Number(e.getAttribute("data-opens")||0)}:{Pct:-2,Opens:0}})()`, &st)
		pct := st.Pct
		if pct == -2 {
			break // the page reloaded when the job ended
		}
		opens = max(opens, int(st.Opens))
		if pct >= 0 && (len(seen) == 0 || pct != seen[len(seen)-1]) {
			seen = append(seen, pct)
			late = late || time.Since(start) > 3*time.Second && len(seen) > 1
		}
		if !shot && pct > 30 && pct < 90 {
			u.shot("machine-reimaging", false)
			shot = true
		}
		time.Sleep(150 * time.Millisecond)
	}
	if len(seen) < 4 || !slices.IsSorted(seen) || seen[len(seen)-1] != 100 {
		t.Errorf("the progress bar showed %v: want it to move up to 100; jobs:\n%s", seen, jobsText(l))
	}
	if !late || opens != 1 {
		t.Errorf("the progress bar moved after the server's 3 s write timeout: %v, over %d connections of its stream; want it to, over one", late, opens)
	}
	u.waitFor(`document.querySelector(".title .state").innerText === "ready"`, 30*time.Second)
	u.has("Reimages and time to restore", "succeeded")
	u.shot("machine-after-reimage", true)
	m, _ := l.p.Fleet.Get(u.ctx, "r01-n01")
	evs, _ := l.p.Fleet.Events(u.ctx, m.ID, 0, 0)
	if !slices.ContainsFunc(evs, func(e machine.Event) bool {
		return strings.Contains(e.Message, "reimage requested by operator:alice: dashboard test")
	}) {
		t.Errorf("no event names operator:alice as who asked for the reimage: %+v", evs)
	}
	u.submit("#reimages tbody tr a")
	u.has("time to restore", "Progress", "gpu-count", "passed")
	u.shot("job-reimage", true)
	u.clean("422") // the confirmation with a wrong name
}

// cancelSteps: a stream ends with its session (logout in another tab of
// the same browser), and a running job is cancelled from the page.
func cancelSteps(t *testing.T, b *webtest.Browser, u *ui, l *lab) {
	u.open("/ui/machines/r02-n01/reimage")
	u.fill("#confirm", "r02-n01")
	u.submit("#reimage-go")
	u.waitFor(`document.querySelector("#progress") && document.querySelector("#progress").getAttribute("data-state") === "running"`, 30*time.Second)
	p2, err := b.Sibling(u.ctx, u.p)
	if err != nil {
		t.Fatal(err)
	}
	other := newUI(t, u.ctx, p2, u.base, u.art)
	other.open("/ui/jobs")
	other.submit("header form button")
	u.waitFor(`location.pathname === "/ui/login"`, 10*time.Second)
	p2.Close()
	m, _ := l.p.Fleet.Get(u.ctx, "r02-n01")
	if j, err := l.p.Engine.ActiveJob(u.ctx, m.ID); err != nil || j.State != engine.JobRunning {
		t.Fatalf("the job of r02-n01 ended before the logout (%v): the stream did not end with the session", err)
	}
	u.fill("#token", l.op)
	u.submit("form button[type=submit]")
	u.open("/ui/machines/r02-n01")
	u.fill("#cancel-reason", "wrong machine")
	u.submit("section[aria-labelledby=job] form.inline button")
	u.waitFor(`document.querySelector(".title .state").innerText === "cancelled"`, 10*time.Second)
	if r := u.text("#job-reason"); !strings.Contains(r, "cancelled by operator:alice: wrong machine") {
		t.Errorf("the cancelled job's reason %q does not name operator:alice", r)
	}
	u.clean()
}

func rolloutSteps(t *testing.T, u *ui, l *lab) {
	u.open("/ui/recipes")
	u.fill("#batch-cpu-std", "2")
	u.fill("#reason-cpu-std", "new kernel")
	u.submit("#r-cpu-std form.rollout button[type=submit]")
	if !strings.HasPrefix(u.path(), "/ui/jobs/r-") {
		t.Fatalf("starting a rollout led to %s", u.path())
	}
	deadline := time.Now().Add(2 * time.Minute)
	for u.text(".title .state") == "running" && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		u.open(u.path())
	}
	if st := u.text(".title .state"); st != "failed" {
		t.Fatalf("the rollout of cpu-std (its machines have no BMC) is %s, want failed", st)
	}
	if s := u.text("#stopped"); s == "" || u.count(".wave") < 2 || !strings.Contains(u.text(".waves"), "stopped here") {
		t.Errorf("the rollout page does not say where it stopped and why: %q", s)
	}
	u.shot("job-rollout-stopped", true)
	u.open("/ui/recipes")
	if !strings.Contains(u.text("#r-cpu-std .last"), "failed") {
		t.Errorf("the recipe's last change: %q, want the failed rollout", u.text("#r-cpu-std .last"))
	}
	u.clean()
}

func readOnlySteps(t *testing.T, u *ui, l *lab) {
	u.open("/ui/login")
	u.fill("#token", l.ro)
	u.submit("form button[type=submit]")
	u.open("/ui/machines/r01-n03")
	if u.count("#reimage") != 0 || !strings.Contains(u.text("#who"), "read-only") {
		t.Error("a read-only session is offered the reimage, or not told it is read-only")
	}
	u.open("/ui/recipes")
	if u.count("form.rollout") != 0 {
		t.Error("a read-only session is offered rollouts")
	}
	u.open("/ui/alerts")
	if u.count("form.silence") != 0 {
		t.Error("a read-only session is offered silences")
	}
	u.shot("alerts-read-only", false)
	var code int
	u.eval(`fetch("/ui/machines/r01-n03/reimage",{method:"POST",body:new URLSearchParams({csrf:document.querySelector("input[name=csrf]").value,confirm:"r01-n03"})}).then(function(r){return r.status})`, &code)
	if code != http.StatusForbidden {
		t.Errorf("a read-only session's reimage: %d, want 403", code)
	}
	noJob(t, u, l, "r01-n03")
	u.clean("403")
}

func csrfSteps(t *testing.T, u *ui, l *lab, evil string) {
	u.open("/ui/machines/r01-n03")
	var code int
	u.eval(`fetch("/ui/machines/r01-n03/reimage",{method:"POST",body:new URLSearchParams({confirm:"r01-n03"})}).then(function(r){return r.status})`, &code)
	if code != http.StatusForbidden {
		t.Errorf("a reimage without the CSRF token: %d, want 403", code)
	}
	if err := u.p.Navigate(u.ctx, evil); err != nil {
		t.Fatal(err)
	}
	u.waitFor(`location.href.startsWith("`+l.url+`")`, 10*time.Second)
	var body string
	u.eval("document.body.innerText", &body)
	if !strings.Contains(strings.ToLower(body), "cross-origin") {
		t.Errorf("another site's form posting to the dashboard got %q, want the cross-origin refusal", body)
	}
	noJob(t, u, l, "r01-n03")
	u.clean("403")
}

func noJob(t *testing.T, u *ui, l *lab, name string) {
	t.Helper()
	m, _ := l.p.Fleet.Get(u.ctx, name)
	if j, err := l.p.Engine.ActiveJob(u.ctx, m.ID); err == nil {
		t.Errorf("%s is in job %s after a refused action", name, j.ID)
	}
}

func expiredSteps(t *testing.T, u *ui, l *lab, url string, clk *fakeClock) {
	u.base = url
	u.open("/ui/login")
	u.fill("#token", l.op)
	u.submit("form button[type=submit]")
	u.has("500 of 500 machines")
	clk.Add(2 * time.Hour)
	u.open("/ui/jobs")
	if !strings.HasPrefix(u.path(), "/ui/login") || !strings.Contains(u.text("#login-why"), "expired") {
		t.Errorf("two hours later: %s %q, want the login page saying the session expired", u.path(), u.text("#login-why"))
	}
	u.shot("login-expired", false)
	u.clean()
}

func revokedSteps(t *testing.T, u *ui, l *lab) {
	secret, tok, err := l.p.Fleet.CreateToken(u.ctx, "carol", fleet.ScopeOperator, time.Hour, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	u.open("/ui/login")
	u.fill("#token", secret)
	u.submit("form button[type=submit]")
	u.has("500 of 500 machines")
	if err := l.p.Fleet.RevokeToken(u.ctx, tok.ID, "operator:test"); err != nil {
		t.Fatal(err)
	}
	u.open("/ui/alerts")
	if !strings.HasPrefix(u.path(), "/ui/login") || !strings.Contains(u.text("#login-why"), "no longer works") {
		t.Errorf("after the token was revoked: %s %q, want the login page saying the token no longer works", u.path(), u.text("#login-why"))
	}
	u.clean()
}

func phoneDarkSteps(t *testing.T, u *ui) {
	if err := u.p.Viewport(u.ctx, 390, 844, true); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/ui/", "/ui/machines/r01-n04", "/ui/alerts"} {
		u.open(path)
		var fits bool
		u.eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`, &fits)
		if !fits {
			t.Errorf("%s is wider than a 390 px phone", path)
		}
	}
	u.open("/ui/")
	u.shot("fleet-phone", false)
	u.open("/ui/machines/r01-n04")
	u.shot("machine-phone", false)
	if err := u.p.Viewport(u.ctx, 1280, 900, false); err != nil {
		t.Fatal(err)
	}
	if err := u.p.Dark(u.ctx, true); err != nil {
		t.Fatal(err)
	}
	u.open("/ui/")
	var bg string
	u.eval(`getComputedStyle(document.body).backgroundColor`, &bg)
	if bg != "rgb(21, 23, 26)" {
		t.Errorf("dark: the page's background is %s", bg)
	}
	u.shot("fleet-dark", false)
	u.open("/ui/machines/r01-n01")
	u.shot("machine-dark", true)
	u.open("/ui/power")
	u.shot("power-dark", false)
	// Keyboard: the first Tab reaches the skip link, and every field has a
	// label.
	u.open("/ui/")
	if err := u.p.Press(u.ctx, "Tab"); err != nil {
		t.Fatal(err)
	}
	var cls string
	u.eval(`document.activeElement.className`, &cls)
	if cls != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", cls)
	}
	for _, path := range []string{"/ui/", "/ui/recipes", "/ui/alerts", "/ui/jobs", "/ui/machines/r01-n01/reimage"} {
		u.open(path)
		var unlabelled int
		u.eval(`[...document.querySelectorAll("input:not([type=hidden]),select")].filter(function(e){return !e.labels||e.labels.length===0}).length`, &unlabelled)
		if unlabelled != 0 {
			t.Errorf("%s: %d form fields without a label", path, unlabelled)
		}
	}
	if err := u.p.Dark(u.ctx, false); err != nil {
		t.Fatal(err)
	}
	u.clean()
}

// expiringDashboard is a second dashboard over the lab's core, on its own
// TLS server, whose clock the test moves.
func expiringDashboard(t *testing.T, l *lab, clk *fakeClock) *httptest.Server {
	ts, _ := ownDashboard(t, l, web.Config{Now: clk.Now, SessionTTL: time.Hour})
	return ts
}

// jobsText lists every job, for a failing test.
func jobsText(l *lab) string {
	jobs, _ := l.p.Engine.Jobs(context.Background(), "")
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "  %s %s %v %s at %s: %s\n", j.ID, j.Kind, j.Machines, j.State, j.Step, j.Reason)
	}
	return b.String()
}
