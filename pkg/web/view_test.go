package web

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/machine"
)

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/machines/n1?before=4": "/ui/machines/n1?before=4",
		"https://evil.example/ui/": "/ui/",
		"//evil.example/ui/":       "/ui/",
		"/api/v1/machines":         "/ui/",
		"/ui/\\evil":               "/ui/",
		"":                         "/ui/",
		"/ui/%0d%0aSet-Cookie:x":   "/ui/%0d%0aSet-Cookie:x",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// Each state's time runs from the transition into it to the next, the
// current one to now.
func TestStateTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := machine.Machine{State: machine.StateReady, Created: t0}
	evs := []machine.Event{
		{Kind: "enrolled", To: machine.StateEnrolled, Time: t0},
		{Kind: "state", From: machine.StateEnrolled, To: machine.StateProvisioning, Time: t0.Add(10 * time.Minute)},
		{Kind: "inventory", Time: t0.Add(12 * time.Minute)},
		{Kind: "state", From: machine.StateProvisioning, To: machine.StateVerifying, Time: t0.Add(20 * time.Minute)},
		{Kind: "state", From: machine.StateVerifying, To: machine.StateReady, Time: t0.Add(25 * time.Minute)},
	}
	got := stateTimes(evs, m, t0.Add(100*time.Minute))
	want := []stateTime{
		{machine.StateEnrolled, 10 * time.Minute, 10},
		{machine.StateProvisioning, 10 * time.Minute, 10},
		{machine.StateVerifying, 5 * time.Minute, 5},
		{machine.StateReady, 75 * time.Minute, 75},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("state times (-want +got):\n%s", d)
	}
}

// A cell takes the machine's worst condition; a GPU off the bus shows as
// a missing pip; the views grade their readings.
func TestCellFor(t *testing.T) {
	ready := machine.Machine{Name: "n1", State: machine.StateReady}
	for name, c := range map[string]struct {
		m        machine.Machine
		f        machineFacts
		view     string
		class    string
		pips     []string
		labelHas string
	}{
		"ready, 8 good GPUs": {ready, machineFacts{gpus: gpus(8, ""), expected: 8}, "status", "c-ok", repeat("p-ok", 8), "ready"},
		"failed":             {machine.Machine{Name: "n2", State: machine.StateFailed}, machineFacts{}, "status", "c-bad", nil, "failed"},
		"a degraded link":    {ready, machineFacts{gpus: gpus(2, "warn"), expected: 2}, "status", "c-warn", []string{"p-ok", "p-warn"}, "PCIe link"},
		"a GPU off the bus":  {ready, machineFacts{gpus: gpus(7, ""), expected: 8}, "status", "c-warn", append(repeat("p-ok", 7), "p-missing"), "7 of 8 GPUs"},
		"a critical alert":   {ready, machineFacts{critical: []string{"fan-failed"}}, "status", "c-bad", nil, "fan-failed"},
		"no inventory":       {ready, machineFacts{expected: 2}, "status", "c-ok", []string{"p-none", "p-none"}, "n1"},
		"power at 80%":       {ready, machineFacts{sampled: true, watts: 4800, loadWatts: 6000}, "power", "c-p3", nil, "4800 W of 6000 W"},
		"inlet over":         {ready, machineFacts{sampled: true, inletC: 33, inletMax: 30}, "inlet", "c-hot", nil, "inlet 33.0 °C"},
		"drift":              {ready, machineFacts{drift: "bad", driftNote: "off its pin: BIOS"}, "drift", "c-dbad", nil, "BIOS"},
	} {
		got := cellFor(c.m, c.f, c.view)
		var pips []string
		for _, p := range got.Pips {
			pips = append(pips, p.Class)
		}
		if got.Class != c.class || !strings.Contains(got.Label, c.labelHas) || cmp.Diff(c.pips, pips) != "" {
			t.Errorf("%s: class %s, label %q, pips %v; want %s, a label with %q, pips %v", name, got.Class, got.Label, pips, c.class, c.labelHas, c.pips)
		}
	}
}

func gpus(n int, last string) []gpuFact {
	out := make([]gpuFact, n)
	for i := range out {
		out[i] = gpuFact{label: "SXM", status: "ok"}
	}
	if last == "warn" {
		out[n-1] = gpuFact{label: "SXM", status: "warn", why: "PCIe link Gen4 x8 of Gen5 x16"}
	}
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The phase bar draws each phase to scale and names it; the running one
// reaches now.
func TestPhaseBar(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svg := string(phaseBar([]wire.Phase{{Name: "bmc", Start: t0, End: t0.Add(10 * time.Second)},
		{Name: "image", Start: t0.Add(10 * time.Second)}}, t0.Add(40*time.Second)))
	for _, want := range []string{`width="250.0"`, `x="250.0" y="0" width="750.0"`, "bmc 10s", "image 30s", `class="ph1 running"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("phase bar lacks %q:\n%s", want, svg)
		}
	}
}

// A chart breaks its line where readings are missing and escapes what it
// names.
func TestLineChart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pts := []point{{t0, 100}, {t0.Add(5 * time.Minute), 200}, {t0.Add(time.Hour), 300}}
	svg := string(lineChart(`rack <r1> & "x"`, []series{{Name: "r1", Points: pts}}, "W", t0, t0.Add(2*time.Hour)))
	if n := strings.Count(svg, "<polyline"); n != 1 || strings.Count(svg, "<circle") != 1 {
		t.Errorf("want one line and one lone point across the gap:\n%s", svg)
	}
	if strings.Contains(svg, "<r1>") || !strings.Contains(svg, "&lt;r1&gt;") {
		t.Errorf("the title is not escaped:\n%s", svg)
	}
}

// A check's measured value is shown in its gate's unit: the agent's MiB
// and Mbps become bytes and bits per second.
func TestChecksInTheirUnits(t *testing.T) {
	j := &wire.Job{ID: "j-1", Reimage: &wire.ReimageStatus{Checks: []wire.CheckResult{
		{Name: "memory-size", OK: true, Value: 1024}, {Name: "nic-link", OK: false, Value: 25000}, {Name: "gpu-count", Skipped: true}}}}
	v := checksOf(j, nil)
	got := map[string][2]string{}
	for _, r := range v.Rows {
		got[r.Name] = [2]string{r.Value, r.Verdict}
	}
	want := map[string][2]string{"memory-size": {"1 GiB", "passed"}, "nic-link": {"25 Gbps", "failed"}, "gpu-count": {"", "could-not-run"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
}
