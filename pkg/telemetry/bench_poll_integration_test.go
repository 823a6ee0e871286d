//go:build integration

package telemetry_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// BenchmarkPoll500 polls 500 virtual BMCs at the default interval (60 s),
// with the default poller settings (32 polls at once, 30 s a poll), first
// with ingot's poller (one shared session per BMC from a bmc.Pool, the
// readings path probed once) and then with a poller that logs in on every
// poll (bmc.Dial, Readings, Close), as naive scripts do. The BMCs run in a
// separate `ingot vbmc` process (its CPU is not counted), each answering
// every request after 0.7 s and refusing with 503 a third request in
// flight; its debug log is counted for those refusals.
//
// Each poller is measured over one interval (60 s) once it is in steady
// state: ingot's once every BMC was polled (probed) once; the peer, whose
// every poll is the same work, once its 32 slots were filled twice over.
// CPU is this process's (getrusage) over the window; the share of one core
// is CPU a poll times 500 polls a minute, which for the peer is more than
// it reaches: at 0.7 s a request its poll takes about 7 s, so 32 at once
// cannot poll 500 BMCs a minute (polls/s says how far it gets). RSS is the
// process's peak (VmHWM) after ingot's phase. The /metrics scrape of the
// 500 nodes (svc.Collector through promhttp, the poller running) is timed
// five times; the slowest counts (the median is reported too). Between
// the two, bmc.Pool.Close logs the 500 sessions out; the peer starts once
// the BMCs have answered every logout (Close stops waiting earlier), so
// that no logout is counted as the peer's. It takes about 4.5 minutes.
//
//	make build && INGOT_BIN=$PWD/bin/ingot go test -tags integration -run '^$' -bench 'Poll500$' -benchtime 1x -v ./pkg/telemetry/
func BenchmarkPoll500(b *testing.B) {
	const (
		n        = 500
		interval = time.Minute
		perBMC   = 2
		latency  = 700 * time.Millisecond
		mockup   = "dmtf-public-rackmount1"
	)
	bin := ingotBin(b)
	for range b.N {
		v := startVBMC(b, bin, mockup, n, latency, perBMC)
		ms := make([]machine.Machine, n)
		for i := range ms {
			ms[i] = machine.Machine{ID: fmt.Sprintf("m-%010x", i), Name: fmt.Sprintf("gpu-%03d", i), Rack: fmt.Sprintf("r%02d", i/40),
				State: machine.StateReady, BMC: machine.BMC{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", v.base+i)}}
		}
		cfg := func(m *machine.Machine) bmc.Config {
			return bmc.Config{Endpoint: m.BMC.Endpoint, Username: vbmcUser, Password: vbmcPassword, MaxInFlight: perBMC}
		}

		pool := bmc.NewPool(nil)
		ingot := runPoller(b, "ingot (shared session)", ms, interval, true, 0, func(ctx context.Context, m *machine.Machine, st *pollStats) telemetry.Sample {
			c, err := pool.Get(ctx, cfg(m))
			if err != nil {
				return st.failed(err)
			}
			r, err := c.Readings(ctx)
			st.sent(int64(r.Requests), c.Stats().MaxInFlight)
			if err != nil {
				return st.failed(err)
			}
			return telemetry.SampleOf(r)
		})
		ingot.rssMiB, ingot.heapMiB = procMiB("VmHWM"), heapMiB()
		ingotBusy := v.count(b, "outcome=busy")
		start := time.Now()
		closeErr := pool.Close()
		poolClose := time.Since(start)
		loggedOut := v.await(b, "method=DELETE", n, time.Minute) // Close stops waiting before all logouts are answered
		poolLogout := time.Since(start)
		closeBusy := v.count(b, "outcome=busy") - ingotBusy

		peer := runPoller(b, "login every poll", ms, interval, false, 64, func(ctx context.Context, m *machine.Machine, st *pollStats) telemetry.Sample {
			c, err := bmc.Dial(ctx, cfg(m))
			if err != nil {
				return st.failed(err)
			}
			r, err := c.Readings(ctx)
			c.Close()
			s := c.Stats() // login, readings (probe included: a new client knows no path) and logout
			st.sent(s.Requests, s.MaxInFlight)
			if err != nil {
				return st.failed(err)
			}
			return telemetry.SampleOf(r)
		})
		peerBusy := v.count(b, "outcome=busy") - ingotBusy - closeBusy
		busyLines := v.lines(b, "outcome=busy", 3)
		enforced := v.checkLimit(b, perBMC)

		b.ReportMetric(ingot.coreShare60*100, "ingot-%core-at-60s")
		b.ReportMetric(peer.coreShare60*100, "peer-%core-at-60s-if-it-kept-up")
		b.ReportMetric(peer.cpuPerPoll/ingot.cpuPerPoll, "peer/ingot-cpu-per-poll")
		b.ReportMetric(ingot.cpuPerPoll*1000, "ingot-cpu-ms/poll")
		b.ReportMetric(peer.cpuPerPoll*1000, "peer-cpu-ms/poll")
		b.ReportMetric(ingot.pollsPerSec, "ingot-polls/s")
		b.ReportMetric(peer.pollsPerSec, "peer-polls/s")
		b.ReportMetric(ingot.requestsPerPoll, "ingot-requests/poll")
		b.ReportMetric(peer.requestsPerPoll, "peer-requests/poll")
		b.ReportMetric(float64(ingot.errors), "ingot-failed-polls")
		b.ReportMetric(float64(ingotBusy), "ingot-503s-beyond-2-in-flight")
		b.ReportMetric(float64(peerBusy), "peer-503s-beyond-2-in-flight")
		b.ReportMetric(float64(ingot.maxInFlight), "ingot-max-in-flight-per-BMC")
		b.ReportMetric(ingot.rssMiB, "ingot-rss-peak-MiB")
		b.ReportMetric(ingot.scrapeMs, "metrics-scrape-ms-500-nodes-slowest")
		b.ReportMetric(ingot.scrapeMedianMs, "metrics-scrape-ms-500-nodes-median")
		b.ReportMetric(poolClose.Seconds(), "pool-close-s")
		b.ReportMetric(poolLogout.Seconds(), "pool-logouts-done-s")
		b.Logf("vbmc: %d BMCs (%s), %s a request, --max-in-flight %d enforced: %v", n, mockup, latency, perBMC, enforced)
		for _, r := range []pollResult{ingot, peer} {
			b.Logf("%s: %d polls in %s (%.2f/s, %.2f/s needed), %.2f ms CPU a poll, %.2f%% of a core measured, %.2f%% at 500 polls a minute; "+
				"%.1f requests a poll, at most %d in flight at one BMC, %d failed polls; first round %s; stop %s; heap %.0f MiB",
				r.name, r.polls, r.window.Round(time.Millisecond), r.pollsPerSec, float64(n)/interval.Seconds(), r.cpuPerPoll*1000,
				r.coreShare*100, r.coreShare60*100, r.requestsPerPoll, r.maxInFlight, r.errors, r.warmup.Round(time.Second),
				r.stop.Round(time.Millisecond), r.heapMiB)
			for _, e := range r.errSamples {
				b.Logf("  %s: a failed poll: %s", r.name, e)
			}
		}
		b.Logf("RSS peak after ingot's phase %.0f MiB; /metrics of %d nodes: %d bytes, 5 scrapes: median %.1f ms, slowest %.1f ms",
			ingot.rssMiB, n, ingot.scrapeBytes, ingot.scrapeMedianMs, ingot.scrapeMs)
		b.Logf("503s (more than %d in flight at a BMC): ingot %d, its pool's logouts %d, login every poll %d %q",
			perBMC, ingotBusy, closeBusy, peerBusy, busyLines)
		b.Logf("bmc.Pool.Close of %d sessions returned after %s (err %v); %d logouts answered after %s",
			n, poolClose.Round(time.Millisecond), closeErr, loggedOut, poolLogout.Round(time.Millisecond))
		if !enforced {
			b.Errorf("the vbmc answered %d requests at once at one BMC: --max-in-flight %d is not enforced, the 503 count proves nothing", perBMC+1, perBMC)
		}
		if ingot.errors > 0 || ingotBusy > 0 || ingot.maxInFlight > perBMC {
			b.Errorf("ingot: %d failed polls, %d 503s, %d in flight at one BMC; goal: none, none, at most %d", ingot.errors, ingotBusy, ingot.maxInFlight, perBMC)
		}
		if ingot.coreShare60 > 0.10 {
			b.Errorf("ingot uses %.1f%% of a core at 60 s; goal < 10%%", ingot.coreShare60*100)
		}
		if ingot.rssMiB > 256 {
			b.Errorf("RSS %.0f MiB; goal < 256 MiB", ingot.rssMiB)
		}
		if ingot.scrapeMs > 200 {
			b.Errorf("/metrics of %d nodes took %.0f ms (slowest of 5); goal < 200 ms", n, ingot.scrapeMs)
		}
	}
}

// pollStats counts one poller's polls while counting is on, and keeps the
// first errors until it is stopping (then polls fail for being canceled).
type pollStats struct {
	counting         atomic.Bool
	stopping         atomic.Bool
	polls, errs      atomic.Int64
	requests         atomic.Int64
	maxInFlight      atomic.Int64
	mu               sync.Mutex
	errSamples       []string
	polled           sync.Map // machine ID -> true: polled once (counted or not)
	firstRound, done atomic.Int64
}

func (st *pollStats) sent(requests, inFlight int64) {
	for {
		m := st.maxInFlight.Load()
		if inFlight <= m || st.maxInFlight.CompareAndSwap(m, inFlight) {
			break
		}
	}
	if st.counting.Load() {
		st.requests.Add(requests)
	}
}

func (st *pollStats) failed(err error) telemetry.Sample {
	if st.counting.Load() {
		st.errs.Add(1)
	}
	if !st.stopping.Load() {
		st.mu.Lock()
		if len(st.errSamples) < 5 {
			st.errSamples = append(st.errSamples, err.Error())
		}
		st.mu.Unlock()
	}
	return telemetry.Sample{Err: err.Error(), MemCorrectable: -1, MemUncorrectable: -1}
}

func (st *pollStats) samples() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.errSamples)
}

type pollResult struct {
	name                         string
	polls, errors, maxInFlight   int64
	errSamples                   []string
	window, warmup, stop         time.Duration
	cpuPerPoll                   float64 // seconds
	coreShare, coreShare60       float64
	pollsPerSec, requestsPerPoll float64
	rssMiB, heapMiB              float64
	scrapeMs, scrapeMedianMs     float64
	scrapeBytes                  int
}

// runPoller runs a telemetry Service over ms with read until it is in
// steady state (every machine polled once where everyOnce, and at least
// warm polls done), measures it over one interval, times /metrics and
// stops it.
func runPoller(b *testing.B, name string, ms []machine.Machine, interval time.Duration, everyOnce bool, warm int64,
	read func(context.Context, *machine.Machine, *pollStats) telemetry.Sample) pollResult {
	st := &pollStats{}
	svc, err := telemetry.New(telemetry.Config{
		Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
		Read: func(ctx context.Context, m *machine.Machine) telemetry.Sample {
			s := read(ctx, m, st)
			if _, seen := st.polled.LoadOrStore(m.ID, true); !seen {
				st.firstRound.Add(1)
			}
			st.done.Add(1)
			if st.counting.Load() {
				st.polls.Add(1)
			}
			return s
		},
		Interval: interval,
	})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Run(ctx) }()
	r := pollResult{name: name}
	start := time.Now()
	for last := start; everyOnce && st.firstRound.Load() < int64(len(ms)) || st.done.Load() < warm; time.Sleep(100 * time.Millisecond) {
		if time.Since(last) >= 15*time.Second {
			last = time.Now()
			progress("%s: warming up: %d of %d BMCs polled once, %d polls", name, st.firstRound.Load(), len(ms), st.done.Load())
		}
		if time.Since(start) > 4*interval {
			b.Fatalf("%s: after %s only %d of %d BMCs were polled once (errors: %q)", name, time.Since(start), st.firstRound.Load(), len(ms), st.samples())
		}
	}
	r.warmup = time.Since(start)
	progress("%s: steady after %s; measuring %s", name, r.warmup.Round(time.Second), interval)
	st.counting.Store(true)
	cpu0, t0 := cpuSeconds(), time.Now()
	time.Sleep(interval)
	cpu, el := cpuSeconds()-cpu0, time.Since(t0)
	st.counting.Store(false)
	r.scrapeMedianMs, r.scrapeMs, r.scrapeBytes = scrape(b, svc)
	start = time.Now()
	st.stopping.Store(true)
	cancel()
	if err := <-stopped; err != nil {
		b.Errorf("%s: Run: %v", name, err)
	}
	r.stop = time.Since(start)
	progress("%s: stopped in %s", name, r.stop.Round(time.Millisecond))

	r.polls, r.errors, r.maxInFlight, r.window = st.polls.Load(), st.errs.Load(), st.maxInFlight.Load(), el
	r.errSamples = st.samples()
	r.cpuPerPoll = cpu / float64(max(r.polls, 1))
	r.coreShare = cpu / el.Seconds()
	r.coreShare60 = r.cpuPerPoll * float64(len(ms)) / interval.Seconds()
	r.pollsPerSec = float64(r.polls) / el.Seconds()
	r.requestsPerPoll = float64(st.requests.Load()) / float64(max(r.polls, 1))
	r.heapMiB = heapMiB()
	return r
}

// scrape GETs /metrics of svc's collector five times and returns the
// median and slowest in milliseconds and the body's size.
func scrape(b *testing.B, svc *telemetry.Service) (float64, float64, int) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.Collector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	var took []time.Duration
	size := 0
	for range 5 {
		start := time.Now()
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatalf("GET /metrics: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET /metrics: HTTP %d, %v", resp.StatusCode, err)
		}
		took, size = append(took, time.Since(start)), len(body)
	}
	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(took[len(took)/2]), ms(took[len(took)-1]), size
}

// BenchmarkPoll500Store drives telemetry's persistence (the flush that
// Run makes every 5 minutes, into a real bbolt store) for 500 machines
// over 9 simulated days on an injected clock: every 5 minutes each machine
// gets a sample (PollAll) and the state is flushed (a Run stopped at once,
// which flushes on its way out). Run's loader is kept from reading the
// store back on each of those stops (it would add the stored aggregates
// again); a fresh Service at the end loads it once, as after a restart.
// It reports the file's growth a day in the first week (bbolt grows the
// file in steps of 16 MiB, so the day-to-day sizes are steps), its size
// once retention (7 days) holds it, the bytes written to it a day (wchar:
// each flush rewrites today's and yesterday's record of every machine),
// and the heap the aggregates of 500 machines take at retention. The daily
// summaries the flush also writes (42 bytes a machine and day, kept a
// year) are in the file too. It takes about 5 minutes on 2 cores.
//
//	go test -tags integration -run '^$' -bench 'Poll500Store$' -benchtime 1x -v ./pkg/telemetry/
func BenchmarkPoll500Store(b *testing.B) {
	const (
		n    = 500
		days = 9
		step = telemetry.BucketSize
	)
	for range b.N {
		path := filepath.Join(b.TempDir(), "ingot.db")
		st, err := bolt.Open(path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		clk := &simClock{t: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}
		ms := make([]machine.Machine, n)
		for i := range ms {
			ms[i] = machine.Machine{ID: fmt.Sprintf("m-%010x", i), Name: fmt.Sprintf("gpu-%03d", i), Rack: fmt.Sprintf("r%02d", i/40),
				State: machine.StateReady, BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.0.%d.%d", i/250, i%250+1)}}
		}
		cfg := telemetry.Config{
			Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
			Read:     simRead(clk),
			Interval: time.Hour, // nothing falls due inside Run: PollAll polls
			Now:      clk.Now,
			Store:    noReload{st},
		}
		svc, err := telemetry.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		runtime.GC()
		heap0 := heapMiB()
		size := []float64{fileMiB(b, path)}
		var written []float64 // MiB a day
		var flushes []time.Duration
		for d := range days {
			w0 := ioWritten()
			for range 24 * time.Hour / step {
				clk.add(step)
				if err := svc.PollAll(ctx); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := svc.Run(stopped); err != nil { // flushes on the way out
					b.Fatal(err)
				}
				flushes = append(flushes, time.Since(start))
			}
			written = append(written, float64(ioWritten()-w0)/(1<<20))
			size = append(size, fileMiB(b, path))
			progress("store: day %d: %.1f MiB, %.0f MiB written", d+1, size[d+1], written[d])
		}
		runtime.GC()
		aggMiB, rss, anon, file := heapMiB()-heap0, procMiB("VmRSS"), procMiB("RssAnon"), procMiB("RssFile")
		stored, err := st.PowerDays(ctx, ms[0].ID, "")
		if err != nil {
			b.Fatal(err)
		}

		// A restart: a fresh Service loads what was stored, and is stopped
		// once loaded (Run lists the machines after loading).
		loaded, stop := context.WithCancel(ctx)
		cfg.Store = st
		cfg.Machines = func(context.Context) ([]machine.Machine, error) { stop(); return ms, nil }
		again, err := telemetry.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := again.Run(loaded); err != nil {
			b.Fatal(err)
		}
		load := time.Since(start)
		restored := len(again.Aggregates().Window(ms[0].ID, clk.Now().Add(-telemetry.Retention), clk.Now().Add(time.Second)))
		kept := len(svc.Aggregates().Window(ms[0].ID, clk.Now().Add(-telemetry.Retention), clk.Now().Add(time.Second)))
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}

		week := min(7, days)
		growth := (size[week] - size[0]) / float64(week)
		slices.Sort(flushes)
		b.ReportMetric(growth, "store-growth-MiB/day-first-week")
		b.ReportMetric(size[days]-size[days-1], "store-growth-MiB-last-day")
		b.ReportMetric(size[days], "store-MiB-at-retention")
		b.ReportMetric(written[days-1], "written-MiB/day")
		b.ReportMetric(aggMiB, "aggregates-heap-MiB")
		b.ReportMetric(anon, "rss-anon-MiB-at-retention")
		b.ReportMetric(float64(flushes[len(flushes)/2].Microseconds())/1000, "flush-ms-median")
		b.Logf("store file by day (MiB): %s", fmtList(size))
		b.Logf("written by day (MiB): %s", fmtList(written))
		b.Logf("machine %s keeps %d power days in the store; %d buckets in memory, %d after a restart (loaded in %s)",
			ms[0].ID, len(stored), kept, restored, load.Round(time.Millisecond))
		b.Logf("process RSS now (the store mapped, %d days of aggregates in memory): %.0f MiB, %.0f MiB of it anonymous, %.0f MiB file pages",
			days, rss, anon, file)
		b.Logf("flush of %d machines: median %s, slowest %s; aggregates of %d machines over %d days: %.0f MiB of heap",
			n, flushes[len(flushes)/2].Round(time.Microsecond), flushes[len(flushes)-1].Round(time.Microsecond), n, days, aggMiB)
		if restored < kept {
			b.Errorf("a restart brought back %d of the %d buckets of %s", restored, kept, ms[0].ID)
		}
		if growth > 20 {
			b.Errorf("the store grows %.1f MiB a day; goal < 20 MiB", growth)
		}
		if days > 8 && size[days] > size[8] {
			b.Errorf("the store still grows after retention: %.1f MiB on day 8, %.1f MiB on day %d", size[8], size[days], days)
		}
	}
}

// noReload keeps Run from loading the store (the benchmark stops and
// starts Run every 5 simulated minutes; each load would add the stored
// aggregates to those in memory again).
type noReload struct{ store.TelemetryStore }

func (noReload) ListNodeTelemetry(context.Context) ([]store.NodeTelemetry, error) { return nil, nil }

type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *simClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// simRead answers like a healthy GPU node, its draw varying with the time.
func simRead(clk *simClock) telemetry.Reader {
	return func(_ context.Context, m *machine.Machine) telemetry.Sample {
		t := clk.Now()
		w := 6000 + float64((t.Unix()/300+int64(len(m.ID)))%40)*25
		return telemetry.Sample{Up: true, PowerOn: true, Watts: w, PSUInputWatts: w * 1.05, PSUOutputWatts: w,
			InletC: 24.5, ExhaustC: 41, CPUMaxC: 62, GPUMaxC: 71, MemCorrectable: 3, Path: bmc.PathExpand,
			Took: 1400 * time.Millisecond}
	}
}

func fmtList(xs []float64) string {
	var p []string
	for _, x := range xs {
		p = append(p, strconv.FormatFloat(x, 'f', 1, 64))
	}
	return strings.Join(p, " ")
}

func fileMiB(b *testing.B, path string) float64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return float64(fi.Size()) / (1 << 20)
}

// ioWritten is what this process has written (wchar of /proc/self/io:
// bbolt writes with pwrite, so its page writes all count).
func ioWritten() int64 {
	data, _ := os.ReadFile("/proc/self/io")
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

const (
	vbmcUser     = "bench"
	vbmcPassword = "bench-pass"
)

// vbmcProc is an `ingot vbmc --count N` process.
type vbmcProc struct {
	base int    // port of BMC 0
	log  string // its stderr: one debug line per request
}

func startVBMC(b *testing.B, bin, mockup string, n int, latency time.Duration, perBMC int) *vbmcProc {
	dir := b.TempDir()
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte(vbmcPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	v := &vbmcProc{base: freePortBase(b, n), log: filepath.Join(dir, "vbmc.log")}
	logf, err := os.Create(v.log)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "vbmc", "--mockup", filepath.Join(repoRoot(b), "testdata", "redfish-mockups", mockup),
		"--count", strconv.Itoa(n), "--listen", fmt.Sprintf("127.0.0.1:%d", v.base), "--user", vbmcUser, "--password-file", pw,
		"--latency", latency.String(), "--max-in-flight", strconv.Itoa(perBMC), "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = io.Discard, logf
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s vbmc: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close() }()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", v.base+n-1), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			b.Fatalf("ingot vbmc exited (%v): %s", err, tail(v.log))
		case <-time.After(100 * time.Millisecond):
		}
		if i > 300 {
			b.Fatalf("ingot vbmc did not listen on port %d within 30 s: %s", v.base+n-1, tail(v.log))
		}
	}
	return v
}

// count counts the requests logged so far whose line holds s
// ("outcome=busy": refused for being beyond --max-in-flight).
func (v *vbmcProc) count(b *testing.B, s string) int { return len(v.grep(b, s, -1)) }

// lines returns the first n lines holding s.
func (v *vbmcProc) lines(b *testing.B, s string, n int) []string { return v.grep(b, s, n) }

func (v *vbmcProc) grep(b *testing.B, s string, limit int) []string {
	f, err := os.Open(v.log)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && (limit < 0 || len(out) < limit) {
		if bytes.Contains(sc.Bytes(), []byte(s)) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// await waits up to limit for n requests whose line holds s and returns
// how many there were.
func (v *vbmcProc) await(b *testing.B, s string, n int, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	for {
		got := v.count(b, s)
		if got >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkLimit sends perBMC+1 requests at once to BMC 0 and reports whether
// the BMC refused one with 503.
func (v *vbmcProc) checkLimit(b *testing.B, perBMC int) bool {
	codes := make(chan int, perBMC+1)
	for range perBMC + 1 {
		go func() {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/redfish/v1/", v.base))
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	refused := false
	for range perBMC + 1 {
		refused = refused || <-codes == http.StatusServiceUnavailable
	}
	return refused
}

func tail(path string) string {
	data, _ := os.ReadFile(path)
	return string(data[max(0, len(data)-2000):])
}

func ingotBin(b *testing.B) string {
	bin := os.Getenv("INGOT_BIN")
	if bin == "" {
		netnstest.Missing(b, "INGOT_BIN must name an ingot binary (make build; make bench sets it)")
	}
	return bin
}

func repoRoot(b *testing.B) string {
	dir, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			b.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// freePortBase finds n consecutive free loopback ports.
func freePortBase(b *testing.B, n int) int {
	for base := 21000; base+n < 60000; base += n + 7 {
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	b.Fatal("no free range of loopback ports")
	return 0
}

// cpuSeconds is the user and system CPU this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procMiB reads a field of /proc/self/status (VmHWM, VmRSS) in MiB.
func procMiB(field string) float64 {
	data, _ := os.ReadFile("/proc/self/status")
	for l := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func heapMiB() float64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// progress shows where a long benchmark is (with -v).
func progress(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
}
