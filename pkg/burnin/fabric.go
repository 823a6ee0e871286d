package burnin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Pairer asks ingot for the partner of a fabric test: api.PathPeer.
type Pairer func(ctx context.Context, check, addr string) (api.Peer, error)

// The fabric tests' defaults.
const (
	defaultPairWait  = 10 * time.Minute // how long a node waits for a partner
	defaultPairEvery = 5 * time.Second  // how often it asks
)

// fabric runs a two-node test: the engine pairs this node with another of
// its recipe in burn-in; the first to ask listens, the second connects.
// Both judge what they measured. No partner in time, or no answer from
// ingot, and the check could not run.
func (r *Runner) fabric(ctx context.Context, c recipe.Check, p Plan, t tool, path string) (api.Evidence, map[string]float64) {
	notRun := func(format string, args ...any) (api.Evidence, map[string]float64) {
		return api.Evidence{Tool: t.bin, NotRun: fmt.Sprintf(format, args...)}, nil
	}
	addr, err := interfaceAddr(c.Args["interface"])
	if err != nil {
		return notRun("args.interface: %v", err)
	}
	wait := r.PairWait
	if wait <= 0 {
		wait = defaultPairWait
	}
	every := r.PairEvery
	if every <= 0 {
		every = defaultPairEvery
	}
	deadline := time.Now().Add(wait)
	var peer api.Peer
	for {
		if peer, err = r.Pair(ctx, c.Name, addr); err != nil {
			return notRun("asking ingot for a partner node: %v", err)
		}
		if peer.Role != "wait" {
			break
		}
		if time.Now().After(deadline) {
			return notRun("%s did not run: no other node of the recipe reached burn-in within %s", t.bin, wait)
		}
		select {
		case <-ctx.Done():
			return notRun("%s did not run: the burn-in deadline passed waiting for a partner", t.bin)
		case <-time.After(every):
		}
	}
	b := capped(p.BurnIn, time.Minute)
	d, secs := b.Duration.D(), seconds(b, 60)
	c = r.gpuDirect(c, p)
	argv := t.serve(c, secs)
	if peer.Role == "client" {
		argv = t.connect(c, secs, peer.Address)
	}
	with := fmt.Sprintf("as %s with %s", peer.Role, peer.Address)
	r.logf("burn-in %s: %s with %s", c.Name, peer.Role, peer.Address)
	run := func() (api.Evidence, error) {
		out, err := r.runRetrying(ctx, path, argv, peer.Role == "client", every, r.limit(d))
		return Evidence(c, out), err
	}
	ev, err := run()
	if again(ctx, ev, err) {
		// A fabric test needs both nodes and the link between them at once,
		// so a stall of either ends both runs: iperf 3.12's server gives up
		// 40 s past the test's duration when its client stops sending
		// ("select failed: Bad file descriptor"), and the client then reads
		// "Broken pipe" (testdata/iperf3/*_peer_*.json). Each end that saw
		// the failure runs once more: the server listens again at once, and
		// the client retries until it does (10 tries, PairEvery apart). An
		// end that runs again alone is bounded: a server by its limit, a
		// client by its tries. A second failure is the check's.
		first := ev.NotRun
		r.logf("burn-in %s: could not finish %s (%s); running it once more", c.Name, with, first)
		ev, err = run()
		for i := range ev.Values {
			ev.Values[i].Subject += ", second run (the first could not finish: " + first + ")"
		}
		if ev.NotRun != "" {
			ev.NotRun += "; the first run too: " + first
		}
	}
	for i := range ev.Values {
		ev.Values[i].Subject += ", " + with
	}
	if ev.NotRun != "" {
		ev.NotRun += ", " + with
		if err != nil {
			ev.NotRun += fmt.Sprintf(" (%s %v: %v)", t.bin, argv, err)
		}
	}
	return ev, nil
}

// again reports whether a fabric run is worth one more try: the tool ran
// and said it could not finish. Not when its partner never listened (the
// client already retried), when the run was killed past its limit (no
// partner connected, or the run hung), or when the burn-in's deadline
// passed.
func again(ctx context.Context, ev api.Evidence, err error) bool {
	return ev.NotRun != "" && ctx.Err() == nil && !errors.Is(err, errHung) && !errors.Is(err, errRefused)
}

// limit is how long one run of a tool meant to last d may take.
func (r *Runner) limit(d time.Duration) time.Duration {
	if r.RunLimit != nil {
		return r.RunLimit(d)
	}
	return runLimit(d)
}

// errRefused marks a client run whose server never accepted it.
var errRefused = errors.New("the partner did not accept the connection")

// runRetrying runs argv, each run killed past limit (a server whose
// client never comes, a run that hangs); a client retries while its server
// is not yet listening (up to 10 tries): the partner learns it is the
// server on its next poll, seconds after the client learned its role.
// Refused is read from the output, whatever the exit: iperf3 3.12 with -J
// exits 0 when it cannot connect (seen on Debian 12), saying so only in
// its JSON's "error". Any other failure returns at once, for fabric's one
// more run to report.
func (r *Runner) runRetrying(ctx context.Context, path string, argv []string, retry bool, every, limit time.Duration) ([]byte, error) {
	var out []byte
	var err error
	for i := 0; i < 10; i++ {
		out, err = r.runLimited(ctx, path, argv, limit)
		if errors.Is(err, errHung) {
			return out, fmt.Errorf("killed after %s: no partner connected within it, or the run hung (%w)", limit, errHung)
		}
		if !notListening(out) || !retry || ctx.Err() != nil {
			return out, err
		}
		if i == 9 {
			break
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(every):
		}
	}
	if err != nil {
		return out, fmt.Errorf("%w: %v", errRefused, err)
	}
	return out, errRefused
}

// notListening reports whether a fabric tool's client output says its
// server refused or did not answer the connection (iperf3: "unable to
// connect to server"; perftest: "Couldn't connect to").
func notListening(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "unable to connect to server") || strings.Contains(s, "Couldn't connect to") ||
		strings.Contains(s, "Connection refused")
}

func capped(b recipe.BurnIn, most time.Duration) recipe.BurnIn {
	if b.Duration.D() <= 0 || b.Duration.D() > most {
		b.Duration = recipe.Duration(most)
	}
	return b
}

// interfaceAddr is the IPv4 of the named interface ("": let ingot take
// the address the request comes from).
func interfaceAddr(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return "", err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("%s has no IPv4 address", name)
}

func iperf3Serve(_ recipe.Check, _ string) []string { return []string{"-s", "-1", "-J"} }
func iperf3Connect(_ recipe.Check, secs, addr string) []string {
	return []string{"-c", addr, "-J", "-t", secs, "-P", "4"}
}

func ibArgs(c recipe.Check, secs string) []string {
	a := []string{"--report_gbits", "-D", secs}
	if d := c.Args["device"]; d != "" {
		a = append(a, "-d", d)
	}
	if g := c.Args["cuda"]; g != "" {
		a = append(a, "--use_cuda="+g) // GPUDirect RDMA: the buffers live in that GPU's memory
	}
	return a
}

// gpuDirect returns c with args.cuda set to GPU 0 where GPUDirect RDMA is
// present and the recipe did not pick a GPU: ib_write_bw then measures the
// path NCCL uses (NIC <-> GPU memory), not host memory. Present means the
// node has GPUs and the nvidia_peermem module is loaded.
func (r *Runner) gpuDirect(c recipe.Check, p Plan) recipe.Check {
	if c.Name != "ib-write-bw" || c.Args["cuda"] != "" || p.GPUs == 0 {
		return c
	}
	loaded := r.PeerMem
	if loaded == nil {
		loaded = func() bool { _, err := os.Stat("/sys/module/nvidia_peermem"); return err == nil }
	}
	if !loaded() {
		return c
	}
	args := map[string]string{"cuda": "0"}
	for k, v := range c.Args {
		args[k] = v
	}
	c.Args = args
	return c
}
func ibServe(c recipe.Check, secs string) []string { return ibArgs(c, secs) }
func ibConnect(c recipe.Check, secs, addr string) []string {
	return append(ibArgs(c, secs), addr)
}
