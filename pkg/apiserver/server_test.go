package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/api"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

type nopBMC struct{}

func (nopBMC) PowerCycle(context.Context) error                             { return nil }
func (nopBMC) SetBootOverride(context.Context, string, string, bool) error  { return nil }
func (nopBMC) ApplyBIOS(context.Context, map[string]any) error              { return nil }
func (nopBMC) VerifyBIOS(context.Context, map[string]any) ([]string, error) { return nil, nil }
func (nopBMC) SetBootMode(context.Context, string) error                    { return nil }
func (nopBMC) BootState(context.Context) (engine.BootState, error) {
	return engine.BootState{Power: "On", Target: "Hdd", Enabled: "Once", Mode: "UEFI"}, nil
}
func (nopBMC) Inventory(context.Context) (machine.Inventory, error) { return machine.Inventory{}, nil }
func (nopBMC) NodeWatts(context.Context) (int, error)               { return 0, errors.New("no power reading") }
func (nopBMC) InsertMedia(context.Context, string) error            { return nil }
func (nopBMC) EjectMedia(context.Context) error                     { return nil }
func (nopBMC) Close() error                                         { return nil }
func dialNop(context.Context, *machine.Machine) (engine.BMC, error) { return nopBMC{}, nil }

type fixture struct {
	s        store.Store
	fl       *fleet.Service
	clock    *fixtureClock
	srv      *Server
	url      string
	operator string
}

func newFixture(t *testing.T, opts ...func(*Config)) *fixture {
	t.Helper()
	return newFixtureOn(t, storetest.Open(t), opts...)
}

// newFixtureOn is newFixture on the store s.
func newFixtureOn(t *testing.T, s store.Store, opts ...func(*Config)) *fixture {
	t.Helper()
	rc := &recipe.Recipe{Name: "lab-qemu", Version: "1",
		OS: recipe.OS{Image: recipe.ImageRef{Name: "lab", SHA256: strings.Repeat("b", 64), Format: "raw.zst"}}}
	src := func(name string) (*recipe.Recipe, error) {
		if name == rc.Name {
			return rc, nil
		}
		return nil, errors.New("unknown recipe")
	}
	clock := &fixtureClock{}
	fl, err := fleet.New(fleet.Config{Store: s, Recipes: src, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := agentauth.New(agentauth.Config{Store: s, Record: fl.Record})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Machines: fl, Jobs: s, Leases: s, Credentials: auth, DialBMC: dialNop, Recipes: src, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go e.Run(ctx)
	t.Cleanup(cancel)
	cfg := Config{Engine: e, Fleet: fl, Auth: auth, Recipes: src, BaseURL: "http://10.77.0.1:8080", Version: "test-1"}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	op, _, err := fleet.CreateToken(ctx, s, "test", fleet.ScopeOperator, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node1", "node2"} {
		m := &machine.Machine{Name: n, MACs: []string{map[string]string{"node1": "52:54:00:00:00:01", "node2": "52:54:00:00:00:02"}[n]},
			Recipe: "lab-qemu", State: machine.StateReady, BMC: machine.BMC{Endpoint: "http://bmc-" + n}}
		if err := s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{s: s, fl: fl, clock: clock, srv: srv, url: hs.URL, operator: op}
}

// fixtureClock is the fleet's clock in tests: time.Now until set.
type fixtureClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixtureClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return time.Now()
	}
	return c.t
}

func (c *fixtureClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (f *fixture) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	return f.doFrom(t, machineAddr, method, path, token, body)
}

// machineAddr is where the machines' requests come from in these tests;
// intruderAddr is another host on the boot network.
var (
	machineAddr  = netip.MustParseAddr("127.0.0.1")
	intruderAddr = netip.MustParseAddr("127.0.0.2")
)

// doFrom sends the request from the loopback address src.
func (f *fixture) doFrom(t *testing.T, src netip.Addr, method, path, token string, body any) (int, []byte) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}).DialContext}}
	defer client.CloseIdleConnections()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, f.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

func TestAuth(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if code, _ := f.do(t, "GET", "/api/v1/machines", "", nil); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := f.do(t, "GET", "/api/v1/machines", "ingot_bogus", nil); code != 401 {
		t.Errorf("unknown token: %d, want 401", code)
	}
	if code, body := f.do(t, "GET", "/api/v1/machines", f.operator, nil); code != 200 || !strings.Contains(string(body), "node1") {
		t.Errorf("operator: %d %s", code, body)
	}
	code, body := f.do(t, "POST", "/api/v1/reimage", f.operator, wire.ReimageRequest{Machines: []string{"node1"}})
	if code != 202 {
		t.Fatalf("reimage: %d %s", code, body)
	}
	m1, _ := f.s.GetMachine(ctx, "node1")
	boot, tok := f.agentCredential(t, m1)
	if code, body := f.do(t, "GET", api.PathTask, boot, nil); code != 403 || !strings.Contains(string(body), "exchange it first") {
		t.Errorf("boot credential on the task route: %d %s, want 403", code, body)
	}
	// A machine token reaches only its own machine's agent endpoints.
	if code, _ := f.do(t, "GET", "/api/v1/machines/node2", tok, nil); code != 403 {
		t.Errorf("machine token on operator endpoint: %d, want 403", code)
	}
	code, body = f.do(t, "GET", api.PathTask, tok, nil)
	var task api.Task
	json.Unmarshal(body, &task)
	if code != 200 || task.MachineID != m1.ID || task.Mode != api.ModeProvision ||
		task.Image.URL != "http://10.77.0.1:8080/artifacts/sha256/"+strings.Repeat("b", 64) || task.FirstBootSecret == "" {
		t.Fatalf("task: %d %s", code, body)
	}
	// The job ends (the agent reports a failure): the token stops working.
	if code, body := f.do(t, "POST", api.PathDone, tok, api.Done{Step: "image", OK: false, Reason: "sha256 mismatch"}); code != 204 {
		t.Fatalf("done: %d %s", code, body)
	}
	if code, body := f.do(t, "GET", api.PathTask, tok, nil); code != 401 {
		t.Errorf("used token after job end: %d %s, want 401", code, body)
	}
	if toks, _ := f.s.ListTokens(ctx); len(toks) != 1 {
		t.Errorf("%d tokens left after the job ended, want only the operator's: the job's credentials are deleted", len(toks))
	}
	m1, _ = f.s.GetMachine(ctx, "node1")
	if m1.State != machine.StateFailed {
		t.Errorf("node1 is %s, want failed", m1.State)
	}
}

// agentCredential does what the iPXE script render and the agent's first
// call do for m, booting from machineAddr: a lease ties the address to its
// MAC, the boot credential is issued and exchanged.
func (f *fixture) agentCredential(t *testing.T, m *machine.Machine) (boot, agent string) {
	t.Helper()
	ctx := context.Background()
	f.waitBooting(t, m.ID)
	if err := f.s.PutLease(ctx, store.Lease{MAC: m.MACs[0], IP: machineAddr, MachineID: m.ID, State: "bound", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	boot, err := f.srv.IssueBootCredential(ctx, m, m.MACs[0], machineAddr)
	if err != nil {
		t.Fatal(err)
	}
	code, body := f.do(t, "POST", api.PathExchange, boot, struct{}{})
	var x api.Exchange
	if err := json.Unmarshal(body, &x); code != 200 || err != nil || x.MachineID != m.ID {
		t.Fatalf("exchange: %d %s", code, body)
	}
	return boot, x.Token
}

// waitBooting waits until the machine's job has done its BMC step (which
// voids the credentials of earlier boot attempts): the machine boots after it.
func (f *fixture) waitBooting(t *testing.T, machineID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		j, err := f.srv.engine.ActiveJob(context.Background(), machineID)
		if err == nil && j.Step != engine.StepBMC {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the job of %s never left the BMC step", machineID)
}

// Someone else on the boot network fetches what the machine was given and
// replays the agent API with it: every call is refused, each refusal is a
// security event, and the real machine's calls still work.
func TestForgedAgentRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if code, body := f.do(t, "POST", "/api/v1/reimage", f.operator, wire.ReimageRequest{Machines: []string{"node1"}}); code != 202 {
		t.Fatalf("reimage: %d %s", code, body)
	}
	m1, _ := f.s.GetMachine(ctx, "node1")
	// The intruder cannot get a boot credential: its address is not node1's lease.
	if err := f.s.PutLease(ctx, store.Lease{MAC: m1.MACs[0], IP: machineAddr, MachineID: m1.ID, State: "bound", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.srv.IssueBootCredential(ctx, m1, m1.MACs[0], intruderAddr); err == nil {
		t.Fatal("a boot credential was issued to an address not tied to the machine")
	}
	boot, agent := f.agentCredential(t, m1)
	code, body := f.do(t, "GET", api.PathTask, agent, nil)
	var task api.Task
	if err := json.Unmarshal(body, &task); code != 200 || err != nil {
		t.Fatalf("task: %d %s", code, body)
	}
	// Whatever the intruder learnt (the script's boot credential, the agent
	// credential, the first-boot secret), replayed from its address:
	for _, c := range []struct {
		method, path, token string
		body                any
	}{
		{"POST", api.PathExchange, boot, struct{}{}},
		{"GET", api.PathTask, agent, nil},
		{"POST", api.PathInventory, agent, machine.Inventory{}},
		{"POST", api.PathChecks, agent, []api.CheckResult{{Name: "memory-size", OK: true}}},
		{"POST", api.PathDone, agent, api.Done{Step: "checks", OK: true}},
		{"POST", api.PathFirstboot, task.FirstBootSecret, machine.Software{Kernel: "6.1"}},
		{"POST", api.PathFirstboot + "?mac=" + m1.MACs[0], "", machine.Software{Kernel: "6.1"}},
	} {
		if code, body := f.doFrom(t, intruderAddr, c.method, c.path, c.token, c.body); code/100 == 2 {
			t.Errorf("%s %s from %s: %d %s, want refused", c.method, c.path, intruderAddr, code, body)
		}
	}
	if sec := securityEvents(t, f, m1.ID); sec < 6 {
		t.Errorf("%d security events (repeats counted) for 6 replays with node1's credentials, want at least 6", sec)
	}
	// The real agent is unaffected.
	if code, body := f.do(t, "POST", api.PathInventory, agent, machine.Inventory{Source: "agent"}); code != 204 {
		t.Errorf("the machine's own inventory after the replays: %d %s", code, body)
	}
}

// securityEvents counts the security events of a machine, with the
// repeats their summaries stand for (after writing the pending summaries).
func securityEvents(t *testing.T, f *fixture, machineID string) int {
	t.Helper()
	f.fl.FlushEvents(context.Background())
	evs, err := f.s.Events(context.Background(), machineID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if r, err := strconv.Atoi(e.Fields["repeats"]); e.Kind == "security" && err == nil {
			n += r // a summary: the repeats it stands for
		} else if e.Kind == "security" {
			n++
		}
	}
	return n
}

// Without an iPXE script (UEFI HTTP boot, virtual media) the agent asks for
// its boot credential by MAC: only the address tied to the MAC gets it.
func TestCredentialByMAC(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	m1, _ := f.s.GetMachine(ctx, "node1")
	path := api.PathCredential + "?mac=" + m1.MACs[0]
	if code, body := f.do(t, "POST", path, "", struct{}{}); code != 403 || !strings.Contains(string(body), "in no job") {
		t.Errorf("no job: %d %s, want 403", code, body)
	}
	if code, body := f.do(t, "POST", "/api/v1/reimage", f.operator, wire.ReimageRequest{Machines: []string{"node1"}}); code != 202 {
		t.Fatalf("reimage: %d %s", code, body)
	}
	f.waitBooting(t, m1.ID)
	if err := f.s.PutLease(ctx, store.Lease{MAC: m1.MACs[0], IP: machineAddr, MachineID: m1.ID, State: "bound", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if code, body := f.doFrom(t, intruderAddr, "POST", path, "", struct{}{}); code != 403 || !strings.Contains(string(body), "is leased to 127.0.0.1") {
		t.Errorf("from %s: %d %s, want 403", intruderAddr, code, body)
	}
	code, body := f.do(t, "POST", path, "", struct{}{})
	var x api.Exchange
	if err := json.Unmarshal(body, &x); code != 200 || err != nil || x.Token == "" {
		t.Fatalf("from the machine: %d %s", code, body)
	}
	if code, body := f.do(t, "POST", api.PathExchange, x.Token, struct{}{}); code != 200 {
		t.Errorf("exchanging the asked-for credential: %d %s", code, body)
	}
}

// The routes anyone may call without a credential are rate-limited per
// client address (429 with Retry-After); another address, and every
// authenticated route, is not held back by it.
func TestPublicRateLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.PublicLimit = ratelimit.New(1, 3, 0, nil) })
	var codes []int
	for range 5 {
		code, _ := f.do(t, "GET", "/api/v1/version", "", nil)
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 200 200 429 429]" {
		t.Errorf("5 quick version requests: %v, want 3 answered then 429", codes)
	}
	if code, body := f.do(t, "POST", api.PathCredential+"?mac=52:54:00:00:00:01", "", struct{}{}); code != 429 || !strings.Contains(string(body), "retry in") {
		t.Errorf("by-MAC credential over the limit: %d %s", code, body)
	}
	if code, _ := f.doFrom(t, intruderAddr, "GET", "/api/v1/version", "", nil); code != 200 {
		t.Errorf("another address: %d, want 200", code)
	}
	if code, _ := f.do(t, "GET", "/api/v1/machines", f.operator, nil); code != 200 {
		t.Errorf("an operator route from the limited address: %d, want 200", code)
	}
}

// Every route is in the OpenAPI document and every documented operation is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var documented, served []string
	for p, ops := range doc.Paths {
		for m := range ops {
			if m != "parameters" {
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	s := &Server{}
	for _, r := range s.routes() {
		served = append(served, r.method+" "+r.pattern)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if d := cmp.Diff(documented, served); d != "" {
		t.Errorf("openapi.yaml and routes differ (-documented +served):\n%s", d)
	}
}

// A discovery agent has no token: its inventory is accepted by MAC only from
// the address leased to that MAC, and only while the machine is discovered.
func TestDiscoveryInventoryByMAC(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	disc := &machine.Machine{Name: "disc1", MACs: []string{"52:54:00:00:00:09"}, State: machine.StateDiscovered}
	if err := f.s.CreateMachine(ctx, disc); err != nil {
		t.Fatal(err)
	}
	lease := func(mac, ip string) {
		if err := f.s.PutLease(ctx, store.Lease{MAC: mac, IP: netip.MustParseAddr(ip), State: "bound", Expires: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	inv := machine.Inventory{CPUs: []machine.CPU{{Model: "EPYC"}}}
	if code, body := f.do(t, "POST", api.PathInventory+"?mac=52:54:00:00:00:09", "", inv); code != 403 {
		t.Errorf("no lease: %d %s, want 403", code, body)
	}
	lease("52:54:00:00:00:09", "127.0.0.1") // httptest's client comes from 127.0.0.1
	if code, body := f.do(t, "POST", api.PathInventory+"?mac=52:54:00:00:00:09", "", inv); code != 204 {
		t.Fatalf("discovered machine from its leased address: %d %s, want 204", code, body)
	}
	snaps, _ := f.s.Inventories(ctx, disc.ID)
	if len(snaps) != 1 || snaps[0].Inventory.CPUs[0].Model != "EPYC" {
		t.Errorf("stored snapshots %+v", snaps)
	}
	if err := f.s.DeleteLease(ctx, "52:54:00:00:00:09"); err != nil {
		t.Fatal(err)
	}
	lease("52:54:00:00:00:01", "127.0.0.1") // node1 is ready: it must use its token
	if code, body := f.do(t, "POST", api.PathInventory+"?mac=52:54:00:00:00:01", "", inv); code != 403 || !strings.Contains(string(body), "machine token") {
		t.Errorf("ready machine by MAC: %d %s, want 403", code, body)
	}
}
