package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/telemetry"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The poller, reading a virtual BMC through pkg/bmc's shared pool, turns
// each scripted fault into its alert exactly once and clears it exactly
// once: a power ramp above the recipe's load, an inlet excursion, a fan
// failing, a PSU lost, a 0 W glitch while on.
func TestTelemetryScriptedFaults(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	b, err := vbmc.New(vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: bmcTestUser, Password: bmcTestPass, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()
	normal := vbmc.Step{Watts: 300, InletCelsius: 22}
	at := func(min int, s vbmc.Step) vbmc.Step { s.At = time.Duration(min) * time.Minute; return s }
	if err := b.Script(vbmc.Scenario{Steps: []vbmc.Step{
		at(0, normal),
		at(5, vbmc.Step{Watts: 600, InletCelsius: 22}), // ramp above 400 W + 10 %
		at(10, normal),
		at(15, vbmc.Step{Watts: 300, InletCelsius: 40}),
		at(20, normal),
		at(25, vbmc.Step{Watts: 300, InletCelsius: 22, FanFailed: "BaseBoard System Fan"}),
		at(30, normal),
		at(35, vbmc.Step{Watts: 300, InletCelsius: 22, PSULost: "Power Supply Bay"}),
		at(40, normal),
		at(45, vbmc.Step{ZeroWatts: true, InletCelsius: 22}),
		at(50, normal),
	}}); err != nil {
		t.Fatal(err)
	}
	credDir := t.TempDir()
	cred := filepath.Join(credDir, "bmc")
	if err := os.WriteFile(cred, []byte("username="+bmcTestUser+"\npassword="+bmcTestPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := machine.Machine{ID: "m-1", Name: "gpu-01", Recipe: "r", State: machine.StateReady,
		BMC: machine.BMC{Endpoint: srv.URL, CredentialRef: "file:" + cred, Insecure: true}} // plain http: a test BMC
	pool := bmc.NewPool(nil)
	defer pool.Close()
	creds := credential.Policy{Dir: credDir}
	var mu sync.Mutex
	var got []string
	read := telemetry.BMCReader(pool, func() credential.Policy { return creds }, nil, slog.New(slog.DiscardHandler))
	svc, err := telemetry.New(telemetry.Config{
		Machines: func(context.Context) ([]machine.Machine, error) { return []machine.Machine{m}, nil },
		Read: func(ctx context.Context, mm *machine.Machine) telemetry.Sample {
			return read(ctx, mm)
		},
		Recipes: func(string) (*recipe.Recipe, error) {
			return &recipe.Recipe{Name: "r", Power: recipe.Power{LoadWatts: 400}, Alerts: recipe.Alerts{For: recipe.Duration(2 * time.Minute)}}, nil
		},
		Event: func(_ context.Context, _ string, msg string) {
			mu.Lock()
			got = append(got, msg)
			mu.Unlock()
		},
		Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var transitions []string
	for min := 0; min <= 58; min++ {
		if err := svc.PollAll(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, msg := range got {
			transitions = append(transitions, fmt.Sprintf("%d %s", min, strings.TrimSuffix(firstWords(msg, 3), ":")))
		}
		got = nil
		mu.Unlock()
		clk.add(time.Minute)
	}
	want := []string{
		"7 alert watts-above-load FIRING", "12 alert watts-above-load resolved",
		"17 alert inlet-temperature FIRING", "22 alert inlet-temperature resolved",
		"27 alert fan-failed FIRING", "32 alert fan-failed resolved",
		"37 alert psu-redundancy-lost FIRING", "42 alert psu-redundancy-lost resolved",
		"47 alert power-sensor FIRING", "52 alert power-sensor resolved",
	}
	if fmt.Sprint(transitions) != fmt.Sprint(want) {
		t.Errorf("transitions:\n%q\nwant:\n%q", transitions, want)
	}
	if cur := svc.Last(); len(cur) != 1 || cur[0].Sample.Path == "" || cur[0].Sample.Watts != 300 {
		t.Errorf("last sample: %+v", cur)
	}
}

func firstWords(s string, n int) string {
	words := 0
	for i, r := range s {
		if r == ' ' {
			words++
			if words == n {
				return s[:i]
			}
		}
	}
	return s
}

// What the BMC's readings mean for the rules: PSU and fan losses on every
// path, including the telemetry path's numbers without a health.
func TestSampleOf(t *testing.T) {
	psu := func(in float64, health, state string) bmc.PSUReading {
		return bmc.PSUReading{Name: "PSU", InputWatts: in, OutputWatts: in * 0.94, Health: health, State: state}
	}
	for _, tc := range []struct {
		name     string
		power    string
		psus     []bmc.PSUReading
		redund   string
		wantLost bool
	}{
		{"both carrying", "On", []bmc.PSUReading{psu(900, "", ""), psu(880, "", "")}, "", false},
		{"numbers only, one at 0 W while on", "On", []bmc.PSUReading{psu(1700, "", ""), psu(0, "", "")}, "", true},
		{"numbers only, host off", "Off", []bmc.PSUReading{psu(20, "", ""), psu(0, "", "")}, "", false},
		{"numbers only, all at 0 W (no readings at all)", "On", []bmc.PSUReading{psu(0, "", ""), psu(0, "", "")}, "", false},
		{"health OK at 0 W (standby supply)", "On", []bmc.PSUReading{psu(1700, "OK", "Enabled"), psu(0, "OK", "StandbyOffline")}, "", false},
		{"critical", "On", []bmc.PSUReading{psu(1700, "OK", "Enabled"), psu(0, "Critical", "Enabled")}, "", true},
		{"empty bay", "On", []bmc.PSUReading{psu(1700, "OK", "Enabled"), psu(0, "", "Absent")}, "", false},
		{"the BMC's redundancy group says lost", "On", []bmc.PSUReading{psu(1700, "OK", "Enabled")}, "Lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := telemetry.SampleOf(bmc.Readings{PowerState: tc.power, NodeWatts: 1500, PSUs: tc.psus, PSURedundancy: tc.redund})
			if s.PSURedundancyLost != tc.wantLost {
				t.Errorf("PSU redundancy lost = %v, want %v", s.PSURedundancyLost, tc.wantLost)
			}
		})
	}
}

// The poller reports a BMC's event log entries that appeared since its
// last read, once each; what the log held when serve started is not news.
func TestSELReader(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	b, err := vbmc.New(vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: bmcTestUser, Password: bmcTestPass, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()
	b.AddLogEntry(vbmc.LogEntry{Severity: "Warning", Message: "old news: fan 3 replaced", MessageID: "X.1.0.Old"})
	pool := bmc.NewPool(nil)
	defer pool.Close()
	ctx := context.Background()
	c, err := pool.Get(ctx, bmc.Config{Endpoint: srv.URL, Username: bmcTestUser, Password: bmcTestPass})
	if err != nil {
		t.Fatal(err)
	}
	r := telemetry.NewSELReader(10*time.Minute, clk.Now)
	log := slog.New(slog.DiscardHandler)
	if got := r.Read(ctx, c, "m-1", log); len(got) != 0 {
		t.Fatalf("first read reported %q; the log's history is not news", got)
	}
	clk.add(time.Minute)
	b.AddLogEntry(vbmc.LogEntry{Severity: "Critical", Message: "Uncorrectable ECC error on DIMM A3", MessageID: "X.1.0.ECC"})
	if got := r.Read(ctx, c, "m-1", log); len(got) != 0 {
		t.Fatalf("read before 10 minutes passed: %q", got)
	}
	clk.add(10 * time.Minute)
	got := r.Read(ctx, c, "m-1", log)
	if len(got) != 1 || !strings.Contains(got[0], "Uncorrectable ECC error on DIMM A3") || !strings.Contains(got[0], "Critical") {
		t.Fatalf("new entries %q, want the ECC error once", got)
	}
	clk.add(10 * time.Minute)
	if got := r.Read(ctx, c, "m-1", log); len(got) != 0 {
		t.Errorf("an entry reported twice: %q", got)
	}
}

const bmcTestUser, bmcTestPass = "admin", "pa55-word"

// vbmcMockup returns testdata/redfish-mockups/NAME under the module root.
func vbmcMockup(t *testing.T, name string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "redfish-mockups", name)
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = filepath.Dir(dir)
	}
}
