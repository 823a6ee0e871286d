package vbmc

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// setClock puts c at since+d.
func (c *fakeClock) set(since time.Time, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = since.Add(d)
}

// at reads a number (or string) at a path of keys and array indexes in a
// decoded document: at(doc, "PowerControl", 0, "PowerConsumedWatts").
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", path, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %T is not an array of more than %d", path, v, k)
			}
			v = a[k]
		}
	}
	if n, ok := v.(float64); ok {
		return n
	}
	return v
}

// A scripted power ramp, inlet excursion, fan failure, PSU loss and 0 W
// glitch show, each at its time on the BMC's clock, in every resource
// rackmount1 serves for those readings, expanded or not.
func TestScenarioStepsShowInResources(t *testing.T) {
	clock := newFakeClock()
	b, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) { cfg.Now = clock.Now })
	start := clock.Now()
	err := b.Script(Scenario{Steps: []Step{
		{At: time.Minute, Watts: 500},
		{At: 2 * time.Minute, Watts: 800, InletCelsius: 38},
		{At: 3 * time.Minute, Watts: 810, FanFailed: "BaseBoard System Fan", PSULost: "Power Supply Bay"},
		{At: 4 * time.Minute, FanFailed: "Fan Bay 1", PSULost: "Power Supply Bay 1"},
		{At: 5 * time.Minute, ZeroWatts: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	const ch = "/redfish/v1/Chassis/1U"
	type want struct {
		step                    int
		watts, envWatts, sensor float64 // Power, EnvironmentMetrics, Sensors/TotalPower
		inlet, intake, sensorIn float64 // Thermal, ThermalMetrics summary, Sensors/IntakeTemp
		fan                     float64 // Thermal Fans[0] Reading
		fanHealth               string
		psuHealth               string // Power PowerSupplies[0]
		fanBay1Health           string // ThermalSubsystem/Fans/Bay1
		bay1Health              string // PowerSubsystem/PowerSupplies/Bay1
		bay1In                  float64
		redundancy              string // PowerSubsystem PowerSupplyRedundancy[0] health
	}
	steps := map[time.Duration]want{
		30 * time.Second: {step: -1, watts: 344, envWatts: 374, sensor: 374, inlet: 25, intake: 24.8, sensorIn: 24.8, fan: 2100,
			fanHealth: "OK", psuHealth: "Warning", fanBay1Health: "OK", bay1Health: "Warning", bay1In: 937.4, redundancy: "OK"},
		time.Minute: {step: 0, watts: 500, envWatts: 500, sensor: 500, inlet: 25, intake: 24.8, sensorIn: 24.8, fan: 2100,
			fanHealth: "OK", psuHealth: "Warning", fanBay1Health: "OK", bay1Health: "Warning", bay1In: 937.4, redundancy: "OK"},
		150 * time.Second: {step: 1, watts: 800, envWatts: 800, sensor: 800, inlet: 38, intake: 38, sensorIn: 38, fan: 2100,
			fanHealth: "OK", psuHealth: "Warning", fanBay1Health: "OK", bay1Health: "Warning", bay1In: 937.4, redundancy: "OK"},
		3 * time.Minute: {step: 2, watts: 810, envWatts: 810, sensor: 810, inlet: 25, intake: 24.8, sensorIn: 24.8, fan: 0,
			fanHealth: "Critical", psuHealth: "Critical", fanBay1Health: "OK", bay1Health: "Warning", bay1In: 937.4, redundancy: "OK"},
		4 * time.Minute: {step: 3, watts: 344, envWatts: 374, sensor: 374, inlet: 25, intake: 24.8, sensorIn: 24.8, fan: 2100,
			fanHealth: "OK", psuHealth: "Warning", fanBay1Health: "Critical", bay1Health: "Critical", bay1In: 0, redundancy: "Critical"},
		time.Hour: {step: 4, watts: 0, envWatts: 0, sensor: 0, inlet: 25, intake: 24.8, sensorIn: 24.8, fan: 2100,
			fanHealth: "OK", psuHealth: "Warning", fanBay1Health: "OK", bay1Health: "Warning", bay1In: 937.4, redundancy: "OK"},
	}
	for _, d := range []time.Duration{30 * time.Second, time.Minute, 150 * time.Second, 3 * time.Minute, 4 * time.Minute, time.Hour} {
		w := steps[d]
		clock.set(start, d)
		if got := b.ScriptStep(); got != w.step {
			t.Fatalf("at %v: step %d, want %d", d, got, w.step)
		}
		power, thermal := c.get(ch+"/Power"), c.get(ch+"/Thermal")
		expanded := c.get("/redfish/v1/Chassis?$expand=.($levels=2)")
		xch := at(t, expanded, "Members", 0)
		checks := []struct {
			what      string
			got, want any
		}{
			{"Power PowerConsumedWatts", at(t, power, "PowerControl", 0, "PowerConsumedWatts"), w.watts},
			{"expanded Power PowerConsumedWatts", at(t, xch, "Power", "PowerControl", 0, "PowerConsumedWatts"), w.watts},
			{"EnvironmentMetrics PowerWatts", at(t, c.get(ch+"/EnvironmentMetrics"), "PowerWatts", "Reading"), w.envWatts},
			{"Sensors/TotalPower", at(t, c.get(ch+"/Sensors/TotalPower"), "Reading"), w.sensor},
			{"Thermal intake", at(t, thermal, "Temperatures", 2, "ReadingCelsius"), w.inlet},
			{"expanded Thermal intake", at(t, xch, "Thermal", "Temperatures", 2, "ReadingCelsius"), w.inlet},
			{"Thermal CPU1 (not an inlet)", at(t, thermal, "Temperatures", 0, "ReadingCelsius"), 41.0},
			{"ThermalMetrics Intake", at(t, c.get(ch+"/ThermalSubsystem/ThermalMetrics"), "TemperatureSummaryCelsius", "Intake", "Reading"), w.intake},
			{"Sensors/IntakeTemp", at(t, c.get(ch+"/Sensors/IntakeTemp"), "Reading"), w.sensorIn},
			{"Thermal fan reading", at(t, thermal, "Fans", 0, "Reading"), w.fan},
			{"Thermal fan health", at(t, thermal, "Fans", 0, "Status", "Health"), w.fanHealth},
			{"Thermal other fan", at(t, thermal, "Fans", 1, "Status", "Health"), "OK"},
			{"Power PSU health", at(t, power, "PowerSupplies", 0, "Status", "Health"), w.psuHealth},
			{"ThermalSubsystem Fan Bay1 health", at(t, c.get(ch+"/ThermalSubsystem/Fans/Bay1"), "Status", "Health"), w.fanBay1Health},
			{"PowerSubsystem Bay1 health", at(t, c.get(ch+"/PowerSubsystem/PowerSupplies/Bay1"), "Status", "Health"), w.bay1Health},
			{"PowerSubsystem Bay1 input", at(t, c.get(ch+"/PowerSubsystem/PowerSupplies/Bay1/Metrics"), "InputPowerWatts", "Reading"), w.bay1In},
			{"PowerSubsystem redundancy", at(t, c.get(ch+"/PowerSubsystem"), "PowerSupplyRedundancy", 0, "Status", "Health"), w.redundancy},
		}
		for _, k := range checks {
			if k.got != k.want {
				t.Errorf("at %v (step %d): %s = %v, want %v", d, w.step, k.what, k.got, k.want)
			}
		}
	}
}

// Losing a PSU that is in a redundancy group marks the group's health
// Critical: redundancy lost.
func TestScenarioPSULostLosesRedundancy(t *testing.T) {
	clock := newFakeClock()
	b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Now = clock.Now })
	if err := b.Script(Scenario{Steps: []Step{{At: 0, PSULost: "Power Supply Bay 2"}}}); err != nil {
		t.Fatal(err)
	}
	power := c.get("/redfish/v1/Chassis/Tower/Power")
	for _, k := range []struct {
		what      string
		got, want any
	}{
		{"lost PSU health", at(t, power, "PowerSupplies", 1, "Status", "Health"), "Critical"},
		{"lost PSU state", at(t, power, "PowerSupplies", 1, "Status", "State"), "Enabled"},
		{"lost PSU output", at(t, power, "PowerSupplies", 1, "LastPowerOutputWatts"), 0.0},
		{"other PSU health", at(t, power, "PowerSupplies", 0, "Status", "Health"), "Warning"},
		{"redundancy health", at(t, power, "Redundancy", 0, "Status", "Health"), "Critical"},
	} {
		if k.got != k.want {
			t.Errorf("%s = %v, want %v", k.what, k.got, k.want)
		}
	}
	if err := b.Script(Scenario{}); err != nil {
		t.Fatal(err)
	}
	if h := at(t, c.get("/redfish/v1/Chassis/Tower/Power"), "Redundancy", 0, "Status", "Health"); h != "OK" {
		t.Errorf("after an empty Script: redundancy health %v, want the mockup's OK", h)
	}
}

// A MetricReport's values are read from the resources they name, so a
// telemetry report shows each step too, with a current Timestamp.
func TestScenarioShowsInMetricReport(t *testing.T) {
	clock := newFakeClock()
	b, c := start(t, "", func(cfg *Config) {
		cfg.Root, cfg.Now = filepath.Join("testdata", "mockups", "synthetic-hgx-telemetry"), clock.Now
	})
	const report = "/redfish/v1/TelemetryService/MetricReports/HGX_PlatformEnvironmentMetrics_0"
	values := func() map[string]string {
		out := map[string]string{}
		for _, mv := range at(t, c.get(report), "MetricValues").([]any) {
			m := mv.(map[string]any)
			out[m["MetricProperty"].(string)] = m["MetricValue"].(string)
		}
		return out
	}
	before := values()
	start := clock.Now()
	err := b.Script(Scenario{Steps: []Step{{At: time.Minute, Watts: 3100, InletCelsius: 41, FanFailed: "FAN2", PSULost: "PSU1"}}})
	if err != nil {
		t.Fatal(err)
	}
	clock.set(start, time.Minute)
	after := values()
	const ch = "/redfish/v1/Chassis/Chassis_0"
	for p, want := range map[string][2]string{
		ch + "/Power#/PowerControl/0/PowerConsumedWatts":                 {"2400", "3100"},
		ch + "/Thermal#/Temperatures/0/ReadingCelsius":                   {"24", "41"},
		ch + "/Thermal#/Temperatures/1/ReadingCelsius":                   {"41", "41"}, // the exhaust, unchanged
		ch + "/Thermal#/Fans/1/Reading":                                  {"9700", "0"},
		ch + "/Thermal#/Fans/0/Reading":                                  {"9800", "9800"},
		ch + "/Power#/PowerSupplies/0/PowerInputWatts":                   {"1230", "0"},
		ch + "/Power#/PowerSupplies/1/PowerInputWatts":                   {"1210", "1210"},
		"/redfish/v1/Chassis/HGX_GPU_SXM_1/Sensors/HGX_GPU_SXM_1_TEMP_0": {"38", "38"},
	} {
		if before[p] != want[0] || after[p] != want[1] {
			t.Errorf("%s: %s then %s, want %s then %s", p, before[p], after[p], want[0], want[1])
		}
	}
	if ts := at(t, c.get(report), "Timestamp"); ts != clock.Now().Format(time.RFC3339) {
		t.Errorf("report Timestamp %v, want the BMC's clock %s", ts, clock.Now().Format(time.RFC3339))
	}
}

// Script refuses steps that cannot mean anything, saying why.
func TestScriptRejectsBadSteps(t *testing.T) {
	b, _ := start(t, "dmtf-public-rackmount1", nil)
	for name, sc := range map[string]Scenario{
		"out of order":        {Steps: []Step{{At: time.Minute}, {At: time.Second}}},
		"negative At":         {Steps: []Step{{At: -time.Second}}},
		"ZeroWatts and Watts": {Steps: []Step{{ZeroWatts: true, Watts: 10}}},
		"negative Watts":      {Steps: []Step{{Watts: -1}}},
	} {
		if err := b.Script(sc); err == nil || !strings.Contains(err.Error(), "expected") {
			t.Errorf("%s: Script = %v, want an error saying what was expected", name, err)
		}
	}
}

// $expand follows DSP0266: "." expands subordinate links to $levels, "~"
// only those in Links, and a link to a missing resource stays a link.
func TestExpandLevels(t *testing.T) {
	_, c := start(t, "dmtf-public-rackmount1", nil)
	one := c.get("/redfish/v1/Chassis?$expand=.")
	if _, ok := at(t, one, "Members", 0, "Power").(map[string]any)["PowerControl"]; ok {
		t.Error("$expand=. (one level) inlined the members' Power too")
	}
	if at(t, one, "Members", 0, "Id") != "1U" {
		t.Error("$expand=. did not inline the members")
	}
	two := c.get("/redfish/v1/Chassis?$expand=.($levels=2)")
	if at(t, two, "Members", 0, "Power", "PowerControl", 0, "PowerConsumedWatts") != 344.0 {
		t.Error("$expand=.($levels=2) did not inline the members' Power")
	}
	if _, ok := at(t, two, "Members", 0, "Links", "ComputerSystems", 0).(map[string]any)["PowerState"]; ok {
		t.Error(`"." expanded a link inside Links`)
	}
	links := c.get("/redfish/v1/Chassis/1U?$expand=~")
	if at(t, links, "Links", "ComputerSystems", 0, "PowerState") != "On" {
		t.Error(`"~" did not expand Links`)
	}
	if _, ok := at(t, links, "Power").(map[string]any)["PowerControl"]; ok {
		t.Error(`"~" expanded a subordinate link`)
	}
	r := c.do(http.MethodGet, "/redfish/v1/Chassis/1U?$expand=.", nil).want(t, 200, "expand a resource")
	if _, ok := at(t, r.body, "Thermal").(map[string]any)["Fans"]; !ok {
		t.Error("$expand=. on a chassis did not inline its Thermal")
	}
}
