package bmc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustDoc(t *testing.T, s string) doc {
	t.Helper()
	d, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTempKind(t *testing.T) {
	cases := map[string]struct {
		name, context string
		trusted       bool
		want          string
	}{
		"intake context":              {"Chassis Intake Temp", "Intake", true, TempInlet},
		"room is ambient":             {"AmbientTemp", "Room", true, TempInlet},
		"exhaust":                     {"ExhaustTemp", "Exhaust", true, TempExhaust},
		"cpu context":                 {"CPU1 Temp", "CPU", true, TempCPU},
		"gpu subsystem (Cray)":        {"gpubrd1 Temperature", "GPUSubsystem", true, TempGPU},
		"VR of a CPU is not the CPU":  {"CPU0 VCORE Temperature", "VoltageRegulator", true, TempOther},
		"generic context, name says":  {"NC TEMP SENSOR ambient Temperature", "Chassis", true, TempInlet},
		"no context, HGX sensor id":   {"HGX_GPU_SXM_1_TEMP_0", "", true, TempGPU},
		"AMI: every sensor Intake":    {"CPU0_TEMP", "Intake", false, TempCPU},
		"AMI: a DIMM is not an inlet": {"DIMMG0_TEMP", "Intake", false, TempOther},
		"outlet":                      {"Outlet Temp", "", true, TempExhaust},
	}
	for name, tc := range cases {
		if got := tempKind(tc.name, tc.context, tc.trusted); got != tc.want {
			t.Errorf("%s: tempKind(%q, %q, %v) = %q, want %q", name, tc.name, tc.context, tc.trusted, got, tc.want)
		}
	}
}

func TestRedundancyLost(t *testing.T) {
	psus := []psuSample{
		{key: "p0", PSUReading: PSUReading{State: "Enabled", Health: "OK"}},
		{key: "p1", PSUReading: PSUReading{State: "Enabled", Health: "Critical"}},
		{key: "p2", PSUReading: PSUReading{State: "Absent"}},
		{key: "p3", PSUReading: PSUReading{State: "Enabled", Health: "Warning"}},
	}
	cases := map[string]struct {
		g    redundancyGroup
		want bool
	}{
		"two working, need one":        {redundancyGroup{minNeeded: 1, members: []string{"p0", "p3"}}, false},
		"one working, need one":        {redundancyGroup{minNeeded: 1, members: []string{"p0", "p1"}}, true},
		"absent bay":                   {redundancyGroup{minNeeded: 1, members: []string{"p0", "p2"}}, true},
		"the group says so":            {redundancyGroup{health: "Critical", minNeeded: 1, members: []string{"p0", "p3"}}, true},
		"members unknown: health only": {redundancyGroup{health: "OK", minNeeded: 1, members: []string{"x", "y"}}, false},
		"no minimum":                   {redundancyGroup{members: []string{"p1"}}, false},
	}
	for name, tc := range cases {
		if got := tc.g.lost(psus); got != tc.want {
			t.Errorf("%s: lost = %v, want %v", name, got, tc.want)
		}
	}
}

// A DMTF report keeps a history: the newest value of each property counts
// (DMTF public-telemetry's PlatformPowerUsage, two trays).
func TestReportKeepsNewestValue(t *testing.T) {
	d := mustDoc(t, `{"@odata.type": "#MetricReport.v1_5_2.MetricReport", "MetricValues": [
		{"Timestamp": "2016-11-08T12:25:00-05:00", "MetricValue": "103", "MetricProperty": "/redfish/v1/Chassis/Tray_1/Power#/PowerControl/0/PowerConsumedWatts"},
		{"Timestamp": "2016-11-08T12:25:00-05:00", "MetricValue": "103", "MetricProperty": "/redfish/v1/Chassis/Tray_2/Power#/PowerControl/0/PowerConsumedWatts"},
		{"Timestamp": "2016-11-08T14:25:00-05:00", "MetricValue": "107", "MetricProperty": "/redfish/v1/Chassis/Tray_1/Power#/PowerControl/0/PowerConsumedWatts"},
		{"Timestamp": "2016-11-08T13:25:00-05:00", "MetricValue": "106", "MetricProperty": "/redfish/v1/Chassis/Tray_2/Power#/PowerControl/0/PowerConsumedWatts"},
		{"Timestamp": "2016-11-08T14:25:00-05:00", "MetricValue": "1.5", "MetricProperty": "/redfish/v1/Chassis/Tray_1/Power#/PowerControl/0/PowerMetrics/AverageConsumedWatts"},
		{"MetricValue": "3", "MetricProperty": "/redfish/v1/Systems/1/Memory/DIMM1/MemoryMetrics#/LifeTime/CorrectableECCErrorCount"},
		{"MetricValue": "not a number", "MetricProperty": "/redfish/v1/Chassis/Tray_1/Thermal#/Temperatures/0/ReadingCelsius"}
	]}`)
	s := newSample()
	parseReport(s, d, nil)
	got := map[string]float64{}
	for _, c := range s.chassis {
		if c.hasWatts {
			got[c.id] = c.watts
		}
	}
	if diff := cmp.Diff(map[string]float64{"Tray_1": 107, "Tray_2": 106}, got); diff != "" {
		t.Errorf("watts per chassis (-want +got):\n%s", diff)
	}
	if s.memCorr != 3 || s.memUncorr != -1 {
		t.Errorf("memory errors %d/%d, want 3/-1", s.memCorr, s.memUncorr)
	}
	var r Readings
	r.Path = PathTelemetry
	r.PowerState = "On"
	r.finish(s, nil)
	if r.NodeWatts != 213 || len(r.Temperatures) != 0 {
		t.Errorf("NodeWatts %v, %d temperatures; want 213 (both trays), none", r.NodeWatts, len(r.Temperatures))
	}
}

// A chassis inside another that reports a power draw is not added twice.
func TestNodeWattsSkipsContainedChassis(t *testing.T) {
	s := newSample()
	node := s.ch("/redfish/v1/Chassis/Node")
	node.watts, node.hasWatts = 2400, true
	gpu := s.ch("/redfish/v1/Chassis/GPU_0")
	gpu.watts, gpu.hasWatts, gpu.containedBy = 700, true, "/redfish/v1/Chassis/Node"
	other := s.ch("/redfish/v1/Chassis/Shelf")
	other.watts, other.hasWatts = 100, true
	r := Readings{Path: PathExpand, PowerState: "On"}
	r.finish(s, nil)
	if r.NodeWatts != 2500 {
		t.Errorf("NodeWatts %v, want 2500 (node and shelf, not the GPU inside the node)", r.NodeWatts)
	}
}

func TestClassifySensor(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want sensorClass
	}{
		"DMTF TotalPower":        {`{"Id": "TotalPower", "ReadingType": "Power", "PhysicalContext": "Chassis"}`, sensorNodePower},
		"a CPU's power":          {`{"Id": "CPU1Power", "ReadingType": "Power", "PhysicalContext": "CPU"}`, sensorNone},
		"temperature by units":   {`{"Id": "IntakeTemp", "ReadingUnits": "Cel"}`, sensorTemperature},
		"fan percent by name":    {`{"Id": "CPUFan1", "ReadingType": "Percent", "PhysicalContext": "CPU"}`, sensorFan},
		"battery health percent": {`{"Id": "Battery1StateOfHealth", "ReadingType": "Percent", "PhysicalContext": "Battery"}`, sensorNone},
		"rotational":             {`{"Id": "Fan3", "ReadingType": "Rotational"}`, sensorFan},
		"a voltage is not a fan": {`{"Id": "PS1Out12V", "ReadingType": "Voltage"}`, sensorNone},
	}
	for name, tc := range cases {
		if got := classifySensor(mustDoc(t, tc.doc)); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// Numbers come as numbers, strings or null; junk is no reading.
func TestJnum(t *testing.T) {
	d := mustDoc(t, `{"a": 12.5, "b": "7", "c": null, "d": "n/a", "e": 0}`)
	for k, want := range map[string][2]any{"a": {12.5, true}, "b": {7.0, true}, "c": {0.0, false}, "d": {0.0, false}, "e": {0.0, true}, "f": {0.0, false}} {
		v, ok := jnum(d[k])
		if v != want[0] || ok != want[1] {
			t.Errorf("jnum(%s) = %v, %v; want %v, %v", k, v, ok, want[0], want[1])
		}
	}
}

// Vendor quirk (AMI): unpopulated PSU slots are skipped, not listed as
// PSUs named "nil".
func TestPowerSkipsPlaceholderPSUs(t *testing.T) {
	c := &chassisSample{}
	parsePower(c, mustDoc(t, `{"PowerControl": [{"PowerConsumedWatts": 100}],
		"PowerSupplies": [{"MemberId": "0", "Name": "nil"}, {"Name": "PSU2", "Status": {"State": "Absent"}}]}`))
	if len(c.psus) != 1 || c.psus[0].Name != "PSU2" || c.watts != 100 {
		t.Errorf("PSUs %+v, watts %v; want only PSU2 (absent) and 100 W", c.psus, c.watts)
	}
}
