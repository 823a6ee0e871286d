package storm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns"
)

// IngotConfig starts the server under test.
type IngotConfig struct {
	NS     *netns.NS // the server namespace (Link made its interface)
	Bin    string    // the ingot binary (make build: bin/ingot)
	Dir    string    // data, recipes and logs go here
	Kernel string    // the agent kernel and initramfs the lab builds
	Initrd string
	// Mockup is the Redfish mockup folder the machines' virtual BMCs
	// serve (testdata/redfish-mockups/NAME).
	Mockup string
	// Args are more `ingot serve` flags.
	Args []string
}

// Ingot is a running `ingot serve` (the real binary, in the server
// namespace) with a virtual BMC per machine (`ingot vbmc`, on the
// namespace's loopback), driven through its operator API with the token
// it writes on its first start, as an operator would.
type Ingot struct {
	cfg    IngotConfig
	serve  *exec.Cmd
	vbmc   *exec.Cmd
	exited chan error
	API    *client.Client
	// Pid is serve's process (`ip netns exec` execs in place).
	Pid int
}

const (
	httpPort = 8080
	apiPort  = 8443
	bmcPort0 = 9001
	bmcUser  = "admin"
	recipe   = "storm"
)

// StartIngot lays out serve's data (the agent's files in its artifact
// store, the storm recipe), starts it and waits until its API answers.
func StartIngot(ctx context.Context, cfg IngotConfig) (*Ingot, error) {
	data := filepath.Join(cfg.Dir, "data")
	kernel, initrd, err := importAgent(ctx, filepath.Join(data, "artifacts"), cfg.Kernel, cfg.Initrd)
	if err != nil {
		return nil, err
	}
	if err := writeRecipe(filepath.Join(cfg.Dir, "recipes"), kernel, initrd); err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--interface", ServerIface, "--data", data,
		"--recipes", filepath.Join(cfg.Dir, "recipes"), "--dhcp", "full",
		"--pool", fmt.Sprintf("10.77.0.0/%d,%s-%s", prefixLen, PoolStart, PoolEnd),
		"--http-addr", fmt.Sprintf("%s:%d", ServerIP, httpPort), "--api-addr", fmt.Sprintf("%s:%d", ServerIP, apiPort),
		"--bmc-credentials-dir", cfg.Dir}, cfg.Args...)
	g := &Ingot{cfg: cfg, exited: make(chan error, 1)}
	if g.serve, err = g.spawn("serve", cfg.Bin, args...); err != nil {
		return nil, err
	}
	g.Pid = g.serve.Process.Pid
	go func() { g.exited <- g.serve.Wait() }()
	if err := g.waitAPI(ctx, data); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

// spawn starts name in the namespace, its output in Dir/name.log.
func (g *Ingot) spawn(name, bin string, args ...string) (*exec.Cmd, error) {
	return spawn(g.cfg.NS, g.cfg.Dir, name, bin, args...)
}

// waitAPI waits for serve's CA, token and /healthz, then makes the client.
func (g *Ingot) waitAPI(ctx context.Context, data string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	base := fmt.Sprintf("https://%s:%d", ServerIP, apiPort)
	var last error
	for {
		select {
		case err := <-g.exited:
			return fmt.Errorf("ingot serve exited (%v): %s", err, g.Tail("serve", 2000))
		case <-ctx.Done():
			return fmt.Errorf("ingot serve's API did not answer on %s within 60 s (%v): %s", base, last, g.Tail("serve", 2000))
		case <-time.After(200 * time.Millisecond):
		}
		hc, token, err := apiClient(g.cfg.NS, data)
		if err != nil {
			last = err
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("/healthz: %s", resp.Status)
			continue
		}
		g.API, err = client.New(client.Config{Server: base, Token: token, HTTP: hc})
		return err
	}
}

// apiClient trusts serve's CA and reads the bootstrap token it wrote.
func apiClient(ns *netns.NS, data string) (*http.Client, string, error) {
	pem, err := os.ReadFile(filepath.Join(data, "tls", "ca.pem"))
	if err != nil {
		return nil, "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, "", errors.New("serve's ca.pem holds no certificate")
	}
	tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		return nil, "", err
	}
	tr := &http.Transport{DialContext: ns.DialContext, MaxIdleConnsPerHost: 16,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}, strings.TrimSpace(string(tok)), nil
}

// Tail is the end of a process's log (serve, vbmc).
func (g *Ingot) Tail(name string, n int) string {
	b, _ := os.ReadFile(filepath.Join(g.cfg.Dir, name+".log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Stop ends serve (SIGTERM, then SIGKILL after 10 s) and the BMCs.
func (g *Ingot) Stop() error {
	var err error
	if g.serve != nil && g.serve.ProcessState == nil {
		g.serve.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-g.exited:
		case <-time.After(10 * time.Second):
			g.serve.Process.Kill()
			err = fmt.Errorf("ingot serve still running 10 s after SIGTERM: %v", <-g.exited)
		}
	}
	if g.vbmc != nil {
		g.vbmc.Process.Kill()
		g.vbmc.Wait()
	}
	return err
}

// importAgent puts the agent's files into serve's artifact store (before
// serve starts, as `ingot lab up` does) under the names the recipe uses.
func importAgent(ctx context.Context, dir, kernel, initrd string) (kSHA, iSHA string, err error) {
	st, err := artifact.Open(dir)
	if err != nil {
		return "", "", err
	}
	var shas [2]string
	for i, f := range []struct{ path, name string }{{kernel, "agent-vmlinuz"}, {initrd, "agent-initrd"}} {
		ref, err := st.PutFile(ctx, f.path)
		if err != nil {
			return "", "", fmt.Errorf("importing %s: %w", f.path, err)
		}
		if err := st.SetName(f.name, ref.SHA256); err != nil {
			return "", "", err
		}
		shas[i] = ref.SHA256
	}
	return shas[0], shas[1], nil
}

// writeRecipe writes the storm's recipe, pinned to the agent's files. Its
// image is never fetched (the storm ends at the agent's task): the URL and
// digest only satisfy the recipe's rules.
func writeRecipe(dir, kernel, initrd string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	body := fmt.Sprintf(`# Written by pkg/storm: the boot storm's machines boot the agent kernel and
# initramfs the lab builds. The image is never fetched: the storm ends at the
# agent's task.
name: %s
version: 1.0.0
description: boot storm (pkg/storm)
owner: ingot-dev
os:
  image:
    name: lab
    url: http://%s:%d/artifacts/never-fetched.raw.zst
    sha256: "%064x"
    format: raw.zst
  agent:
    kernel: {path: agent-vmlinuz, sha256: "%s"}
    initrd: {path: agent-initrd, sha256: "%s"}
    cmdline: console=ttyS0
network:
  hostname: storm-{index:03d}
timeouts:
  power: 60s
  post: 10m
  provision: 10m
`, recipe, ServerIP, httpPort, 1, kernel, initrd)
	return os.WriteFile(filepath.Join(dir, recipe+".yaml"), []byte(body), 0o644)
}

// Prepare makes the machines ready to boot the agent, as an operator
// would: a virtual BMC each, enrolment through the API with the storm
// recipe, then one reimage (POST /api/v1/reimage, many machines a request):
// the engine's BMC step sets each machine's one-time network boot and power
// cycles it, and the machines wait in provisioning for their agent. It
// returns when every machine is there.
func (g *Ingot) Prepare(ctx context.Context, ms []Machine) error {
	if err := g.startBMCs(ctx, len(ms)); err != nil {
		return err
	}
	if err := g.enrol(ctx, ms); err != nil {
		return err
	}
	names := make([]string, len(ms))
	for i := range ms {
		names[i] = machineName(i)
	}
	for len(names) > 0 {
		batch := names[:min(len(names), 100)]
		names = names[len(batch):]
		res, err := g.API.Reimage(ctx, reimageRequest(batch))
		if err != nil {
			return fmt.Errorf("reimage of %d machines: %w", len(batch), err)
		}
		for _, r := range res {
			if r.Error != "" {
				return fmt.Errorf("reimage %s: %s", r.Machine, r.Error)
			}
		}
	}
	return g.waitState(ctx, len(ms), machine.StateProvisioning)
}

func machineName(i int) string { return fmt.Sprintf("storm-%03d", i+1) }

// enrol adds the machines through the API, a few requests at a time.
func (g *Ingot) enrol(ctx context.Context, ms []Machine) error {
	cred := filepath.Join(g.cfg.Dir, "bmc.cred")
	if err := os.WriteFile(cred, []byte("username="+bmcUser+"\npassword="+bmcPassword+"\n"), 0o600); err != nil {
		return err
	}
	errs := make(chan error, len(ms))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := g.API.Enroll(ctx, machine.Machine{Name: machineName(i), MACs: []string{m.MAC}, Recipe: recipe,
				Rack: "storm", Index: i + 1, BMC: machine.BMC{Endpoint: "http://127.0.0.1:" + strconv.Itoa(bmcPort0+i),
					CredentialRef: "file:" + cred, Insecure: true}})
			if err != nil {
				errs <- fmt.Errorf("enrolling %s: %w", machineName(i), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitState polls until n machines are in state.
func (g *Ingot) waitState(ctx context.Context, n int, state machine.State) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		got, err := g.count(ctx, state)
		if err == nil && got == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d machines reached %s (%v); serve.log: %s", got, n, state, err, g.Tail("serve", 1500))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (g *Ingot) count(ctx context.Context, state machine.State) (int, error) {
	n, after := 0, ""
	for {
		ms, next, err := g.API.Machines(ctx, client.ListOptions{State: string(state), Limit: 500, After: after})
		if err != nil {
			return n, err
		}
		n += len(ms)
		if next == "" {
			return n, nil
		}
		after = next
	}
}

// bmcPassword is the virtual BMCs' password: they listen only on the
// server namespace's loopback.
const bmcPassword = "storm-bmc"

func reimageRequest(names []string) wire.ReimageRequest {
	return wire.ReimageRequest{Machines: names, Reason: "boot storm"}
}

// startBMCs runs one `ingot vbmc` process with n virtual BMCs on the server
// namespace's loopback, ports bmcPort0.., and waits for the last one.
func (g *Ingot) startBMCs(ctx context.Context, n int) error {
	pw := filepath.Join(g.cfg.Dir, "bmc.password")
	if err := os.WriteFile(pw, []byte(bmcPassword+"\n"), 0o600); err != nil {
		return err
	}
	var err error
	g.vbmc, err = g.spawn("vbmc", g.cfg.Bin, "vbmc", "--mockup", g.cfg.Mockup, "--count", strconv.Itoa(n),
		"--listen", fmt.Sprintf("127.0.0.1:%d", bmcPort0), "--user", bmcUser, "--password-file", pw)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	last := fmt.Sprintf("127.0.0.1:%d", bmcPort0+n-1)
	for {
		c, err := g.cfg.NS.DialContext(ctx, "tcp", last)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ingot vbmc not listening on %s within 30 s (%v): %s", last, err, g.Tail("vbmc", 1500))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Metrics reads serve's /metrics (on its API listener).
func (g *Ingot) Metrics(ctx context.Context) (string, error) {
	hc, _, err := apiClient(g.cfg.NS, filepath.Join(g.cfg.Dir, "data"))
	if err != nil {
		return "", err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://%s:%d/metrics", ServerIP, apiPort), nil)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
