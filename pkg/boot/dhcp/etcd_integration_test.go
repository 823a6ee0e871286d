//go:build integration

package dhcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/scaleout"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// etcdServerConfig is what a DHCP server process on an etcd store is
// given (INGOT_DHCP_ETCD_SERVER, JSON): it runs in the host's namespace,
// where etcd listens on loopback, with its DHCP socket opened inside NS.
type etcdServerConfig struct {
	NS, URL, Name string
	// Elect: answer only while leading the segment's election (as serve
	// does); else always (two instances both answering: the transactional
	// allocator alone keeps addresses apart).
	Elect bool
}

// runEtcdServer is the server process of etcdServerConfig (TestMain).
func runEtcdServer(raw string) error {
	var c etcdServerConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if pf := os.Getenv("INGOT_BENCH_ETCD_CPUPROFILE"); pf != "" { // the server's CPU profile (SIGTERM writes it)
		f, err := os.Create(pf)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	st, err := etcd.OpenURL(ctx, c.URL, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	var active func() bool
	if c.Elect {
		node, err := scaleout.Join(ctx, st, scaleout.Config{Name: c.Name, TTL: 5 * time.Second})
		if err != nil {
			return err
		}
		seg := node.Segment([]string{"10.77.0.0/16"})
		go node.Run(ctx)
		go seg.Run(ctx)
		active = seg.Active
	}
	pool, err := dhcp.ParsePool("10.77.0.0/16,10.77.1.0-10.77.250.255,router=10.77.0.1")
	if err != nil {
		return err
	}
	ns, err := netns.Open(c.NS)
	if err != nil {
		return err
	}
	var s *dhcp.Server
	err = ns.Do(func() (err error) {
		s, err = dhcp.NewServer(dhcp.Config{Interface: "eth0", Mode: dhcp.ModeFull, Pools: []dhcp.Pool{pool},
			LeaseTime: time.Hour, Store: st, Unknown: dhcp.UnknownIgnore, Active: active,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			return err
		}
		return s.Listen()
	})
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// startEtcdServer starts a DHCP server process on the etcd store url with
// its socket in ns; it is killed when the test ends.
func startEtcdServer(t testing.TB, ns *netns.NS, url, name string, elect bool) *exec.Cmd {
	t.Helper()
	raw, _ := json.Marshal(etcdServerConfig{NS: ns.Name, URL: url, Name: name, Elect: elect})
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "INGOT_DHCP_ETCD_SERVER="+string(raw))
	cmd.Stderr = os.Stderr
	if err := etcdtest.StartProcess(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// boundLeases reads the leases of the store at url after the servers are
// gone: the MAC each address is bound to, and any address bound to two.
func boundLeases(t testing.TB, url string) (map[netip.Addr]string, []string) {
	t.Helper()
	st, err := etcd.OpenURL(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ls, err := st.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byIP := map[netip.Addr]string{}
	var twice []string
	for _, l := range ls {
		if l.State != dhcp.StateBound {
			continue
		}
		if other, ok := byIP[l.IP]; ok {
			twice = append(twice, fmt.Sprintf("%s: %s and %s", l.IP, other, l.MAC))
		}
		byIP[l.IP] = l.MAC
	}
	if err := st.Check(context.Background()); err != nil {
		t.Errorf("etcd prefix after the storm: %v", err)
	}
	return byIP, twice
}

// lostACKs lists the addresses g saw ACKed that bound does not hold for
// the MAC they were ACKed to.
func lostACKs(g *loadgen, bound map[netip.Addr]string) []string {
	var lost []string
	g.acked.Range(func(k, v any) bool {
		if ip := k.(netip.Addr); bound[ip] != v.(string) {
			lost = append(lost, fmt.Sprintf("%s (ACKed to %s, bound to %q)", ip, v, bound[ip]))
		}
		return true
	})
	return lost
}

// acked counts the addresses g has seen ACKed.
func (g *loadgen) ackedCount() int {
	n := 0
	g.acked.Range(func(_, _ any) bool { n++; return true })
	return n
}

// TestIntegrationDHCPStormEtcdMemberStopped: a DHCP storm (1,500 clients,
// 64 in flight) against ingot on a 3-member etcd cluster. The first half
// (750 clients) runs while the leader is stopped (SIGTERM) a quarter of the
// way in; the second half starts once the stop has returned, so it runs
// whole with the member down however fast the host answers (a fast host
// ACKs 1,500 clients in 0.4 s, quicker than etcd stops). The member is
// started again at the end and the server killed with SIGKILL: every lease it
// ACKed is in etcd (0 lost), and no address was ACKed to two MACs.
func TestIntegrationDHCPStormEtcdMemberStopped(t *testing.T) {
	netnstest.Need(t)
	c := etcdtest.Three(t)
	url := c.URL("dhcp-storm")
	srv, lg := benchPair(t)
	cmd := startEtcdServer(t, srv, url, "ingot-a", false)
	g := newLoadgen(t, lg)
	g.ready(t, "ingot on etcd")
	g.tries = 15 // a PXE client goes on asking for a minute; this one for 15 s
	const clients, half = 1500, 750
	var first int
	done := make(chan struct{})
	start := time.Now()
	go func() { first, _ = g.run(1, half, 64); close(done) }()
	for g.ackedCount() < clients/4 {
		select {
		case <-done:
			t.Fatal("the first half ended before a quarter of the storm was ACKed")
		case <-time.After(5 * time.Millisecond):
		}
	}
	leader := max(c.Leader(context.Background()), 0)
	before := g.ackedCount()
	c.Stop(leader)
	stoppedAt := g.ackedCount()
	second, _ := g.run(2, half, 64)
	<-done
	acks := first + second
	t.Logf("leader %s stopped (SIGTERM) after %d ACKs, down after %d; then %d clients with it down; storm: %d of %d ACKed in %s (%d retransmissions, %d NAKs)",
		c.Members[leader].Name, before, stoppedAt, half, acks, clients, time.Since(start).Round(time.Millisecond), g.retries.Load(), g.naks.Load())
	cmd.Process.Kill()
	cmd.Wait()
	c.Restart(leader)
	bound, twice := boundLeases(t, url)
	if lost := lostACKs(g, bound); len(lost) > 0 {
		t.Errorf("%d ACKed leases are not in etcd after SIGKILL: %v", len(lost), lost[:min(len(lost), 10)])
	}
	if acks != clients {
		t.Errorf("%d of %d clients got an ACK with the leader of three stopped; want every one", acks, clients)
	}
	if g.dups.Load() > 0 || len(twice) > 0 {
		t.Errorf("an address went to two MACs: %d duplicate ACKs; in etcd %v", g.dups.Load(), twice)
	}
}

// segment is a broadcast domain of two DHCP servers (10.77.0.1 and
// 10.77.0.3) and the load generator (10.77.0.2), on a bridge.
func segment(t testing.TB) (s1, s2, load *netns.NS) {
	t.Helper()
	ctx := context.Background()
	br := netnstest.New(t, "ingot-seg-br")
	if err := br.AddBridge(ctx, "br0", ""); err != nil {
		t.Fatal(err)
	}
	s1, s2, load = netnstest.New(t, "ingot-seg-a"), netnstest.New(t, "ingot-seg-b"), netnstest.New(t, "ingot-seg-l")
	for i, x := range []struct {
		ns   *netns.NS
		cidr string
	}{{s1, "10.77.0.1/16"}, {s2, "10.77.0.3/16"}, {load, "10.77.0.2/16"}} {
		if err := netns.Veth(ctx, x.ns, "eth0", x.cidr, br, fmt.Sprintf("p%d@br0", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	return s1, s2, load
}

// TestIntegrationDHCPTwoInstancesOneSegment: two ingot DHCP servers on one
// etcd prefix and one broadcast domain. Both answering at once (the
// election off): every client gets two offers, the servers offer one free
// address to two clients and the commit NAKs one of them, yet no address
// is ever ACKed to two MACs and etcd holds no address bound twice. With
// the election (as serve runs): only one answers, no NAKs; its process
// killed, the other takes the segment over within the TTL and the clients
// that were waiting finish.
func TestIntegrationDHCPTwoInstancesOneSegment(t *testing.T) {
	netnstest.Need(t)
	c := etcdtest.Single(t)
	t.Run("both answering", func(t *testing.T) {
		url := c.URL("dhcp-both")
		s1, s2, lg := segment(t)
		a, b := startEtcdServer(t, s1, url, "ingot-a", false), startEtcdServer(t, s2, url, "ingot-b", false)
		g := newLoadgen(t, lg)
		g.ready(t, "two servers")
		acks, secs := g.run(2, 400, 400)
		t.Logf("both answering: %d of 400 ACKed in %.1fs, %d NAKs (one address offered to two clients), %d retransmissions",
			acks, secs, g.naks.Load(), g.retries.Load())
		for _, cmd := range []*exec.Cmd{a, b} {
			cmd.Process.Kill()
			cmd.Wait()
		}
		bound, twice := boundLeases(t, url)
		if g.dups.Load() > 0 || len(twice) > 0 {
			t.Errorf("an address went to two MACs: %d duplicate ACKs; in etcd %v", g.dups.Load(), twice)
		}
		if lost := lostACKs(g, bound); len(lost) > 0 {
			t.Errorf("%d ACKed leases are not in etcd: %v", len(lost), lost[:min(len(lost), 10)])
		}
	})
	t.Run("elected", func(t *testing.T) {
		url := c.URL("dhcp-elect")
		s1, s2, lg := segment(t)
		a := startEtcdServer(t, s1, url, "ingot-a", true)
		g := newLoadgen(t, lg)
		g.ready(t, "the elected server") // a leads: b is not started yet
		startEtcdServer(t, s2, url, "ingot-b", true)
		servers := servedBy(g)
		acks, _ := g.run(3, 300, 64)
		if g.naks.Load() > 0 || acks != 300 {
			t.Errorf("one elected server: %d of 300 ACKed, %d NAKs; want all, none", acks, g.naks.Load())
		}
		killed := time.Now()
		a.Process.Kill()
		a.Wait()
		g.tries = 30 // real clients retry until they get an answer
		after, _ := g.run(4, 100, 16)
		t.Logf("after the leader was killed: %d of 100 ACKed within %s; servers seen %v", after, time.Since(killed).Round(time.Second), servers())
		if after != 100 {
			t.Errorf("after the leader was killed: %d of 100 ACKed; want the other to take over", after)
		}
		if got := servers(); len(got) != 2 {
			t.Errorf("servers that answered: %v; want a, then b after the kill", got)
		}
		_, twice := boundLeases(t, url)
		if g.dups.Load() > 0 || len(twice) > 0 {
			t.Errorf("an address went to two MACs: %d duplicate ACKs; in etcd %v", g.dups.Load(), twice)
		}
	})
}

// servedBy records the server identifiers of the ACKs g receives, and
// returns a function listing them.
func servedBy(g *loadgen) func() []string {
	var mu sync.Mutex
	seen := map[string]bool{}
	g.onAck = func(server net.IP) {
		mu.Lock()
		seen[server.String()] = true
		mu.Unlock()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for s := range seen {
			out = append(out, s)
		}
		return out
	}
}

// BenchmarkDHCPEtcdVsBolt: DORA/s of ingot with every ACK committed, on
// bbolt (its lease log, one fdatasync a round) and on a 3-member etcd
// cluster on this machine (a raft commit on 2 of 3 members, up to 60
// leases a transaction), with the same load generator in one run: the
// cost of consensus as a ratio (goal: etcd at least 0.5x bbolt). Each
// server is killed with SIGKILL after its run and every ACKed lease is
// looked for in its store.
//
//	go test -tags integration -run '^$' -bench DHCPEtcdVsBolt -benchtime 1x ./pkg/boot/dhcp/
//
// INGOT_BENCH_STEADY_CLIENTS (default 5000) and INGOT_BENCH_WINDOW (64)
// set the load.
func BenchmarkDHCPEtcdVsBolt(b *testing.B) {
	netnstest.Need(b)
	clients, window := envInt("INGOT_BENCH_STEADY_CLIENTS", 5000), envInt("INGOT_BENCH_WINDOW", benchWindow)
	c := etcdtest.Three(b)
	rate := map[string]float64{}
	for i, name := range []string{"bolt", "etcd"} {
		srv, lg := benchPair(b)
		var p peer
		url := c.URL(fmt.Sprintf("dhcp-bench-%d", i))
		if name == "bolt" {
			p = startPeer(b, "ingot", srv)
		} else {
			cmd := startEtcdServer(b, srv, url, "ingot-a", false)
			p = peer{pid: cmd.Process.Pid}
		}
		g := newLoadgen(b, lg)
		g.ready(b, name)
		before, members0 := takeCPU(p.pid), membersCPU(c)
		acks, secs := g.run(byte(10+i), clients, window)
		cpu := takeCPU(p.pid).since(before, max(acks, 1))
		if name == "etcd" {
			per := (membersCPU(c) - members0) / float64(max(acks, 1)) * 1e6
			b.Logf("etcd: the 3 members used %.0fus of CPU a DORA; the machine %.0fus (%.2f of %d cores busy)",
				per, cpu.machine, cpu.machine*float64(acks)/secs/1e6, runtime.NumCPU())
			b.ReportMetric(per, "etcd-members-cpu-us/DORA")
		}
		if name == "bolt" {
			p.check(acks + 1)
		} else {
			sig := syscall.SIGKILL
			if os.Getenv("INGOT_BENCH_ETCD_CPUPROFILE") != "" {
				sig = syscall.SIGTERM // the profile is written on the way out
			}
			syscall.Kill(p.pid, sig)
			time.Sleep(time.Second)
			bound, twice := boundLeases(b, url)
			if lost := lostACKs(g, bound); len(lost) > 0 || len(twice) > 0 {
				b.Errorf("etcd: %d ACKed leases lost, %d addresses bound twice", len(lost), len(twice))
			}
		}
		rate[name] = float64(acks) / secs
		b.Logf("%s: %d/%d DORA in %.2fs = %.0f/s, %d in flight (%d retransmissions; mean wait for offer %v, ack %v; server CPU %.0fus a DORA)",
			name, acks, clients, secs, rate[name], window, g.retries.Load(),
			time.Duration(g.offerNS.Load()/int64(max(acks, 1))), time.Duration(g.ackNS.Load()/int64(max(acks, 1))), cpu.server)
		b.ReportMetric(rate[name], name+"-DORA/s")
		b.ReportMetric(cpu.server, name+"-cpu-us/DORA")
		if acks != clients {
			b.Errorf("%s: %d of %d exchanges failed", name, clients-acks, clients)
		}
	}
	b.ReportMetric(rate["etcd"]/rate["bolt"], "etcd/bolt")
}

// membersCPU is the CPU seconds the cluster's members used so far.
func membersCPU(c *etcdtest.Cluster) float64 {
	var sum float64
	for _, m := range c.Members {
		if pid := m.Pid(); pid != 0 {
			sum += procCPU(strconv.Itoa(pid))
		}
	}
	return sum
}
