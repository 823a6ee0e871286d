//go:build integration

package storm_test

import (
	"context"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/storm"
)

// BenchmarkBootStorm powers 500 simulated machines on at once, with the
// same harness, first against `ingot serve` alone (DHCP, TFTP, HTTP and
// its API) and then against dnsmasq (DHCP and TFTP) beside nginx (HTTP)
// serving the same first stages, kernel and initrd, each in namespaces of
// its own. Compared up to the initrd (the peers have no agent API): the
// time until every machine has its initrd, each machine's power-on to
// initrd (p50, p99), failures; ingot's full path to the agent's task is
// reported beside it, with serve's CPU time during the storm and its peak
// resident memory. dnsmasq runs with its defaults (--tftp-max 50) unless
// INGOT_STORM_TFTP_MAX says otherwise.
//
//	make build && INGOT_BIN=$PWD/bin/ingot go test -tags integration -run '^$' -bench BootStorm -benchtime 1x -v ./pkg/storm/
//
// INGOT_STORM_BENCH_MACHINES changes the count (default 500).
func BenchmarkBootStorm(b *testing.B) {
	netnstest.Need(b, "dnsmasq", "nginx")
	n := envInt("INGOT_STORM_BENCH_MACHINES", 500)
	env := newStormEnv(b)
	for range b.N {
		ing := env.ingotStorm(b, n)
		peer := env.peerStorm(b, n)
		ing.report(b, storm.StepInitrd)
		peer.report(b, storm.StepInitrd)
		b.ReportMetric(ing.all(storm.StepTask).Seconds(), "ingot-all-task-s")
		b.ReportMetric(ing.sum.P50[storm.StepTask].Seconds(), "ingot-task-p50-s")
		b.ReportMetric(ing.sum.P99[storm.StepTask].Seconds(), "ingot-task-p99-s")
		b.ReportMetric(float64(ing.peak)/(1<<20), "ingot-peak-rss-MiB")
		ratio := peer.all(storm.StepInitrd).Seconds() / ing.all(storm.StepInitrd).Seconds()
		b.ReportMetric(ratio, "speed-ingot/peer")
		b.Logf("time until all %d machines have their initrd: ingot %v, dnsmasq+nginx %v: ingot %.2fx the peer's speed; ingot's full path (task) %v; serve's peak RSS %.0f MiB",
			n, ing.all(storm.StepInitrd).Round(time.Millisecond), peer.all(storm.StepInitrd).Round(time.Millisecond), ratio,
			ing.all(storm.StepTask).Round(time.Millisecond), float64(ing.peak)/(1<<20))
		if ing.sum.Failed > 0 {
			b.Errorf("ingot: %d of %d machines failed (goal 0): %v", ing.sum.Failed, n, ing.sum.Check())
		}
	}
}

// side is one server's storm.
type side struct {
	name string
	key  string // metric prefix
	rep  *storm.Report
	sum  storm.Summary
	cpu  time.Duration // the server's, during the storm
	peak int64         // ingot's peak RSS
}

// report logs the side's summary and reports, for step, when the last
// machine finished it, per machine p50 and p99, failures and CPU time.
func (s side) report(b *testing.B, step string) {
	b.Logf("%s, %d machines, storm %v, its CPU %v, load generator CPU %v:\n%s", s.name, len(s.rep.Machines), s.rep.Wall.Round(time.Millisecond),
		s.cpu.Round(time.Millisecond), s.rep.ClientCPU.Round(time.Millisecond), s.sum)
	b.ReportMetric(s.all(step).Seconds(), s.key+"-all-"+step+"-s")
	b.ReportMetric(s.sum.P50[step].Seconds(), s.key+"-"+step+"-p50-s")
	b.ReportMetric(s.sum.P99[step].Seconds(), s.key+"-"+step+"-p99-s")
	b.ReportMetric(float64(s.sum.Failed), s.key+"-failed")
	b.ReportMetric(s.cpu.Seconds(), s.key+"-cpu-s")
}

// all is when the last machine finished step (the last that did, when
// some failed).
func (s side) all(step string) time.Duration {
	if d, ok := s.sum.Until[step]; ok {
		return d
	}
	var last time.Duration
	for _, m := range s.rep.Machines {
		if d, ok := m.Reached(step); ok {
			last = max(last, d+m.PowerOn)
		}
	}
	return last
}

const stormLimit = 5 * time.Minute

func (e *stormEnv) ingotStorm(b *testing.B, n int) side {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	srv, cli := e.net(b)
	g := e.startIngot(b, ctx, srv)
	ms := storm.Machines(n)
	start := time.Now()
	if err := g.Prepare(ctx, ms); err != nil {
		b.Fatal(err)
	}
	b.Logf("ingot: %d machines enrolled and reimaged (provisioning) in %v", n, time.Since(start).Round(time.Millisecond))
	cpu := storm.ProcCPU(g.Pid)
	rss, peak := storm.ProcMemory(g.Pid)
	b.Logf("ingot serve before the storm: RSS %.0f MiB, peak %.0f MiB (enrolment and reimage of %d machines)", float64(rss)/(1<<20), float64(peak)/(1<<20), n)
	rep, err := storm.RunIn(ctx, cli, storm.Config{Iface: storm.ClientIface, Machines: ms, Files: e.files, API: true}, b.TempDir(), stormLimit)
	if err != nil {
		b.Fatal(err)
	}
	s := side{name: "ingot", key: "ingot", rep: rep, sum: rep.Summarize(append(storm.BootSteps, storm.AgentSteps...)), cpu: storm.ProcCPU(g.Pid) - cpu}
	_, s.peak = storm.ProcMemory(g.Pid)
	return s
}

func (e *stormEnv) peerStorm(b *testing.B, n int) side {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := storm.Config{Iface: storm.ClientIface, Machines: storm.Machines(n), Files: e.files}
	return e.peerStormWith(b, ctx, cfg, storm.BootSteps)
}

// peerStormWith runs cfg against dnsmasq and nginx in new namespaces.
func (e *stormEnv) peerStormWith(b *testing.B, ctx context.Context, cfg storm.Config, steps []string) side {
	srv, cli := e.net(b)
	p, err := storm.StartPeer(ctx, storm.PeerConfig{NS: srv, Dir: b.TempDir(), FirstStage: "/usr/lib/ipxe",
		Kernel: e.kernel, Initrd: e.initrd, TFTPMax: envInt("INGOT_STORM_TFTP_MAX", 0)})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	cpu := func() (t time.Duration) {
		for _, pid := range p.Pids() {
			t += storm.ProcCPU(pid)
		}
		return t
	}
	before := cpu()
	rep, err := storm.RunIn(ctx, cli, cfg, b.TempDir(), stormLimit)
	if err != nil {
		b.Fatal(err)
	}
	return side{name: "dnsmasq+nginx", key: "peer", rep: rep, sum: rep.Summarize(steps), cpu: cpu() - before}
}

// BenchmarkTFTPStorm is the first stage alone: 500 machines power on at
// once and fetch undionly.kpxe or snponly.efi over TFTP after firmware
// DHCP, from `ingot serve` (machines unknown to it: its discovery policy
// answers them) and from dnsmasq, each in namespaces of its own. Reports
// the time until every machine has its first stage, p50/p99 per machine,
// failures, resent requests, and each server's CPU time.
//
//	INGOT_BIN=$PWD/bin/ingot go test -tags integration -run '^$' -bench TFTPStorm -benchtime 1x -v ./pkg/storm/
func BenchmarkTFTPStorm(b *testing.B) {
	netnstest.Need(b, "dnsmasq", "nginx")
	n := envInt("INGOT_STORM_BENCH_MACHINES", 500)
	env := newStormEnv(b)
	cfg := storm.Config{Iface: storm.ClientIface, Machines: storm.Machines(n), Files: env.files, Until: storm.StepTFTP}
	steps := []string{storm.StepDHCP, storm.StepTFTP}
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		srv, cli := env.net(b)
		g := env.startIngot(b, ctx, srv)
		cpu := storm.ProcCPU(g.Pid)
		rep, err := storm.RunIn(ctx, cli, cfg, b.TempDir(), stormLimit)
		if err != nil {
			b.Fatal(err)
		}
		ing := side{name: "ingot", key: "ingot", rep: rep, sum: rep.Summarize(steps), cpu: storm.ProcCPU(g.Pid) - cpu}
		peer := env.peerStormWith(b, ctx, cfg, steps)
		cancel()
		ing.report(b, storm.StepTFTP)
		peer.report(b, storm.StepTFTP)
		b.ReportMetric(peer.all(storm.StepTFTP).Seconds()/ing.all(storm.StepTFTP).Seconds(), "speed-ingot/peer")
		if ing.sum.Failed > 0 {
			b.Errorf("ingot: %d of %d machines failed (goal 0): %v", ing.sum.Failed, n, ing.sum.Check())
		}
	}
}
