//go:build integration

package dhcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"golang.org/x/sys/unix"

	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Benchmark layout: server namespace eth0 10.77.0.1/16, load namespace eth0
// 10.77.0.2/16, a veth between. Pools: 10.77.1.0 - 10.77.250.255.
const (
	benchClients       = 2000  // distinct MACs, one DORA each, all at once (storm)
	benchSteadyClients = 20000 // distinct MACs at benchWindow in flight: ~2 s, past warm-up
	benchWindow        = 64    // exchanges in flight (steady)
)

// benchStoreOptions: the defaults, as `ingot serve` opens the store (leases
// go through its lease log, one fdatasync per round of concurrent ACKs).
var benchStoreOptions = store.Options{Timeout: time.Second}

func benchPair(b testing.TB) (srv, load *netns.NS) {
	b.Helper()
	srv = netnstest.New(b, "ingot-bench-s")
	load = netnstest.New(b, "ingot-bench-l")
	if err := netns.Veth(context.Background(), srv, "eth0", "10.77.0.1/16", load, "eth0", "10.77.0.2/16"); err != nil {
		b.Fatal(err)
	}
	return srv, load
}

// peer is a started server: its process (for its CPU time) and what to
// check after the load (for ingot: every ACK committed).
type peer struct {
	pid   int
	check func(acks int)
}

// startPeer starts the named server in srv.
func startPeer(b testing.TB, name string, srv *netns.NS) peer {
	b.Helper()
	dir := b.TempDir()
	switch name {
	case "ingot":
		// A process of its own, as Kea and dnsmasq are: this test binary
		// re-executed inside the namespace (see TestMain).
		db := filepath.Join(dir, "ingot.db")
		cmd := srv.Command(context.Background(), os.Args[0])
		cmd.Env = append(os.Environ(), "INGOT_DHCP_BENCH_SERVER="+db)
		cmd.Stderr = os.Stderr
		if err := srv.Start(cmd); err != nil {
			b.Fatal(err)
		}
		return peer{cmd.Process.Pid, func(acks int) {
			// SIGKILL, not a graceful stop: what the ACKs promised must be
			// durable without the lease log being applied at shutdown.
			// (SIGTERM when profiling, so the profile is written.)
			if os.Getenv("INGOT_BENCH_CPUPROFILE") != "" {
				cmd.Process.Signal(syscall.SIGTERM)
			} else {
				cmd.Process.Kill()
			}
			cmd.Wait()
			st, err := bolt.Open(db, benchStoreOptions)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ls, err := st.ListLeases(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			bound := 0
			for _, l := range ls {
				if l.State == dhcp.StateBound {
					bound++
				}
			}
			if bound != acks {
				b.Errorf("ingot ACKed %d leases but the store holds %d bound leases after SIGKILL", acks, bound)
			}
		}}
	case "kea", "kea-mt":
		// kea-mt: Kea's multi-threading (off by default in Debian 12's
		// Kea 2.2) with a thread per core; not in the default peers.
		mt := `"multi-threading": {"enable-multi-threading": false},`
		if name == "kea-mt" {
			mt = fmt.Sprintf(`"multi-threading": {"enable-multi-threading": true, "thread-pool-size": %d, "packet-queue-size": 256},`, runtime.NumCPU())
		}
		conf := filepath.Join(dir, "kea.json")
		body := fmt.Sprintf(`{"Dhcp4": {`+mt+`
  "interfaces-config": {"interfaces": ["eth0"], "dhcp-socket-type": "raw"},
  "lease-database": {"type": "memfile", "persist": true, "name": %q, "lfc-interval": 0},
  "valid-lifetime": 3600,
  "subnet4": [{"id": 1, "subnet": "10.77.0.0/16", "pools": [{"pool": "10.77.1.0 - 10.77.250.255"}],
    "option-data": [{"name": "routers", "data": "10.77.0.1"}]}],
  "loggers": [{"name": "kea-dhcp4", "output_options": [{"output": %q}], "severity": "WARN"}]
}}`, filepath.Join(dir, "leases4.csv"), filepath.Join(dir, "kea.log"))
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := srv.Command(context.Background(), "kea-dhcp4", "-c", conf)
		cmd.Env = append(os.Environ(), "KEA_PIDFILE_DIR="+dir, "KEA_LOCKFILE_DIR="+dir)
		if err := srv.Start(cmd); err != nil {
			b.Fatal(err)
		}
		return peer{cmd.Process.Pid, func(int) {}}
	case "null":
		// The floor: a Go responder that answers from a template without
		// deciding or storing anything (see nullServer).
		cmd := srv.Command(context.Background(), os.Args[0])
		cmd.Env = append(os.Environ(), "INGOT_DHCP_BENCH_NULL=1")
		cmd.Stderr = os.Stderr
		if err := srv.Start(cmd); err != nil {
			b.Fatal(err)
		}
		return peer{cmd.Process.Pid, func(int) {}}
	case "dnsmasq":
		cmd := srv.Command(context.Background(), "dnsmasq", "--no-daemon", "--port=0", "--conf-file=/dev/null",
			"--user=root", "--dhcp-range=10.77.1.0,10.77.250.255,255.255.0.0,1h", "--interface=eth0",
			"--bind-interfaces", "--no-ping", "--dhcp-lease-max=100000", "--dhcp-authoritative",
			"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"))
		if err := srv.Start(cmd); err != nil {
			b.Fatal(err)
		}
		return peer{cmd.Process.Pid, func(int) {}}
	}
	b.Fatalf("unknown peer %s (want ingot, kea, kea-mt, dnsmasq or null)", name)
	return peer{}
}

// TestMain runs the benchmark's ingot server when re-executed with
// INGOT_DHCP_BENCH_SERVER=DBPATH (inside the server namespace).
func TestMain(m *testing.M) {
	if os.Getenv("INGOT_DHCP_BENCH_NULL") != "" {
		if err := nullServer(); err != nil {
			fmt.Fprintln(os.Stderr, "null server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if raw := os.Getenv("INGOT_DHCP_ETCD_SERVER"); raw != "" {
		if err := runEtcdServer(raw); err != nil {
			fmt.Fprintln(os.Stderr, "etcd DHCP server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if db := os.Getenv("INGOT_DHCP_BENCH_SERVER"); db != "" {
		if err := benchServer(db); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func benchServer(db string) error {
	debug.SetGCPercent(400)                                  // as `ingot serve` runs (cmd/ingot/serve.go)
	if pf := os.Getenv("INGOT_BENCH_CPUPROFILE"); pf != "" { // the server's CPU profile
		f, err := os.Create(pf)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	st, err := bolt.Open(db, benchStoreOptions)
	if err != nil {
		return err
	}
	defer st.Close()
	pool, err := dhcp.ParsePool("10.77.0.0/16,10.77.1.0-10.77.250.255,router=10.77.0.1")
	if err != nil {
		return err
	}
	s, err := dhcp.NewServer(dhcp.Config{Interface: "eth0", Mode: dhcp.ModeFull, Pools: []dhcp.Pool{pool},
		LeaseTime: time.Hour, Store: st, Unknown: dhcp.UnknownIgnore})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return s.Serve(ctx)
}

// loadgen runs DORA exchanges from one UDP socket on port 68, broadcast
// with the broadcast flag set; replies are matched by xid.
type loadgen struct {
	conn *net.UDPConn
	mu   sync.Mutex
	wait map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4
	xid  atomic.Uint32
	// retries counts retransmissions (a reply lost or later than 1 s).
	retries atomic.Int64
	naks    atomic.Int64 // NAKs received
	nakWhy  []string     // the first NAKs' messages (option 56), under mu
	// acked is the MAC each address was ACKed to; dups counts ACKs of
	// an address already ACKed to another MAC.
	acked   sync.Map
	dups    atomic.Int64
	offerNS atomic.Int64
	ackNS   atomic.Int64
	// tries is how often a message is sent before giving up (default 4,
	// a second apart); onAck, if set, gets each ACK's server identifier.
	tries int
	onAck func(server net.IP)
}

func newLoadgen(b testing.TB, load *netns.NS) *loadgen {
	b.Helper()
	g := &loadgen{wait: map[dhcpv4.TransactionID]chan *dhcpv4.DHCPv4{}}
	if err := load.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr == nil {
					serr = unix.BindToDevice(int(fd), "eth0")
				}
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
				}
			})
			if err != nil {
				return err
			}
			return serr
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:68")
		if err != nil {
			return err
		}
		g.conn = pc.(*net.UDPConn)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.conn.Close() })
	go g.read()
	return g
}

func (g *loadgen) read() {
	buf := make([]byte, 1500)
	for {
		n, _, err := g.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		m, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || m.OpCode != dhcpv4.OpcodeBootReply {
			continue
		}
		g.mu.Lock()
		ch := g.wait[m.TransactionID]
		g.mu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default:
			}
		}
	}
}

var bcast67 = &net.UDPAddr{IP: net.IPv4bcast, Port: 67}

// dora runs one exchange for mac; false if it did not end in an ACK.
func (g *loadgen) dora(mac net.HardwareAddr) bool {
	var xid dhcpv4.TransactionID
	binary.BigEndian.PutUint32(xid[:], g.xid.Add(1))
	ch := make(chan *dhcpv4.DHCPv4, 8)
	g.mu.Lock()
	g.wait[xid] = ch
	g.mu.Unlock()
	defer func() { g.mu.Lock(); delete(g.wait, xid); g.mu.Unlock() }()
	send := func(m *dhcpv4.DHCPv4, want dhcpv4.MessageType) *dhcpv4.DHCPv4 {
		for try := 0; try < max(g.tries, 4); try++ {
			if try > 0 {
				g.retries.Add(1)
			}
			if _, err := g.conn.WriteToUDP(m.ToBytes(), bcast67); err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			timeout := time.After(time.Second)
			for {
				select {
				case r := <-ch:
					if !bytes.Equal(r.ClientHWAddr, mac) {
						continue // another client's reply that reused our xid
					}
					if r.MessageType() == want {
						return r
					}
					if r.MessageType() == dhcpv4.MessageTypeNak {
						if g.naks.Add(1) <= 10 {
							g.mu.Lock()
							g.nakWhy = append(g.nakWhy, mac.String()+": "+r.Message())
							g.mu.Unlock()
						}
						return nil
					}
					continue
				case <-timeout:
				}
				break
			}
		}
		return nil
	}
	disc, _ := dhcpv4.NewDiscovery(mac, dhcpv4.WithTransactionID(xid), dhcpv4.WithBroadcast(true))
	t0 := time.Now()
	offer := send(disc, dhcpv4.MessageTypeOffer)
	if offer == nil {
		return false
	}
	t1 := time.Now()
	req, _ := dhcpv4.NewRequestFromOffer(offer, dhcpv4.WithTransactionID(xid), dhcpv4.WithBroadcast(true))
	ack := send(req, dhcpv4.MessageTypeAck)
	g.offerNS.Add(int64(t1.Sub(t0)))
	g.ackNS.Add(int64(time.Since(t1)))
	if ack == nil {
		return false
	}
	if g.onAck != nil {
		g.onAck(ack.ServerIdentifier())
	}
	ip, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if prev, dup := g.acked.LoadOrStore(ip, mac.String()); dup && prev != mac.String() {
		g.dups.Add(1)
	}
	return true
}

// run makes n exchanges with window in flight; returns ACKs and seconds.
func (g *loadgen) run(base byte, n, window int) (acks int, secs float64) {
	var ok atomic.Int64
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range window {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if g.dora(net.HardwareAddr{0x02, base, 0, byte(i >> 16), byte(i >> 8), byte(i)}) {
					ok.Add(1)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return int(ok.Load()), time.Since(start).Seconds()
}

// ready waits until the server completes one exchange.
func (g *loadgen) ready(b testing.TB, name string) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if g.dora(net.HardwareAddr{0x02, 0xff, 0xff, 0, 0, 1}) {
			return
		}
	}
	b.Fatalf("%s never completed an exchange", name)
}

// BenchmarkDHCPDORA: DORA/s with distinct MACs and broadcast replies, ingot
// vs Kea (memfile) vs dnsmasq, each in a fresh namespace pair, plus "null",
// a Go responder that decides and stores nothing (the floor of this load
// generator and these sockets). Two loads: steady (20000 clients, 64
// exchanges in flight) and storm (2000 clients at once, as when a rack
// powers on). ingot commits every lease before its ACK (fdatasync of the
// lease log) and is killed with SIGKILL afterwards to check it; Kea's
// memfile and dnsmasq's lease file are written without fsync. Each peer's
// CPU time per exchange is reported beside its rate: the load generator
// shares the machine's cores with the server.
//
//	go test -tags integration -run '^$' -bench DORA -benchtime 1x ./pkg/boot/dhcp/
//
// Knobs: INGOT_BENCH_PEERS (comma-separated from ingot, kea, dnsmasq, null and
// kea-mt: Kea with its multi-threading on), INGOT_BENCH_STEADY_CLIENTS,
// INGOT_BENCH_WINDOW, INGOT_BENCH_CLIENTS (storm), INGOT_BENCH_CPUPROFILE
// (the ingot server's CPU profile).
func BenchmarkDHCPDORA(b *testing.B) {
	netnstest.Need(b, "kea-dhcp4", "dnsmasq")
	storm := envInt("INGOT_BENCH_CLIENTS", benchClients)
	for _, load := range []struct {
		name            string
		clients, window int
	}{
		{"steady", envInt("INGOT_BENCH_STEADY_CLIENTS", benchSteadyClients), envInt("INGOT_BENCH_WINDOW", benchWindow)},
		{"storm", storm, storm},
	} {
		clients := load.clients
		b.Run(load.name, func(b *testing.B) {
			rate := map[string]float64{}
			for i, name := range peers("ingot,kea,dnsmasq,null") {
				clients := clients
				if name == "dnsmasq" && load.name == "steady" {
					// dnsmasq searches its leases linearly: at 20000 clients
					// it spends 7.5 ms of CPU per exchange and the run takes
					// minutes, so it gets the storm's client count.
					clients = min(clients, storm)
				}
				srv, lg := benchPair(b)
				p := startPeer(b, name, srv)
				g := newLoadgen(b, lg)
				g.ready(b, name)
				before := takeCPU(p.pid)
				acks, secs := g.run(byte(i), clients, load.window)
				cpu := takeCPU(p.pid).since(before, max(acks, 1))
				p.check(acks + 1) // + the readiness probe
				rate[name] = float64(acks) / secs
				b.Logf("%s, %d in flight: %d/%d DORA in %.2fs = %.0f/s (%d retransmissions; mean wait for offer %v, ack %v; "+
					"CPU per DORA: server %.0fus, load generator %.0fus, whole machine %.0fus, %.2f of %d cores busy)",
					name, load.window, acks, clients, secs, rate[name], g.retries.Load(),
					time.Duration(g.offerNS.Load()/int64(max(acks, 1))), time.Duration(g.ackNS.Load()/int64(max(acks, 1))),
					cpu.server, cpu.load, cpu.machine, cpu.machine*rate[name]/1e6, runtime.NumCPU())
				b.ReportMetric(cpu.server, name+"-cpu-us/DORA")
				b.ReportMetric(rate[name], name+"-DORA/s")
				b.ReportMetric(float64(clients-acks), name+"-failed")
				if name == "ingot" && acks != clients {
					b.Errorf("ingot: %d of %d exchanges failed", clients-acks, clients)
				}
			}
			if rate["kea"] > 0 {
				b.ReportMetric(rate["ingot"]/rate["kea"], "ingot/kea")
			}
			if rate["dnsmasq"] > 0 {
				b.ReportMetric(rate["ingot"]/rate["dnsmasq"], "ingot/dnsmasq")
			}
		})
	}
}

var perfRate = regexp.MustCompile(`Rate: ([0-9.]+) 4-way exchanges/second`)
var perfDrops = regexp.MustCompile(`drops: (\d+)`)

// BenchmarkDHCPPerfdhcp: Kea's perfdhcp (posing as a relay from 10.77.0.2)
// against ingot and Kea at the same offered rate.
func BenchmarkDHCPPerfdhcp(b *testing.B) {
	netnstest.Need(b, "kea-dhcp4", "perfdhcp")
	offered := envInt("INGOT_PERFDHCP_RATE", 2000)
	rate := map[string]float64{}
	for _, name := range peers("ingot,kea") {
		srv, load := benchPair(b)
		startPeer(b, name, srv)
		newLoadgen(b, load).ready(b, name)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := load.Run(ctx, "perfdhcp", "-4", "-r", strconv.Itoa(offered), "-R", "20000", "-p", "10",
			"-l", "10.77.0.2", "10.77.0.1")
		cancel()
		// perfdhcp exits 3 when packets were dropped; the report is still valid.
		m := perfRate.FindSubmatch(out)
		if m == nil {
			b.Fatalf("perfdhcp against %s: %v\n%s", name, err, out)
		}
		rate[name], _ = strconv.ParseFloat(string(m[1]), 64)
		drops := 0
		for _, d := range perfDrops.FindAllSubmatch(out, -1) {
			n, _ := strconv.Atoi(string(d[1]))
			drops += n
		}
		b.Logf("perfdhcp -r %d against %s: %.0f DORA/s, %d drops", offered, name, rate[name], drops)
		if d := os.Getenv("INGOT_BENCH_OUT"); d != "" { // keep perfdhcp's full report
			os.WriteFile(filepath.Join(d, "perfdhcp-"+name+".txt"), out, 0o644)
		}
		b.ReportMetric(rate[name], name+"-DORA/s")
		b.ReportMetric(float64(drops), name+"-drops")
	}
	b.ReportMetric(rate["ingot"]/rate["kea"], "ingot/kea")
}

// peers is INGOT_BENCH_PEERS (comma-separated) or def.
func peers(def string) []string {
	if v := os.Getenv("INGOT_BENCH_PEERS"); v != "" {
		def = v
	}
	return strings.Split(def, ",")
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

// cpuTimes are CPU seconds so far: of the server process, of this process
// (the load generator) and of the whole machine (busy, all cores).
type cpuTimes struct{ server, load, machine float64 }

func takeCPU(serverPid int) cpuTimes {
	return cpuTimes{procCPU(strconv.Itoa(serverPid)), procCPU("self"), machineCPU()}
}

// since returns the CPU microseconds per exchange spent since t0.
func (t cpuTimes) since(t0 cpuTimes, exchanges int) cpuTimes {
	per := func(a, b float64) float64 { return (a - b) / float64(exchanges) * 1e6 }
	return cpuTimes{per(t.server, t0.server), per(t.load, t0.load), per(t.machine, t0.machine)}
}

// procCPU is utime+stime of /proc/PID/stat in seconds (0 if unreadable).
func procCPU(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:])) // f[0] is the state, field 3
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64) // utime, field 14
	s, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return (u + s) / 100                  // USER_HZ
}

// machineCPU is the busy time of all CPUs (everything but idle and iowait)
// from /proc/stat, in seconds.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	busy := 0.0
	for i, v := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / 100
}

// nullServer answers DISCOVER with OFFER and REQUEST with ACK from two
// prepared replies, patching only xid, chaddr and yiaddr: no decision, no
// store, one goroutine. It is the floor any Go server on a UDP socket pays
// on this machine, measured with the same load generator.
func nullServer() error {
	c, err := server4.NewIPv4UDPConn("eth0", &net.UDPAddr{Port: 67})
	if err != nil {
		return err
	}
	if rc, err := c.SyscallConn(); err == nil { // the buffer ingot's server has
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) })
	}
	tmpl := func(t dhcpv4.MessageType) []byte {
		m, _ := dhcpv4.New(dhcpv4.WithMessageType(t), dhcpv4.WithServerIP(net.IPv4(10, 77, 0, 1)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))),
			dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(time.Hour)),
			dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(16, 32))),
			dhcpv4.WithOption(dhcpv4.OptRouter(net.IPv4(10, 77, 0, 1))))
		m.OpCode = dhcpv4.OpcodeBootReply
		m.Flags = 0x8000
		return m.ToBytes()
	}
	offer, ack := tmpl(dhcpv4.MessageTypeOffer), tmpl(dhcpv4.MessageTypeAck)
	to := netip.MustParseAddrPort("255.255.255.255:68")
	buf := make([]byte, 1500)
	var n uint32
	for {
		k, _, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		var reply []byte
		for o := 240; o+2 < k && buf[o] != 255; o += 2 + int(buf[o+1]) {
			if buf[o] != 53 {
				continue
			}
			switch dhcpv4.MessageType(buf[o+2]) {
			case dhcpv4.MessageTypeDiscover:
				reply = offer
				n++
			case dhcpv4.MessageTypeRequest:
				reply = ack
			}
			break
		}
		if reply == nil {
			continue
		}
		copy(reply[4:8], buf[4:8])     // xid
		copy(reply[28:44], buf[28:44]) // chaddr
		binary.BigEndian.PutUint32(reply[16:20], 10<<24|77<<16|1<<8+n%60000)
		c.WriteToUDPAddrPort(reply, to)
	}
}
