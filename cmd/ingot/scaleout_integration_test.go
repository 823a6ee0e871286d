//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent"
	"github.com/ingot-dev/ingot/pkg/agent/checks"
	"github.com/ingot-dev/ingot/pkg/api"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/burnin"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
	"github.com/ingot-dev/ingot/pkg/tlsca"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// group is several `ingot serve` processes on one etcd prefix, sharing
// the recipes, a content store's artifacts (copied into each data folder),
// the BMC credentials folder and the secret key, as a site runs them.
type group struct {
	t         *testing.T
	url       string // the etcd store URL
	recipes   string
	artifacts string
	credDir   string
	cred      string
	keyFile   string
	st        *etcd.Store // the test's own view of the store
}

// instance is one `ingot serve` process of a group.
type instance struct {
	name, data, http, api string
	cmd                   *exec.Cmd
	log                   *lockedBuffer
	done                  chan error
	// hc is the client once the instance answers: one transport, its
	// connections reused (a client a call leaves idle connections open,
	// and serve caps connections per address).
	hc *http.Client
}

const groupTTL = 5 * time.Second

func newGroup(t *testing.T) *group {
	t.Helper()
	c := etcdtest.Single(t)
	g := &group{t: t, url: c.URL("site"), artifacts: filepath.Join(t.TempDir(), "artifacts"), credDir: t.TempDir(),
		keyFile: filepath.Join(t.TempDir(), "secrets.key")}
	g.recipes = hgxRecipes(t, g.artifacts)
	g.cred = filepath.Join(g.credDir, "bmc.cred")
	if err := os.WriteFile(g.cred, []byte("username=admin\npassword=pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := etcd.OpenURL(context.Background(), g.url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g.st = st
	return g
}

// start runs `ingot serve` as instance name of the group; extra flags
// come last (a flag given twice takes the last value).
func (g *group) start(name string, extra ...string) *instance {
	t := g.t
	t.Helper()
	in := &instance{name: name, data: t.TempDir(), http: freePort(t), api: freePort(t), log: &lockedBuffer{}, done: make(chan error, 1)}
	if err := os.CopyFS(filepath.Join(in.data, "artifacts"), os.DirFS(g.artifacts)); err != nil {
		t.Fatal(err)
	}
	in.cmd = exec.Command(os.Args[0], "serve", "--db", g.url, "--instance", name, "--instance-ttl", groupTTL.String(),
		"--dhcp", "off", "--tftp=false", "--http-addr", in.http, "--api-addr", in.api, "--public-url", "http://"+in.http,
		"--api-url", "https://"+in.api, "--data", in.data, "--recipes", g.recipes, "--bmc-credentials-dir", g.credDir,
		"--secret-key-file", g.keyFile, "--agent-binding", "first-use", "--telemetry-interval", "0", "--inventory-refresh", "0",
		"--log-level", "info")
	in.cmd.Args = append(in.cmd.Args, extra...)
	in.cmd.Env = append(os.Environ(), "INGOT_TEST_AS_INGOT=1")
	in.cmd.Stdout, in.cmd.Stderr = in.log, in.log
	if err := etcdtest.StartProcess(in.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { in.done <- in.cmd.Wait() }()
	t.Cleanup(func() {
		in.cmd.Process.Signal(syscall.SIGCONT)
		in.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-in.done:
		case <-time.After(20 * time.Second):
			in.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("instance %s log:\n%s", name, in.log)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := in.client().Get("https://" + in.api + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				in.hc = in.client()
				return in
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s did not answer within 30 s:\n%s", name, in.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client trusts the instance's own CA.
func (in *instance) client() *http.Client {
	if in.hc != nil {
		return in.hc
	}
	pool := x509.NewCertPool()
	if b, err := os.ReadFile(filepath.Join(in.data, "tls", "ca.pem")); err == nil {
		pool.AppendCertsFromPEM(b)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// call makes an operator API request to the instance.
func (in *instance) call(tok, method, path string, body, out any) error {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, "https://"+in.api+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := in.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s on %s: HTTP %d: %s", method, path, in.name, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// bmcLog records what a virtual BMC was asked to change: boot overrides
// and resets, in order; hold, when set, keeps a request matching it
// waiting until release is closed.
type bmcLog struct {
	mu      sync.Mutex
	calls   []string
	hold    string
	held    chan struct{}
	release chan struct{}
}

func (l *bmcLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch || r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			call := ""
			switch {
			case strings.Contains(string(body), "BootSourceOverrideTarget"):
				var b struct {
					Boot struct{ BootSourceOverrideTarget string }
				}
				_ = json.Unmarshal(body, &b)
				call = "override " + b.Boot.BootSourceOverrideTarget
			case strings.HasSuffix(r.URL.Path, "ComputerSystem.Reset"):
				call = "reset"
			}
			if call != "" {
				l.mu.Lock()
				l.calls = append(l.calls, call)
				hold := l.hold != "" && l.hold == call
				if hold {
					l.hold = ""
				}
				l.mu.Unlock()
				if hold {
					close(l.held)
					<-l.release
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (l *bmcLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// enrol starts node i's virtual BMC (the HGX tree of TestGPUReady) behind
// a bmcLog and stores the machine.
func (g *group) enrol(i int) (*hgxNode, *bmcLog) {
	t := g.t
	t.Helper()
	spec := defaultHGX(i)
	root := t.TempDir()
	if err := writeHGXTree(root, spec); err != nil {
		t.Fatal(err)
	}
	b, err := vbmc.New(vbmc.Config{Root: root, Username: "admin", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	log := &bmcLog{}
	srv := httptest.NewServer(log.wrap(b))
	t.Cleanup(srv.Close)
	m := &machine.Machine{Name: fmt.Sprintf("gpu%02d", i), MACs: []string{spec.bootMAC()}, Serial: spec.serial, SystemUUID: spec.uuid,
		Recipe: "gpu-train-h100x8", State: machine.StateEnrolled, Rack: "r07", Index: i,
		BMC: machine.BMC{Endpoint: srv.URL, CredentialRef: "file:" + g.cred, Insecure: true}}
	if err := g.st.CreateMachine(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return &hgxNode{spec: spec, os: defaultHGXOS(), id: m.ID, name: m.Name, bmc: b, url: srv.URL, codes: map[string]int{}}, log
}

// reimage starts a reimage of n through in's API and returns its job ID.
func (g *group) reimage(in *instance, tok string, n *hgxNode) string {
	g.t.Helper()
	var res []wire.ReimageResult
	if err := in.call(tok, "POST", "/api/v1/reimage", wire.ReimageRequest{Machines: []string{n.name}, Reason: "scale-out test"}, &res); err != nil {
		g.t.Fatal(err)
	}
	if len(res) != 1 || res[0].Job == nil {
		g.t.Fatalf("reimage through %s: %+v", in.name, res)
	}
	return res[0].Job.ID
}

// waitJob waits until the job satisfies ok, and returns it.
func (g *group) waitJob(id, what string, within time.Duration, ok func(*store.Job, string) bool) *store.Job {
	g.t.Helper()
	deadline := time.Now().Add(within)
	for {
		j, err := g.st.GetJob(context.Background(), id)
		owner, _ := g.st.Fence(context.Background(), "job/"+id)
		if err == nil && ok(j, owner) {
			return j
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("job %s: not %s within %s: %+v (owner %q)", id, what, within, j, owner)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bootAgent is the machine's network boot into the agent, served by in:
// the iPXE script (the boot credential and the API it names, pinned),
// then the agent's exchange, task, inventory, image, checks and done.
func bootAgent(ctx context.Context, t *testing.T, in *instance, n *hgxNode) api.Task {
	t.Helper()
	resp, err := http.Get("http://" + in.http + "/ipxe?mac=" + n.spec.bootMAC() + "&arch=x86_64-efi")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cmdline string
	for _, line := range strings.Split(string(script), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[0] == "kernel" || f[0] == "imgexec") {
			cmdline = strings.Join(f[2:], " ")
		}
	}
	cfg, err := agent.ParseCmdline(cmdline)
	if err != nil || cfg.Token == "" {
		t.Fatalf("%s's iPXE script for %s: %v\n%s", in.name, n.name, err, script)
	}
	c := pinned(t, cfg.APIBase(), cfg.Token, cfg.CA)
	if _, err := c.Exchange(ctx); err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inv := n.spec.inband()
	for _, step := range []func() error{
		func() error { return c.Inventory(ctx, inv) },
		func() error {
			return c.Progress(ctx, api.Progress{Step: api.StepImage, Bytes: task.Image.Size, Total: task.Image.Size, Written: 8 << 30})
		},
		func() error { return c.Checks(ctx, checks.Run(inv, task.Checks, task.Expected)) },
		func() error {
			return c.Done(ctx, api.Done{Step: api.StepChecks, OK: true, Disk: "/dev/nvme0n1", ImageSHA256: task.Image.SHA256, Handoff: task.Handoff})
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("agent of %s through %s: %v", n.name, in.name, err)
		}
	}
	return task
}

// firstBoot is the installed OS's report, made to in.
func firstBoot(ctx context.Context, t *testing.T, in *instance, n *hgxNode, task api.Task) {
	t.Helper()
	r := burnin.Runner{LookPath: n.os.lookPath, Exec: n.exec, Every: time.Hour}
	res := r.Run(ctx, hgxBurnInPlan(task, "/dev/nvme0n1", n.spec.inband()))
	sw := n.os.software
	sw.Hostname, sw.CloudInit = task.Hostname, "done"
	pemBytes, err := os.ReadFile(filepath.Join(in.data, "tls", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("%s's CA file holds no PEM block", in.name)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	c := pinned(t, "https://"+in.api, task.FirstBootSecret, tlsca.Fingerprint(cert))
	if err := c.FirstBoot(ctx, api.FirstBoot{Software: sw, BurnIn: res}); err != nil {
		t.Fatalf("first boot of %s through %s: %v", n.name, in.name, err)
	}
}

// pinned is an agent API client pinning the server's CA.
func pinned(t *testing.T, base, token, ca string) *api.AgentClient {
	t.Helper()
	c := api.NewAgentClient(base, token, slog.New(slog.DiscardHandler))
	tc, err := tlsca.Pinned(ca)
	if err != nil {
		t.Fatal(err)
	}
	c.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	return c
}

// TestIntegrationTwoInstancesTakeOver: two `ingot serve` processes on one
// etcd prefix, virtual BMCs, a simulated agent and installed OS speaking
// the real agent API.
//
// SIGKILL: instance a owns a reimage waiting for its agent; killed, b
// takes the job over within the TTL, the agent boots through b, b makes
// the hand-off and finishes the job: the BMC saw a's network boot step
// once and b's hand-off once.
//
// rollout SIGKILL: instance d drives a two-wave rollout; killed during
// wave 1, b takes the rollout and its reimage over and runs both waves to
// the end; each machine's BMC saw each step once.
//
// SIGSTOP: instance c is in the middle of a reimage's BMC step: its
// network-boot override has reached the BMC (held there while c is
// stopped), its power cycle not yet. Past the TTL b takes the job over,
// runs the step from its start and finishes the job. c continued: its
// power cycle is not sent (Holds judges its lease from the clock) and its
// writes are refused; the BMC sees nothing more from it, one power cycle
// in all, and the job stays as b left it.
func TestIntegrationTwoInstancesTakeOver(t *testing.T) {
	g := newGroup(t)
	ctx := context.Background()
	a := g.start("ingot-a")
	b := g.start("ingot-b")
	raw, err := os.ReadFile(filepath.Join(a.data, wire.BootstrapTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(raw))
	// The BMC step sets the boot override (None, then Pxe) and power
	// cycles; the recipe hands off by kexec: boot from disk, no cycle.
	const netboot, handoff = "override None,override Pxe,reset", "override Hdd"

	t.Run("SIGKILL", func(t *testing.T) {
		n, bmc := g.enrol(1)
		id := g.reimage(a, tok, n)
		g.waitJob(id, "at boot, owned by a", 30*time.Second, func(j *store.Job, owner string) bool {
			return j.Step == engine.StepBoot && strings.HasPrefix(owner, "ingot-a/")
		})
		killed := time.Now()
		a.cmd.Process.Kill()
		g.waitJob(id, "taken over by b", 30*time.Second, func(_ *store.Job, owner string) bool { return strings.HasPrefix(owner, "ingot-b/") })
		t.Logf("b took the job over %s after a's SIGKILL (TTL %s)", time.Since(killed).Round(time.Millisecond), groupTTL)
		task := bootAgent(ctx, t, b, n)
		g.waitJob(id, "at first boot", 30*time.Second, func(j *store.Job, _ string) bool { return j.Step == engine.StepFirstBoot })
		firstBoot(ctx, t, b, n, task)
		j := g.waitJob(id, "ended", 60*time.Second, func(j *store.Job, _ string) bool { return j.State != store.JobRunning })
		if j.State != store.JobSucceeded {
			t.Fatalf("job %s ended %s: %s", id, j.State, j.Reason)
		}
		if got, want := strings.Join(bmc.list(), ","), netboot+","+handoff; got != want {
			t.Errorf("the BMC saw %s; want %s (a's step, then b's, each once)", got, want)
		}
	})

	// A rollout is a job too: instance d drives it (wave 1 started, its
	// reimage through the BMC step); SIGKILLed, b takes the rollout and
	// the wave's reimage over, finishes wave 1 and runs wave 2 itself.
	t.Run("rollout SIGKILL", func(t *testing.T) {
		d := g.start("ingot-d")
		n3, bmc3 := g.enrol(3)
		n4, bmc4 := g.enrol(4)
		var job wire.Job
		if err := d.call(tok, "POST", "/api/v1/rollouts", wire.RolloutRequest{Recipe: "gpu-train-h100x8", Machines: []string{n3.name, n4.name},
			Canary: 1, Batch: 1, MaxFailures: 0, Reason: "scale-out test"}, &job); err != nil {
			t.Fatal(err)
		}
		// child is the reimage job the rollout started for n.
		child := func(j *store.Job, n *hgxNode) string {
			var st engine.RolloutStatus
			if json.Unmarshal(j.Status, &st) != nil {
				return ""
			}
			return st.Jobs[n.id]
		}
		var first string
		g.waitJob(job.ID, "driving wave 1, owned by d", 30*time.Second, func(j *store.Job, owner string) bool {
			first = child(j, n3)
			return first != "" && strings.HasPrefix(owner, "ingot-d/")
		})
		g.waitJob(first, "at boot", 30*time.Second, func(j *store.Job, _ string) bool { return j.Step == engine.StepBoot })
		killed := time.Now()
		d.cmd.Process.Kill()
		g.waitJob(job.ID, "taken over by b", 30*time.Second, func(_ *store.Job, owner string) bool { return strings.HasPrefix(owner, "ingot-b/") })
		t.Logf("b took the rollout over %s after d's SIGKILL (TTL %s)", time.Since(killed).Round(time.Millisecond), groupTTL)
		for _, n := range []*hgxNode{n3, n4} {
			var id string
			g.waitJob(job.ID, "a reimage of "+n.name, 60*time.Second, func(j *store.Job, _ string) bool { id = child(j, n); return id != "" })
			g.waitJob(id, "at boot", 30*time.Second, func(j *store.Job, _ string) bool { return j.Step == engine.StepBoot })
			task := bootAgent(ctx, t, b, n)
			g.waitJob(id, "at first boot", 30*time.Second, func(j *store.Job, _ string) bool { return j.Step == engine.StepFirstBoot })
			firstBoot(ctx, t, b, n, task)
		}
		j := g.waitJob(job.ID, "ended", 60*time.Second, func(j *store.Job, _ string) bool { return j.State != store.JobRunning })
		if j.State != store.JobSucceeded {
			t.Fatalf("rollout %s ended %s: %s", job.ID, j.State, j.Reason)
		}
		for n, bmc := range map[string]*bmcLog{n3.name: bmc3, n4.name: bmc4} {
			if got, want := strings.Join(bmc.list(), ","), netboot+","+handoff; got != want {
				t.Errorf("%s's BMC saw %s; want %s (each step once)", n, got, want)
			}
		}
	})

	t.Run("SIGSTOP", func(t *testing.T) {
		c := g.start("ingot-c")
		n, bmc := g.enrol(2)
		bmc.hold, bmc.held, bmc.release = "override Pxe", make(chan struct{}), make(chan struct{})
		id := g.reimage(c, tok, n)
		select {
		case <-bmc.held:
		case <-time.After(30 * time.Second):
			t.Fatalf("c made no network-boot override; the BMC saw %v", bmc.list())
		}
		c.cmd.Process.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		// kill(2) wakes one thread of c; the others stop only once that
		// one has run. Released before then, a thread of c still running
		// under load took the override's answer and power cycled (a
		// failure seen beside stress-ng): c is stopped when all are.
		waitStopped(t, c.cmd.Process.Pid, 10*time.Second)
		close(bmc.release) // the override lands; c does not run
		g.waitJob(id, "taken over by b", 30*time.Second, func(_ *store.Job, owner string) bool { return strings.HasPrefix(owner, "ingot-b/") })
		t.Logf("b took the job over %s after c's SIGSTOP (TTL %s)", time.Since(stopped).Round(time.Millisecond), groupTTL)
		g.waitJob(id, "at boot", 30*time.Second, func(j *store.Job, _ string) bool { return j.Step == engine.StepBoot })
		task := bootAgent(ctx, t, b, n)
		g.waitJob(id, "at first boot", 30*time.Second, func(j *store.Job, _ string) bool { return j.Step == engine.StepFirstBoot })
		firstBoot(ctx, t, b, n, task)
		done := g.waitJob(id, "succeeded", 60*time.Second, func(j *store.Job, _ string) bool { return j.State == store.JobSucceeded })
		before := bmc.list()
		c.cmd.Process.Signal(syscall.SIGCONT)
		time.Sleep(groupTTL)
		after := bmc.list()
		if strings.Join(after, ",") != strings.Join(before, ",") {
			t.Errorf("the BMC saw %v after c continued (before: %v); want nothing from c", after[len(before):], before)
		}
		count := map[string]int{}
		for _, call := range after {
			count[call]++
		}
		if count["reset"] != 1 || count[handoff] != 1 || !strings.HasSuffix(strings.Join(after, ","), "reset,"+handoff) {
			t.Errorf("the BMC saw %v; want one power cycle (b's), then b's hand-off once: c's step cut before its power cycle", after)
		}
		if j, err := g.st.GetJob(ctx, id); err != nil || j.State != store.JobSucceeded || j.Revision != done.Revision {
			t.Errorf("after c continued, the job is %+v, %v; want it as b left it (revision %d)", j, err, done.Revision)
		}
		// Two orders are right once c runs again: its keep-alive finds the
		// lease gone first and ends the claim (the pending call returns
		// cancelled), or the step goes on first and Holds refuses the
		// power cycle. Either way the log says c stopped.
		log := c.log.String()
		if !strings.Contains(log, "membership lapsed: its jobs stop") {
			t.Errorf("c's log does not say it stopped its jobs after SIGCONT:\n%s", log)
		}
		t.Logf("c refused a BMC call itself: %v", strings.Contains(log, "BMC call not made: this instance may no longer own the job"))
	})
}

// waitStopped waits until every thread of process pid is in state T
// (stopped by a signal): a SIGSTOP reaches the threads one by one.
func waitStopped(t *testing.T, pid int, within time.Duration) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	deadline := time.Now().Add(within)
	for {
		states, err := threadStates(dir)
		if err == nil && len(states) > 0 && strings.Trim(states, "T") == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: threads not all stopped within %s (states %q, %v)", pid, within, states, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// threadStates is the state letter of each thread under dir
// (/proc/PID/task), from the field after the command's closing ")" of
// its stat file.
func threadStates(dir string) (string, error) {
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var states []byte
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return "", fmt.Errorf("%s/%s/stat: no state after the command: %q", dir, task.Name(), b)
		}
		states = append(states, b[i+2])
	}
	return string(states), nil
}

// TestIntegrationRecipesDiffer: two `ingot serve` instances on one etcd
// prefix whose recipes folders differ (b lacks one recipe): each
// publishes the recipes it has in force, and `GET /api/v1/alerts` on a
// shows the service alert recipes-differ naming the recipe and both
// instances; when b stops (its lease revoked, its entry gone), a's alert
// clears.
func TestIntegrationRecipesDiffer(t *testing.T) {
	g := newGroup(t)
	fewer := filepath.Join(t.TempDir(), "recipes")
	if err := os.CopyFS(fewer, os.DirFS(g.recipes)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(fewer, "gpu-infer-l40sx4-debian.yaml")); err != nil {
		t.Fatal(err)
	}
	// Telemetry on (its service alerts are what `ingot alerts` lists),
	// polling rarely: there are no machines.
	a := g.start("ingot-a", "--telemetry-interval", "1h")
	b := g.start("ingot-b", "--telemetry-interval", "1h", "--recipes", fewer)
	raw, err := os.ReadFile(filepath.Join(a.data, wire.BootstrapTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(raw))
	differ := func() (string, bool) {
		var alerts []wire.Alert
		if err := a.call(tok, "GET", "/api/v1/alerts", nil, &alerts); err != nil {
			t.Fatal(err)
		}
		for _, al := range alerts {
			if al.Rule == "recipes-differ" {
				return al.Summary, true
			}
		}
		return "", false
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("a: %s not within 30 s:\n%s", what, a.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("the recipes-differ alert", func() bool { _, ok := differ(); return ok })
	summary, _ := differ()
	if !strings.Contains(summary, "gpu-infer-l40sx4-debian (") || !strings.Contains(summary, "absent on ingot-b") ||
		!strings.Contains(summary, " on ingot-a;") || strings.Contains(summary, "gpu-train-h100x8") {
		t.Errorf("a's recipes-differ alert says %q; want gpu-infer-l40sx4-debian named, absent on ingot-b, and nothing else", summary)
	}
	b.cmd.Process.Signal(syscall.SIGTERM) // it leaves the group as it stops (the cleanup waits for it)
	waitFor("the recipes-differ alert cleared after b stopped", func() bool { _, ok := differ(); return !ok })
}
