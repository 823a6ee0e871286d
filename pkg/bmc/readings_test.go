package bmc_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// telemetryMockup is the synthetic HGX-style tree with a metric report
// (pkg/vbmc/testdata/mockups: no captured mockup has one).
const telemetryMockup = "synthetic-hgx-telemetry"

// readingsMockupDir finds a mockup in testdata/redfish-mockups, or the
// virtual BMC's own test mockups.
func readingsMockupDir(t testing.TB, name string) string {
	t.Helper()
	if name != telemetryMockup {
		return mockupDir(t, name)
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(mockupDir(t, "dmtf-public-tower")))) // the module root
	dir := filepath.Join(root, "pkg", "vbmc", "testdata", "mockups", name)
	if _, err := os.Stat(filepath.Join(dir, "redfish", "v1", "index.json")); err != nil {
		t.Fatalf("mockup %s: %v", name, err)
	}
	return dir
}

// readingsBMC serves a mockup through an edge (so a test can change
// answers) with the virtual BMC's clock set to clock (nil: real time).
func readingsBMC(t *testing.T, mockup string, mod func(*vbmc.Config)) (*vbmc.BMC, *edge, string) {
	t.Helper()
	cfg := vbmc.Config{Root: readingsMockupDir(t, mockup), Username: testUser, Password: testPassword}
	if mod != nil {
		mod(&cfg)
	}
	return edgeBMC(t, cfg)
}

func kinds(ts []bmc.Temperature) []string {
	var out []string
	for _, t := range ts {
		if !slices.Contains(out, t.Kind) {
			out = append(out, t.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func hasProblem(r bmc.Readings, part string) bool {
	for _, p := range r.Problems {
		if strings.Contains(p, part) {
			return true
		}
	}
	return false
}

// Each mockup ends on the cheapest path that works for it, reads sane
// values, and after the probe costs a fixed, small number of requests per
// call (the BMC's own request count agrees), the same on every later call.
func TestReadingsPathPerMockup(t *testing.T) {
	cases := []struct {
		mockup     string
		path       string
		watts      float64  // 0: no power reading (and a problem says so)
		kinds      []string // temperature kinds seen
		fans, psus int
		redundancy string
		gpus       int
		drives     int
		memCorr    int64
		steady     int // requests per call once the path is known
		problem    string
	}{
		// One GET of the Chassis collection with $expand=.($levels=2), the
		// System (power state), SimpleStorage expanded.
		{mockup: "dmtf-public-rackmount1", path: bmc.PathExpand, watts: 344, kinds: []string{"cpu", "inlet"}, fans: 2, psus: 1,
			drives: 2, memCorr: -1, steady: 3},
		// ... plus Processors expanded (2 GPUs); Storage expanded two levels.
		{mockup: "dmtf-public-tower", path: bmc.PathExpand, watts: 926, kinds: []string{"cpu", "inlet"}, fans: 2, psus: 2,
			redundancy: "OK", gpus: 2, drives: 10, memCorr: -1, steady: 4},
		// An empty MetricReports collection: telemetry is not a candidate.
		// AMI labels every temperature "Intake": kinds come from names.
		{mockup: "gigabyte-ami-h262-z63", path: bmc.PathExpand, watts: 100, kinds: []string{"cpu", "other"}, drives: 1, memCorr: -1, steady: 3},
		// No $expand: Thermal of Enclosure, Node0 and Node1 (Power holds
		// only voltages: left out), the System, 8 GPUs one by one.
		{mockup: "hpe-cray-ex235n-a100", path: bmc.PathLegacy, kinds: []string{"gpu", "inlet", "other"}, gpus: 8, memCorr: -1,
			steady: 12, problem: "no power draw reading"},
		// No Power, Thermal or Sensors at all: nothing to remember, so each
		// call looks again (root, Chassis, Chassis/1) besides the System.
		{mockup: "hpe-ilo5-xl675d-a40", path: "", memCorr: -1, steady: 4, problem: "no sensor readings"},
		// A partial capture: no Chassis; GPUs under the HGX baseboard.
		{mockup: "supermicro-hgx-b200-partial", path: "", gpus: 2, memCorr: -1, steady: 6, problem: "no sensor readings"},
		// One report holds power, PSU input, temperatures and fans; the
		// System, GPUs, drives and DIMM ECC counts expanded: 5.
		{mockup: telemetryMockup, path: bmc.PathTelemetry, watts: 2400, kinds: []string{"cpu", "exhaust", "gpu", "inlet"}, fans: 2,
			psus: 2, gpus: 2, drives: 2, memCorr: 3, steady: 5},
	}
	for _, tc := range cases {
		t.Run(tc.mockup, func(t *testing.T) {
			b, _, url := readingsBMC(t, tc.mockup, nil)
			c := dial(t, testConfig(url))
			defer closeAndCheckSessions(t, c, b)
			var calls []int
			for i := range 3 {
				before := b.Stats().Requests
				r, err := c.Readings(ctxT(t))
				if err != nil {
					t.Fatalf("Readings %d: %v", i+1, err)
				}
				if got := b.Stats().Requests - before; got != int64(r.Requests) {
					t.Errorf("Readings %d reported %d requests, the BMC saw %d", i+1, r.Requests, got)
				}
				calls = append(calls, r.Requests)
				if r.Path != tc.path {
					t.Fatalf("Readings %d: path %q, want %q (problems %q)", i+1, r.Path, tc.path, r.Problems)
				}
				if i == 0 {
					continue
				}
				checkReadings(t, r, tc.watts, tc.kinds, tc.fans, tc.psus, tc.redundancy, tc.gpus, tc.drives, tc.memCorr, tc.problem)
			}
			t.Logf("%s: path %q, requests per call %v (the first probes)", tc.mockup, tc.path, calls)
			if calls[1] > calls[0] || calls[2] != calls[1] || calls[1] != tc.steady {
				t.Errorf("requests per call %v, want the probe first, then %d on every call", calls, tc.steady)
			}
		})
	}
}

func checkReadings(t *testing.T, r bmc.Readings, watts float64, wantKinds []string, fans, psus int, redundancy string, gpus, drives int, memCorr int64, problem string) {
	t.Helper()
	if r.PowerState != "On" {
		t.Errorf("PowerState %q, want On", r.PowerState)
	}
	if r.NodeWatts != watts {
		t.Errorf("NodeWatts %v, want %v", r.NodeWatts, watts)
	}
	if got := kinds(r.Temperatures); !slices.Equal(got, wantKinds) {
		t.Errorf("temperature kinds %v, want %v (%v)", got, wantKinds, r.Temperatures)
	}
	for _, tm := range r.Temperatures {
		if tm.Celsius <= 0 || tm.Celsius > 110 || tm.Name == "" {
			t.Errorf("insane temperature %+v", tm)
		}
	}
	if len(r.Fans) != fans || len(r.PSUs) != psus || r.PSURedundancy != redundancy {
		t.Errorf("%d fans, %d PSUs, redundancy %q; want %d, %d, %q", len(r.Fans), len(r.PSUs), r.PSURedundancy, fans, psus, redundancy)
	}
	if len(r.GPUs) != gpus || len(r.Drives) != drives || r.MemoryCorrectable != memCorr {
		t.Errorf("%d GPUs, %d drives, %d correctable ECC errors; want %d, %d, %d", len(r.GPUs), len(r.Drives), r.MemoryCorrectable, gpus, drives, memCorr)
	}
	for _, d := range r.Drives {
		if d.Name == "" || d.Health == "" {
			t.Errorf("drive without a name or health: %+v", d)
		}
	}
	if problem == "" && len(r.Problems) > 0 {
		t.Errorf("problems %q, want none", r.Problems)
	}
	if problem != "" && !hasProblem(r, problem) {
		t.Errorf("problems %q, want one saying %q", r.Problems, problem)
	}
}

// rewriteRoot makes the edge answer the service root with mod applied.
func rewriteRoot(e *edge, mod func(map[string]any)) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method != http.MethodGet || strings.TrimSuffix(r.URL.Path, "/") != "/redfish/v1" {
			return false
		}
		rec := httptest.NewRecorder()
		e.b.ServeHTTP(rec, r)
		var root map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &root)
		mod(root)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(root)
		return true
	}
}

// notFound answers 404 to GETs of paths with one of the suffixes.
func notFound(suffixes ...string) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		for _, s := range suffixes {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, s) {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.ResourceMissingAtURI","message":"gone"}}`))
				return true
			}
		}
		return false
	}
}

func chain(hs ...func(http.ResponseWriter, *http.Request, []byte) bool) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, b []byte) bool {
		for _, h := range hs {
			if h(w, r, b) {
				return true
			}
		}
		return false
	}
}

// The probe walks the paths in order: the same BMC (rackmount1, which has
// them all) ends on the next one as each cheaper one goes away.
func TestReadingsProbeOrder(t *testing.T) {
	noExpand := func(e *edge) func(http.ResponseWriter, *http.Request, []byte) bool {
		return rewriteRoot(e, func(root map[string]any) { delete(root, "ProtocolFeaturesSupported") })
	}
	cases := []struct {
		name   string
		hook   func(e *edge) func(http.ResponseWriter, *http.Request, []byte) bool
		path   string
		watts  float64
		kinds  []string
		fans   int
		psus   int
		red    string
		steady int
	}{
		{name: "everything", path: bmc.PathExpand, watts: 344, kinds: []string{"cpu", "inlet"}, fans: 2, psus: 1, steady: 3},
		{name: "no $expand", hook: noExpand, path: bmc.PathLegacy, watts: 344, kinds: []string{"cpu", "inlet"}, fans: 2, psus: 1,
			steady: 4}, // Power, Thermal, the System, SimpleStorage/1
		{name: "no $expand, no Power/Thermal", path: bmc.PathSubsystems, watts: 374, kinds: []string{"exhaust", "inlet"}, fans: 4, psus: 2,
			red: "Lost", // the mockup's Bay2 is absent: one PSU left of a group needing one
			hook: func(e *edge) func(http.ResponseWriter, *http.Request, []byte) bool {
				return chain(noExpand(e), notFound("/Power", "/Thermal"))
			},
			steady: 12}, // PowerSubsystem, Bay1, Bay1/Metrics, Bay2, ThermalMetrics, 4 fans, EnvironmentMetrics, the System, SimpleStorage/1
		{name: "sensors only", path: bmc.PathSensors, watts: 374, kinds: []string{"cpu", "exhaust", "inlet", "other"}, fans: 4,
			hook: func(e *edge) func(http.ResponseWriter, *http.Request, []byte) bool {
				return chain(noExpand(e), notFound("/Power", "/Thermal", "/EnvironmentMetrics", "/PowerSubsystem", "/ThermalSubsystem"))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, e, url := readingsBMC(t, "dmtf-public-rackmount1", nil)
			if tc.hook != nil {
				e.setHook(tc.hook(e))
			}
			c := dial(t, testConfig(url))
			defer closeAndCheckSessions(t, c, b)
			first, err := c.Readings(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.Readings(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if first.Path != tc.path || r.Path != tc.path {
				t.Fatalf("paths %q then %q, want %q (problems %q)", first.Path, r.Path, tc.path, r.Problems)
			}
			if r.Requests > first.Requests || tc.steady != 0 && r.Requests != tc.steady {
				t.Errorf("requests %d then %d, want the probe then %d", first.Requests, r.Requests, tc.steady)
			}
			t.Logf("%s: path %q, requests %d then %d", tc.name, r.Path, first.Requests, r.Requests)
			if r.NodeWatts != tc.watts || !slices.Equal(kinds(r.Temperatures), tc.kinds) || len(r.Fans) != tc.fans ||
				len(r.PSUs) != tc.psus || r.PSURedundancy != tc.red {
				t.Errorf("watts %v, kinds %v, %d fans, %d PSUs, redundancy %q; want %v, %v, %d, %d, %q\n%+v",
					r.NodeWatts, kinds(r.Temperatures), len(r.Fans), len(r.PSUs), r.PSURedundancy, tc.watts, tc.kinds, tc.fans, tc.psus, tc.red, r)
			}
		})
	}
}

// A BMC that advertises $expand but ignores it (answers links only) is
// read the legacy way.
func TestReadingsExpandIgnored(t *testing.T) {
	b, e, url := readingsBMC(t, "dmtf-public-tower", nil)
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		r.URL.RawQuery = "" // the virtual BMC never sees the $expand
		return false
	})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	r, err := c.Readings(ctxT(t))
	if err != nil || r.Path != bmc.PathLegacy || r.NodeWatts != 926 {
		t.Fatalf("Readings = path %q, %v W, %v; want %q and 926 W", r.Path, r.NodeWatts, err, bmc.PathLegacy)
	}
}

// A remembered path that stops working is probed again once, in the same
// call; the new path is then remembered.
func TestReadingsReprobeWhenPathFails(t *testing.T) {
	b, e, url := readingsBMC(t, "dmtf-public-tower", nil)
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	if r, err := c.Readings(ctxT(t)); err != nil || r.Path != bmc.PathExpand {
		t.Fatalf("first Readings: path %q, %v", r.Path, err)
	}
	// The BMC's firmware changes: $expand of the Chassis collection now
	// fails.
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/Chassis") && r.URL.Query().Has("$expand") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"Base.1.0.QueryNotSupported","message":"no"}}`))
			return true
		}
		return false
	})
	r, err := c.Readings(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Path != bmc.PathLegacy || r.NodeWatts != 926 || !hasProblem(r, `remembered readings path "expand" failed`) {
		t.Fatalf("after the change: path %q, %v W, problems %q; want %q, 926 W and a problem naming the failed path", r.Path, r.NodeWatts, r.Problems, bmc.PathLegacy)
	}
	r2, err := c.Readings(ctxT(t))
	if err != nil || r2.Path != bmc.PathLegacy || len(r2.Problems) > 0 || r2.Requests >= r.Requests {
		t.Errorf("next call: path %q, %d requests (the re-probe took %d), problems %q, %v", r2.Path, r2.Requests, r.Requests, r2.Problems, err)
	}
}

// A BMC that does not answer is an error, and is not taken for a path
// that failed (no probe against a hung BMC).
func TestReadingsBMCDownIsAnError(t *testing.T) {
	b, e, url := readingsBMC(t, "dmtf-public-rackmount1", nil)
	cfg := testConfig(url)
	cfg.Retries = -1
	c := dial(t, cfg)
	defer closeAndCheckSessions(t, c, b)
	if _, err := c.Readings(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodGet {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	before := b.Stats().Requests
	r, err := c.Readings(ctxT(t))
	if !bmc.IsKind(err, bmc.KindBusy) {
		t.Fatalf("Readings of a busy BMC: %v, want KindBusy", err)
	}
	if n := b.Stats().Requests - before; n > 3 || r.Path != "" {
		t.Errorf("a busy BMC cost %d requests (path %q), want the steady 3 at most: no probe", n, r.Path)
	}
	e.setHook(nil)
	if r, err := c.Readings(ctxT(t)); err != nil || r.Path != bmc.PathExpand || r.Requests != 3 {
		t.Errorf("once the BMC answers again: path %q, %d requests, %v; want the remembered path, 3", r.Path, r.Requests, err)
	}
}

// Readings follow a scripted scenario on each path: a power ramp, an inlet
// excursion, a fan failing, a PSU lost, a 0 W glitch (never a 0 W reading).
func TestReadingsFollowScenario(t *testing.T) {
	cases := []struct {
		mockup, path   string
		fan, psu       string
		fanHealth      bool // the path shows health states (telemetry gives numbers only)
		redundancyLost string
	}{
		{mockup: "dmtf-public-tower", path: bmc.PathExpand, fan: "BaseBoard System Fan", psu: "Power Supply Bay 2", fanHealth: true, redundancyLost: "Lost"},
		{mockup: telemetryMockup, path: bmc.PathTelemetry, fan: "FAN2", psu: "PSU1"},
	}
	for _, tc := range cases {
		t.Run(tc.mockup, func(t *testing.T) {
			clock := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			b, _, url := readingsBMC(t, tc.mockup, func(cfg *vbmc.Config) { cfg.Now = clock.Now })
			c := dial(t, testConfig(url))
			defer closeAndCheckSessions(t, c, b)
			start := clock.Now()
			err := b.Script(vbmc.Scenario{Steps: []vbmc.Step{
				{At: 0, Watts: 1000},
				{At: time.Minute, Watts: 1500},
				{At: 2 * time.Minute, Watts: 1500, InletCelsius: 42},
				{At: 3 * time.Minute, Watts: 1500, FanFailed: tc.fan},
				{At: 4 * time.Minute, Watts: 1400, PSULost: tc.psu},
				{At: 5 * time.Minute, ZeroWatts: true},
			}})
			if err != nil {
				t.Fatal(err)
			}
			read := func(d time.Duration) bmc.Readings {
				t.Helper()
				clock.set(start.Add(d))
				r, err := c.Readings(ctxT(t))
				if err != nil || r.Path != tc.path {
					t.Fatalf("at %v: path %q, %v; want %q", d, r.Path, err, tc.path)
				}
				return r
			}
			inlet := func(r bmc.Readings) float64 {
				for _, tm := range r.Temperatures {
					if tm.Kind == bmc.TempInlet {
						return tm.Celsius
					}
				}
				return -1
			}
			fan := func(r bmc.Readings) bmc.Fan {
				for _, f := range r.Fans {
					if strings.HasSuffix(f.Name, tc.fan) {
						return f
					}
				}
				t.Fatalf("no fan %q in %+v", tc.fan, r.Fans)
				return bmc.Fan{}
			}
			psu := func(r bmc.Readings) bmc.PSUReading {
				for _, p := range r.PSUs {
					if strings.HasSuffix(p.Name, tc.psu) {
						return p
					}
				}
				t.Fatalf("no PSU %q in %+v", tc.psu, r.PSUs)
				return bmc.PSUReading{}
			}
			r0 := read(0)
			if r0.NodeWatts != 1000 || fan(r0).RPM == 0 {
				t.Errorf("step 0: %v W, fan %+v", r0.NodeWatts, fan(r0))
			}
			baseInlet := inlet(r0)
			if r := read(time.Minute); r.NodeWatts != 1500 {
				t.Errorf("ramp: %v W, want 1500", r.NodeWatts)
			}
			if r := read(2 * time.Minute); inlet(r) != 42 || baseInlet == 42 {
				t.Errorf("inlet excursion: %v C (was %v), want 42", inlet(r), baseInlet)
			}
			r3 := read(3 * time.Minute)
			if f := fan(r3); f.RPM != 0 || tc.fanHealth && f.Health != "Critical" || inlet(r3) != baseInlet {
				t.Errorf("fan failed: %+v (inlet %v back to %v?)", f, inlet(r3), baseInlet)
			}
			r4 := read(4 * time.Minute)
			if p := psu(r4); p.InputWatts != 0 && p.OutputWatts != 0 || tc.fanHealth && p.Health != "Critical" || r4.PSURedundancy != tc.redundancyLost {
				t.Errorf("PSU lost: %+v, redundancy %q (want %q)", p, r4.PSURedundancy, tc.redundancyLost)
			}
			if r4.NodeWatts != 1400 || fan(r4).RPM == 0 {
				t.Errorf("PSU lost step: %v W, fan %+v; want 1400 W and the fan back", r4.NodeWatts, fan(r4))
			}
			r5 := read(5 * time.Minute)
			if r5.NodeWatts != 0 || !hasProblem(r5, "0 W while the system is On") {
				t.Errorf("0 W glitch: NodeWatts %v, problems %q; want 0 (unknown) and the sensor fault named", r5.NodeWatts, r5.Problems)
			}
		})
	}
}

// manualClock is a clock the test sets.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Concurrent callers of one client share one probe.
func TestReadingsConcurrentCallersProbeOnce(t *testing.T) {
	b, _, url := readingsBMC(t, "dmtf-public-tower", nil)
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	single, _, url2 := readingsBMC(t, "dmtf-public-tower", nil)
	c2 := dial(t, testConfig(url2))
	defer closeAndCheckSessions(t, c2, single)
	one, err := c2.Readings(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	before := b.Stats().Requests
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, err := c.Readings(ctxT(t)); err != nil || r.Path != bmc.PathExpand {
				t.Errorf("Readings: path %q, %v", r.Path, err)
			}
		}()
	}
	wg.Wait()
	// One probe (as the single client's first call) and 7 steady calls at
	// most; health and power state are read by each.
	if got, most := b.Stats().Requests-before, int64(one.Requests+7*4); got > most {
		t.Errorf("8 concurrent first calls cost %d requests, want at most %d (one probe)", got, most)
	}
	if m := b.Stats().MaxInFlight; m > 2 {
		t.Errorf("%d requests in flight at once, want the client's limit 2", m)
	}
}

// The JSON of Readings is what the poller will store: check it stays
// readable (field names, -1 for unknown memory counts).
func TestReadingsJSON(t *testing.T) {
	b, _, url := readingsBMC(t, "dmtf-public-rackmount1", nil)
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	r, err := c.Readings(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"NodeWatts":344`, `"MemoryCorrectable":-1`, `"Path":"expand"`, `"Kind":"inlet"`} {
		if !bytes.Contains(j, []byte(want)) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
}
