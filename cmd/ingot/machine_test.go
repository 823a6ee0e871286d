package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/machine"
)

var (
	maskTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?`)
	maskID   = regexp.MustCompile(`\bm-[0-9a-f]{10}\b`)
	maskURL  = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	maskTmp  = regexp.MustCompile(`/tmp/Test[A-Za-z0-9_]+/\d{3}/`)
)

// checkCLIGolden compares out, with times, IDs and loopback URLs masked
// (same widths, so columns stay aligned), to testdata/NAME.golden;
// UPDATE_TESTDATA=1 rewrites it.
func checkCLIGolden(t *testing.T, name, out string) {
	t.Helper()
	out = maskTime.ReplaceAllStringFunc(out, func(s string) string { return strings.Repeat("T", len(s)) })
	out = maskID.ReplaceAllString(out, "m-IDIDIDIDID")
	out = maskTmp.ReplaceAllString(out, "/tmp/TESTDIR/")
	out = maskURL.ReplaceAllStringFunc(out, func(s string) string { return "http://BMC" + strings.Repeat("_", len(s)-len("http://BMC")) })
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("UPDATE_TESTDATA") != "" {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), out); diff != "" {
		t.Errorf("%s differs (-want +got; UPDATE_TESTDATA=1 to accept):\n%s", path, diff)
	}
}

// swappableBMC is one BMC endpoint whose hardware the test can change
// between inspections: it forwards to one of two virtual BMCs.
type swappableBMC struct {
	url     string
	current atomic.Pointer[httputil.ReverseProxy]
}

func newSwappableBMC(t *testing.T, mockups ...string) (*swappableBMC, []*httputil.ReverseProxy) {
	t.Helper()
	var proxies []*httputil.ReverseProxy
	for _, m := range mockups {
		_, u := startTestBMC(t, m)
		target, _ := url.Parse(u)
		proxies = append(proxies, httputil.NewSingleHostReverseProxy(target))
	}
	s := &swappableBMC{}
	s.current.Store(proxies[0])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.current.Load().ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s, proxies
}

// bmcCredFile writes a BMC credential file where the server allows
// references to point (its --bmc-credentials-dir).
func (s *cliServer) bmcCredFile() string {
	t := s.t
	t.Helper()
	cred := filepath.Join(s.credDir, "node.cred")
	if err := os.WriteFile(cred, []byte("username="+bmcTestUser+"\npassword="+bmcTestPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cred
}

func cliRecipes(t *testing.T) string {
	return recipesDir(t, map[string]string{"gpu-train-h100x8": "", "lab-qemu": "", "base-gpu": "name: base-gpu\nversion: 1.0.0\ntemplate: true\n",
		"tower-gpu": "name: tower-gpu\nversion: 1.0.0\nhardware:\n  gpus:\n    - vendor: nvidia\n      model: TU102\n      count: 4\n"})
}

// useToken makes a token named name through the API and points the CLI at it.
func (s *cliServer) useToken(name, scope string) string {
	s.t.Helper()
	secret := strings.TrimSpace(s.ok("token", "create", name, "--scope", scope))
	f := filepath.Join(s.t.TempDir(), name+".token")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	s.t.Setenv("INGOT_TOKEN_FILE", f)
	return f
}

// Every machine command through a running server: enrol, list (paged),
// set-recipe, inspect twice through the server's BMC client, show,
// events, inventory history and diff, json and yaml output, rm.
func TestMachineLifecycleCLI(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	s.useToken("alice", "operator")
	bmc, proxies := newSwappableBMC(t, "dmtf-public-tower", "dmtf-public-rackmount1")
	cred := s.bmcCredFile()
	s.ok("machine", "add", "gpu-01", "--mac", "52-54-00-AA-BB-01", "--mac", "52:54:00:aa:bb:02", "--serial", "SN1",
		"--bmc", bmc.url, "--bmc-insecure", "--bmc-cred", "file:"+cred, "--recipe", "tower-gpu",
		"--rack", "r12", "--location", "row3/r12/u07", "--ip", "192.168.10.21")
	s.ok("machine", "add", "--mac", "52:54:00:aa:bb:03", "lab-01", "--rack", "r1")
	s.ok("machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:04", "--recipe", "gpu-train-h100x8")

	checkCLIGolden(t, "machine_ls", s.ok("machine", "ls"))
	checkCLIGolden(t, "machine_ls_recipe", s.ok("machine", "ls", "--recipe", "gpu-train-h100x8"))
	if out := s.ok("machine", "ls", "--state", "ready"); strings.Count(out, "\n") != 1 {
		t.Errorf("ls --state ready lists machines:\n%s", out)
	}
	out, stderr, err := s.run("machine", "ls", "--limit", "2")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(stderr, "more: ingot machine ls --limit 2 --after gpu-02") {
		t.Errorf("ls --limit 2 (err %v):\n%s\nstderr: %s", err, out, stderr)
	}
	if out := s.ok("machine", "ls", "--limit", "2", "--after", "gpu-02"); !strings.Contains(out, "lab-01") || strings.Contains(out, "gpu-01") {
		t.Errorf("ls --after gpu-02:\n%s", out)
	}

	if out := s.ok("machine", "set-recipe", "lab-01", "lab-qemu"); out != "lab-01: recipe lab-qemu\n" {
		t.Errorf("set-recipe printed %q", out)
	}
	s.ok("machine", "set-recipe", "lab-01", "gpu-train-h100x8")

	insp := s.ok("machine", "inspect", "gpu-01")
	for _, w := range []string{"GPUs (2):", "Power:    926 W", "Drift against tower-gpu: 1 critical", "missing GPU: 2 of 4 TU102 found"} {
		if !strings.Contains(insp, w) {
			t.Errorf("inspect output lacks %q:\n%s", w, insp)
		}
	}
	bmc.current.Store(proxies[1]) // the machine's hardware changed
	var res wire.Inspection
	if err := json.Unmarshal([]byte(s.ok("machine", "inspect", "gpu-01", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Snapshot != 2 || res.Recipe != "tower-gpu" || len(res.Findings) == 0 {
		t.Errorf("second inspect: %+v; want snapshot 2 judged against tower-gpu", res)
	}

	checkCLIGolden(t, "machine_show", s.ok("machine", "show", "gpu-01"))
	checkCLIGolden(t, "machine_show_empty", s.ok("machine", "show", "lab-01"))
	checkCLIGolden(t, "events", s.ok("events", "lab-01"))
	checkCLIGolden(t, "inventory_show", s.ok("inventory", "show", "gpu-01"))
	checkCLIGolden(t, "inventory_history", s.ok("inventory", "show", "gpu-01", "--history"))
	checkCLIGolden(t, "inventory_diff", s.ok("inventory", "show", "gpu-01", "--diff"))
	if got := s.ok("inventory", "show", "gpu-01", "--diff", "2", "1"); !strings.Contains(got, "snapshot 2") || !strings.Contains(got, "-> 1") {
		t.Errorf("--diff 2 1:\n%s", got)
	}

	// Events: newest N, or after --since; the actor is the token's name.
	var evs []machine.Event
	if err := json.Unmarshal([]byte(s.ok("events", "lab-01", "-n", "1", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Seq != 3 || evs[0].Fields["to"] != "gpu-train-h100x8" || evs[0].Actor != "operator:alice" {
		t.Errorf("events -n 1 = %+v", evs)
	}
	if err := json.Unmarshal([]byte(s.ok("events", "lab-01", "--since", "1", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 2 {
		t.Errorf("events --since 1 = %+v", evs)
	}

	// JSON and YAML output are what scripts read: the API's keys.
	var view machineView
	if err := json.Unmarshal([]byte(s.ok("machine", "show", "gpu-01", "-o", "json")), &view); err != nil {
		t.Fatal(err)
	}
	if view.Machine.Name != "gpu-01" || len(view.Events) != 3 || view.Inventory == nil || view.Inventory.Seq != 2 {
		t.Errorf("machine show -o json = %+v", view)
	}
	if y := s.ok("machine", "show", "gpu-01", "-o", "yaml"); !strings.Contains(y, "name: gpu-01") || !strings.Contains(y, "system_uuid:") && !strings.Contains(y, "macs:") {
		t.Errorf("machine show -o yaml:\n%s", y)
	}
	var diff wire.InventoryDiff
	if err := json.Unmarshal([]byte(s.ok("inventory", "show", "gpu-01", "--diff", "1", "2", "-o", "json")), &diff); err != nil {
		t.Fatal(err)
	}
	if len(diff.Changes) == 0 || diff.From.Seq != 1 || diff.To.Seq != 2 {
		t.Errorf("diff -o json = %+v", diff)
	}

	if out := s.ok("machine", "rm", "gpu-02"); out != "removed gpu-02 with its inventory and events\n" {
		t.Errorf("rm printed %q", out)
	}
	if _, _, err := s.run("machine", "show", "gpu-02"); err == nil || !strings.Contains(err.Error(), "404 Not Found") || !strings.Contains(err.Error(), s.url) {
		t.Errorf("show after rm: %v, want a 404 naming the server", err)
	}
	var ms []machine.Machine
	if err := json.Unmarshal([]byte(s.ok("machine", "ls", "-o", "json")), &ms); err != nil || len(ms) != 2 {
		t.Errorf("ls -o json after rm: %d machines, %v", len(ms), err)
	}
}

func TestMachineCLIErrors(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	s.ok("machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01", "--serial", "SN1")
	tests := map[string]struct {
		args []string
		want string
	}{
		"bad MAC":           {[]string{"machine", "add", "gpu-02", "--mac", "zz"}, `400 Bad Request: enrolling "gpu-02": macs[0]: invalid request: MAC "zz": expected six hex bytes`},
		"8-byte MAC":        {[]string{"machine", "add", "gpu-02", "--mac", "00:00:00:00:fe:80:00:00"}, `MAC "00:00:00:00:fe:80:00:00": 8 bytes: expected six hex bytes`},
		"no MAC":            {[]string{"machine", "add", "gpu-02"}, "macs: at least one MAC is required"},
		"bad name":          {[]string{"machine", "add", "gpu 02", "--mac", "52:54:00:aa:bb:02"}, `name "gpu 02": ' ' is not allowed`},
		"upper-case name":   {[]string{"machine", "add", "GPU-02", "--mac", "52:54:00:aa:bb:02"}, `'G' is not allowed; expected a DNS-style name`},
		"no name":           {[]string{"machine", "add", "--mac", "52:54:00:aa:bb:02"}, "expected 1 argument(s) NAME, got 0"},
		"bad BMC":           {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--bmc", "10.0.0.5"}, `bmc.endpoint "10.0.0.5": expected a URL like https://10.0.0.5`},
		"bad cred":          {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--bmc-cred", "hunter2"}, `bmc.credential_ref "hunter2": expected secret:NAME, file:PATH or env:VARIABLE`},
		"bad IP":            {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--ip", "::1"}, `ipv4 "::1": expected an IPv4 address`},
		"cred outside":      {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--bmc-cred", "file:/etc/shadow"}, "400 Bad Request: enrolling gpu-02: bmc.credential_ref: invalid request: credential reference refused: \"file:/etc/shadow\": file references must name a file inside"},
		"cred env":          {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--bmc-cred", "env:HOME"}, "environment references must name a variable starting with INGOT_BMC_"},
		"unknown recipe":    {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--recipe", "nope"}, `recipe "nope": recipe nope: not in`},
		"duplicate name":    {[]string{"machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:02"}, "409 Conflict"},
		"duplicate MAC":     {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:AA:BB:01"}, "MAC 52:54:00:aa:bb:01 already belongs to machine gpu-01"},
		"duplicate serial":  {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--serial", "SN1"}, "serial SN1 already belongs to machine gpu-01"},
		"bad output":        {[]string{"machine", "ls", "-o", "xml"}, "-o xml: expected table, json or yaml"},
		"bad state":         {[]string{"machine", "ls", "--state", "sleeping"}, `state "sleeping": expected one of`},
		"unknown node":      {[]string{"machine", "show", "gpu-99"}, "GET /api/v1/machines/gpu-99: 404 Not Found: reading machine gpu-99: not found"},
		"set-recipe absent": {[]string{"machine", "set-recipe", "gpu-01", "nope"}, `recipe "nope"`},
		"recipe as path":    {[]string{"machine", "set-recipe", "gpu-01", "../x"}, `recipe "../x"`},
		"template assigned": {[]string{"machine", "set-recipe", "gpu-01", "base-gpu"}, `is a template (template: true)`},
		"no inventory":      {[]string{"inventory", "show", "gpu-01"}, "machine gpu-01 has no inventory yet"},
		"diff needs two":    {[]string{"inventory", "show", "gpu-01", "--diff"}, "has 0 snapshot(s); expected two to compare"},
		"diff bad seq":      {[]string{"inventory", "show", "gpu-01", "--diff", "1", "x"}, `B "x": expected a snapshot sequence number`},
		"negative n":        {[]string{"events", "gpu-01", "-n", "-1"}, "-n -1: expected a count >= 0"},
		"inspect, no BMC":   {[]string{"machine", "inspect", "gpu-01"}, "no BMC endpoint or credential reference"},
		"no server":         {[]string{"machine", "ls", "--server", "http://" + freePort(t)}, "connection refused"},
		"wrong token":       {[]string{"machine", "ls", "--token", "ingot_wrong"}, "401 Unauthorized: GET /api/v1/machines: unauthorized: unknown token"},
		"job cancel ended":  {[]string{"job", "cancel", "j-nope"}, "404 Not Found"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, stderr, err := s.run(tc.args...)
			if err == nil {
				t.Fatalf("ingot %s succeeded", strings.Join(tc.args, " "))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q (stderr: %s)", err, tc.want, stderr)
			}
		})
	}
}

// The first `ingot serve` writes an operator token into its data folder
// (0600) and the CLI finds it there; a read-only token may only read;
// `ingot token revoke` takes effect at once.
func TestTokensCLI(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	fi, err := os.Stat(s.tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bootstrap token file %s: %v, mode %v; want 0600", s.tokenFile, err, fi.Mode())
	}
	admin := s.tokenFile
	var toks []wire.Token
	if err := json.Unmarshal([]byte(s.ok("token", "ls", "-o", "json")), &toks); err != nil || len(toks) != 1 || toks[0].Name != "admin" {
		t.Fatalf("token ls after the first start = %+v, %v; want the one bootstrap token", toks, err)
	}
	s.useToken("viewer", "read-only")
	s.ok("machine", "ls")
	if _, _, err := s.run("machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01"); err == nil || !strings.Contains(err.Error(), "403 Forbidden") || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a read-only token enrolled a machine: %v", err)
	}
	viewer := os.Getenv("INGOT_TOKEN_FILE")
	t.Setenv("INGOT_TOKEN_FILE", admin)
	if err := json.Unmarshal([]byte(s.ok("token", "ls", "-o", "json")), &toks); err != nil || len(toks) != 2 {
		t.Fatalf("token ls = %+v, %v", toks, err)
	}
	var id string
	for _, k := range toks {
		if k.Name == "viewer" {
			id = k.ID
		}
	}
	s.ok("token", "revoke", id)
	t.Setenv("INGOT_TOKEN_FILE", viewer)
	if _, _, err := s.run("machine", "ls"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a revoked token still works: %v", err)
	}
}

// Contexts: the config file names servers and token files; --server beats
// the context; use-context switches.
func TestCLIContexts(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	t.Setenv("INGOT_SERVER", "")
	t.Setenv("INGOT_TOKEN_FILE", "")
	dead := "http://" + freePort(t)
	s.ok("config", "set-context", "dc1", "--server", s.url, "--token-file", s.tokenFile)
	s.ok("config", "set-context", "dead", "--server", dead, "--token-file", s.tokenFile)
	if out := s.ok("config", "current-context"); out != "dc1\n" {
		t.Errorf("current-context = %q, want the first context set", out)
	}
	s.ok("machine", "ls")
	s.ok("config", "use-context", "dead")
	if _, _, err := s.run("machine", "ls"); err == nil || !strings.Contains(err.Error(), dead) {
		t.Errorf("ls on the dead context: %v, want an error naming %s", err, dead)
	}
	s.ok("machine", "ls", "--server", s.url)
	s.ok("machine", "ls", "--context", "dc1")
	if _, _, err := s.run("config", "use-context", "nope"); err == nil || !strings.Contains(err.Error(), `no context "nope"`) {
		t.Errorf("use-context nope: %v", err)
	}
}

// Offline admin: the first token before a server ever ran; a database a
// server holds is refused at once, naming the way out.
func TestAdminOffline(t *testing.T) {
	db := filepath.Join(t.TempDir(), "data", "ingot.db")
	t.Setenv("INGOT_DB", "")
	var c cliServer
	c.t = t
	if _, _, err := c.run("admin", "machine", "ls", "--db", db); err == nil || !strings.Contains(err.Error(), db) {
		t.Errorf("admin on a missing database: %v", err)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("admin machine ls created the database")
	}
	if secret := strings.TrimSpace(c.ok("admin", "token", "create", "ops", "--db", db)); !strings.HasPrefix(secret, "ingot_") {
		t.Errorf("admin token create printed %q", secret)
	}
	if out := c.ok("admin", "token", "ls", "--db", db); !strings.Contains(out, "ops") {
		t.Errorf("admin token ls:\n%s", out)
	}
	s := startServe(t, cliRecipes(t), "--db", "bolt://"+db) // the store URL form
	if _, err := os.Stat(filepath.Join(s.data, wire.BootstrapTokenFile)); err == nil {
		t.Error("serve wrote a bootstrap token although the database had one")
	}
	start := time.Now()
	_, _, err := c.run("admin", "machine", "ls", "--db", db)
	if err == nil || !strings.Contains(err.Error(), "held by a running ingot server: use the API") || time.Since(start) > 3*time.Second {
		t.Errorf("admin on a held database after %s: %v", time.Since(start), err)
	}
}

// Recipes reload under a running server: a new file is served within
// seconds; a file that does not lint keeps the recipes in force and the
// server's log names it, file:line.
func TestRecipeReloadCLI(t *testing.T) {
	recipes := cliRecipes(t)
	s := startServe(t, recipes)
	if _, _, err := s.run("machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01", "--recipe", "gpu-infer"); err == nil {
		t.Fatal("enrolled with a recipe the server does not have")
	}
	if err := os.WriteFile(filepath.Join(recipes, "gpu-infer.yaml"), []byte("name: gpu-infer\nversion: 1.0.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, _, err := s.run("machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01", "--recipe", "gpu-infer"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new recipe was not served within 15 s:\n%s", s.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bad := filepath.Join(recipes, "broken.yaml")
	if err := os.WriteFile(bad, []byte("name: broken\nversion: 1.0.0\nhardware:\n  gpus:\n    - count: many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(s.log.String(), bad+":5:") {
		if time.Now().After(deadline.Add(15 * time.Second)) {
			t.Fatalf("the server never named %s:5 in its log:\n%s", bad, s.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.ok("machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--recipe", "gpu-infer")
}

// set-recipe --if-match: the revision `machine show -o json` printed; a
// machine changed since is left alone (412).
func TestSetRecipeIfMatchCLI(t *testing.T) {
	s := startServe(t, cliRecipes(t))
	s.ok("machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01")
	var v machineView
	if err := json.Unmarshal([]byte(s.ok("machine", "show", "gpu-01", "-o", "json")), &v); err != nil || v.Revision == 0 {
		t.Fatalf("show -o json: revision %d, %v", v.Revision, err)
	}
	rev := fmt.Sprint(v.Revision)
	s.ok("machine", "set-recipe", "gpu-01", "lab-qemu", "--if-match", rev)
	if _, _, err := s.run("machine", "set-recipe", "gpu-01", "gpu-train-h100x8", "--if-match", rev); err == nil || !strings.Contains(err.Error(), "412 Precondition Failed") {
		t.Errorf("set-recipe on a stale revision: %v, want 412", err)
	}
	if out := s.ok("machine", "show", "gpu-01"); !strings.Contains(out, "lab-qemu") {
		t.Errorf("the stale change was applied:\n%s", out)
	}
}

// A damaged database is named with what is wrong, by admin and by serve,
// never a crash.
func TestDamagedDatabaseCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ingot.db")
	var c cliServer
	c.t = t
	c.ok("admin", "token", "create", "ops", "--db", db)
	if out := c.ok("admin", "check", "--db", db); !strings.Contains(out, "consistent") {
		t.Errorf("admin check on a good file: %q", out)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b[:3*4096], 0o600); err != nil { // truncated
		t.Fatal(err)
	}
	if _, _, err := c.run("admin", "check", "--db", db); err == nil || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("admin check on a truncated file: %v", err)
	}
	cmd := exec.Command(os.Args[0], "serve", "--dhcp", "off", "--tftp=false", "--http-addr", freePort(t), "--api-addr", freePort(t), "--data", t.TempDir(), "--db", db)
	cmd.Env = append(os.Environ(), "INGOT_TEST_AS_INGOT=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), db) || !strings.Contains(string(out), "stored data is damaged: database file "+db) {
		t.Errorf("serve on a truncated database: %v\n%s", err, out)
	}
}
