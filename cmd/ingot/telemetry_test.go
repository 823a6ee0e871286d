package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
)

// A running server polls an enrolled virtual BMC on its own: readings,
// /metrics and the power report come through the API; the Prometheus
// rules and the dashboard are printed.
func TestTelemetryCLI(t *testing.T) {
	s := startServe(t, recipesDir(t, map[string]string{"h100": "name: h100\nversion: 1.0.0\npower:\n  load_watts: 10200\n  idle_watts: 1500\n"}),
		"--telemetry-interval", "5s")
	_, url := startTestBMC(t, "dmtf-public-rackmount1")
	s.ok("machine", "add", "gpu-01", "--mac", "52:54:00:ee:00:01", "--bmc", url, "--bmc-insecure", "--bmc-cred", "file:"+s.bmcCredFile(), "--rack", "r12")
	var rs []wire.Reading
	deadline := time.Now().Add(20 * time.Second)
	for len(rs) == 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		json.Unmarshal([]byte(s.ok("readings", "-o", "json")), &rs)
	}
	if len(rs) != 1 || !rs[0].Up || rs[0].Machine != "gpu-01" || rs[0].Path == "" {
		t.Fatalf("readings: %+v", rs)
	}
	if rs[0].Watts <= 0 {
		t.Errorf("no watts from the mockup: %+v", rs[0])
	}
	if out := s.ok("readings"); !strings.Contains(out, "gpu-01") || !strings.Contains(out, " W") {
		t.Errorf("readings table:\n%s", out)
	}
	metrics := metricsText(t, s)
	for _, want := range []string{`ingot_node_bmc_up{machine="gpu-01",rack="r12",recipe=""} 1`, "ingot_node_power_watts{"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if out := s.ok("power", "report"); !strings.Contains(out, "gpu-01") || !strings.Contains(out, "r12") {
		t.Errorf("power report:\n%s", out)
	}
	if out := s.ok("plan", "capacity", "--recipe", "h100", "--count", "4", "--tariff", "0.2"); !strings.Contains(out, "ESTIMATE") || !strings.Contains(out, "10200 W each at load") {
		t.Errorf("plan capacity:\n%s", out)
	}
	if out := s.ok("alerts"); !strings.Contains(out, "no alerts") && !strings.Contains(out, "gpu-01") {
		t.Errorf("alerts:\n%s", out)
	}
	// A silence from the CLI: the same rule and event as the dashboard's.
	if out := s.ok("alerts", "silence", "gpu-01", "inlet-temperature", "--for", "4h", "--reason", "CRAC 3 in repair"); !strings.Contains(out, "inlet-temperature on gpu-01 silenced until") {
		t.Errorf("alerts silence: %q", out)
	}
	if out := s.ok("alerts", "silences"); !strings.Contains(out, "gpu-01") || !strings.Contains(out, "inlet-temperature") || !strings.Contains(out, "CRAC 3 in repair") {
		t.Errorf("alerts silences:\n%s", out)
	}
	if out := s.ok("events", "gpu-01"); !strings.Contains(out, "alert inlet-temperature silenced until") {
		t.Errorf("events lack the silence:\n%s", out)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"gpu-01", "no-such-rule", "--for", "1h"}, `rule "no-such-rule": expected one of`},
		{[]string{"gpu-01", "inlet-temperature", "--for", "8d"}, `for "8d": expected a duration`},
		{[]string{"gpu-01", "inlet-temperature", "--for", "200h"}, "at most 168h"},
		{[]string{"gpu-99", "inlet-temperature", "--for", "1h"}, "gpu-99"},
	} {
		if _, _, err := s.run(append([]string{"alerts", "silence"}, bad.args...)...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("alerts silence %v: %v, want an error saying %q", bad.args, err, bad.want)
		}
	}
	if out := s.ok("alerts", "rules", "--recipes-dir", "../../recipes"); !strings.Contains(out, "IngotInletTemperature") {
		t.Errorf("alerts rules:\n%s", out)
	}
	if out := s.ok("power", "dashboard"); !strings.Contains(out, `"uid": "ingot-fleet"`) {
		t.Errorf("dashboard: %.200s", out)
	}
}

// metricsText is the API listener's /metrics.
func metricsText(t *testing.T, s *cliServer) string {
	t.Helper()
	resp, err := s.https().Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// racks.yaml beside the recipes is linted with them, errors naming the
// file and line, and the shipped one passes.
func TestRecipeLintRacks(t *testing.T) {
	dir := recipesDir(t, map[string]string{"node": ""})
	os.WriteFile(filepath.Join(dir, "racks.yaml"), []byte("racks:\n  - {name: r1, feed_volts: 230, phases: 2, breaker_amps: 16}\n"), 0o644)
	out, _, err := runIngot(t, "recipe", "lint", "--images", "", dir)
	if err == nil || !strings.Contains(out, filepath.Join(dir, "racks.yaml")+":2:") || !strings.Contains(out, "phases 2") {
		t.Errorf("lint with a bad racks.yaml: %v\n%s", err, out)
	}
	if out, _, err := runIngot(t, "recipe", "lint", "--images", "../../images", "../../recipes"); err != nil {
		t.Errorf("the shipped recipes and racks.yaml: %v\n%s", err, out)
	}
}

// A rollout's job shows each finished wave's report.
func TestJobShowsWaveReports(t *testing.T) {
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, getenv: func(string) string { return "" }}
	st := &wire.RolloutStatus{Waves: [][]string{{"m-1", "m-2"}, {"m-3"}}, Wave: 1, Reports: []wire.WaveReport{{Wave: 1, Nodes: []wire.WaveNode{
		{Machine: "gpu-01", Rack: "r12", Watts: 10150, InletC: 27.5, GPUMaxC: 81},
		{Machine: "gpu-02", Rack: "r12", Watts: 10400, InletC: 38, Problem: "inlet 38.0 °C, above 35 °C"}}}}}
	if err := writeJob(e, &wire.Job{ID: "r-1", Kind: "rollout", State: "failed", Rollout: st}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Waves:    2 (wave 2 now)", "wave 1:", "gpu-01           rack r12    peak 10150 W, inlet 27.5 °C, GPU 81.0 °C",
		"OVER LIMIT: inlet 38.0 °C, above 35 °C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("job show lacks %q:\n%s", want, out.String())
		}
	}
}

// Restore drills through a running server: candidates are marked with an
// event, a drill without a candidate or of a non-candidate is refused
// saying why, and recipe ls shows a class never drilled as not scale-ready.
func TestDrillCLI(t *testing.T) {
	s := startServe(t, recipesDir(t, map[string]string{"h100": "name: h100\nversion: 1.0.0\ntimeouts:\n  restore: 20m\n"}))
	s.ok("machine", "add", "gpu-01", "--mac", "52:54:00:ff:00:01", "--recipe", "h100")
	s.ok("machine", "add", "gpu-02", "--mac", "52:54:00:ff:00:02", "--recipe", "h100")
	if _, _, err := s.run("drill", "h100"); err == nil || !strings.Contains(err.Error(), "no drill candidate") {
		t.Errorf("drill without candidates: %v", err)
	}
	if out := s.ok("machine", "drill-candidate", "gpu-02"); !strings.Contains(out, "drill candidate") {
		t.Errorf("drill-candidate: %q", out)
	}
	if ev := s.ok("events", "gpu-02"); !strings.Contains(ev, "a restore drill may wipe this machine") {
		t.Errorf("no drill event:\n%s", ev)
	}
	if _, _, err := s.run("drill", "h100", "--machine", "gpu-01"); err == nil || !strings.Contains(err.Error(), "gpu-01 is not a drill candidate") {
		t.Errorf("drill of a non-candidate: %v", err)
	}
	if out := s.ok("recipe", "ls"); !strings.Contains(out, "h100") || !strings.Contains(out, "20m0s") || !strings.Contains(out, "NO: never drilled") {
		t.Errorf("recipe ls:\n%s", out)
	}
}
