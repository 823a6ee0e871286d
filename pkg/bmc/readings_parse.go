package bmc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// This file reads Redfish documents into a sample: pure functions over
// decoded JSON (json.Number kept), no HTTP. Readings (readings.go) decides
// which documents to fetch.

// sample is one read of a BMC's readings resources, per chassis, plus the
// health parts; finish turns it into Readings.
type sample struct {
	chassis   []*chassisSample // in the order first seen
	byURI     map[string]*chassisSample
	memCorr   int64 // -1: unknown
	memUncorr int64
	drives    []DriveHealth
	gpus      []GPUHealth
	problems  []string
}

// chassisSample is what one chassis contributed.
type chassisSample struct {
	uri, id     string
	containedBy string // Links.ContainedBy, where known
	watts       float64
	hasWatts    bool   // a node-level power reading was found (0 W included)
	wattsFrom   string // "PowerControl", "EnvironmentMetrics", "Sensor"
	psus        []psuSample
	groups      []redundancyGroup
	temps       []Temperature
	fans        []Fan
}

// psuSample is a PSU and the URI its redundancy groups name it by.
type psuSample struct {
	key string
	PSUReading
}

// redundancyGroup is a PSU redundancy group: Lost when its own health says
// so, or when no more of its members work than it needs.
type redundancyGroup struct {
	health    string
	minNeeded int
	members   []string // PSU keys (@odata.id)
}

func newSample() *sample {
	return &sample{byURI: map[string]*chassisSample{}, memCorr: -1, memUncorr: -1}
}

// ch returns the chassis sample of uri (a chassis URI), made on first use.
func (s *sample) ch(uri string) *chassisSample {
	uri = strings.TrimSuffix(uri, "/")
	if c, ok := s.byURI[uri]; ok {
		return c
	}
	c := &chassisSample{uri: uri, id: lastSegment(uri)}
	s.byURI[uri] = c
	s.chassis = append(s.chassis, c)
	return c
}

// score ranks what a path read: a node power reading counts 2, any
// temperature 1. 3 is complete; 0 is nothing.
func (s *sample) score() int {
	n := 0
	watts, temps := false, false
	for _, c := range s.chassis {
		watts = watts || c.hasWatts
		temps = temps || len(c.temps) > 0
	}
	if watts {
		n += 2
	}
	if temps {
		n++
	}
	return n
}

// anything reports whether the sample holds any reading at all.
func (s *sample) anything() bool {
	for _, c := range s.chassis {
		if c.hasWatts || len(c.temps) > 0 || len(c.fans) > 0 || len(c.psus) > 0 {
			return true
		}
	}
	return false
}

// --- JSON access ---

type doc = map[string]any

func decodeJSON(b []byte) (doc, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var d doc
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	return d, nil
}

func jstr(d doc, k string) string {
	s, _ := d[k].(string)
	return strings.TrimSpace(s)
}

// jnum reads a number; BMCs also send numbers as strings. null, absent or
// junk: false.
func jnum(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

func jobj(d doc, k string) doc {
	m, _ := d[k].(map[string]any)
	return m
}

func jarr(d doc, k string) []doc {
	a, _ := d[k].([]any)
	out := make([]doc, 0, len(a))
	for _, e := range a {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// jlink is d[k]["@odata.id"].
func jlink(d doc, k string) string { return jstr(jobj(d, k), "@odata.id") }

// jtype is the schema of d: "Power" for "#Power.v1_7_1.Power".
func jtype(d doc) string {
	t := strings.TrimPrefix(jstr(d, "@odata.type"), "#")
	if i := strings.Index(t, "."); i >= 0 {
		t = t[:i]
	}
	return t
}

// inline reports whether d[k] is an expanded resource rather than a link.
func inline(d doc, k string) doc {
	m := jobj(d, k)
	if len(m) > 1 {
		return m
	}
	return nil
}

func status(d doc) (health, state string) {
	s := jobj(d, "Status")
	return jstr(s, "Health"), jstr(s, "State")
}

func lastSegment(uri string) string {
	uri = strings.TrimSuffix(uri, "/")
	return uri[strings.LastIndex(uri, "/")+1:]
}

// chassisOf is the chassis URI a resource under /redfish/v1/Chassis/ID/...
// belongs to ("" when it is not under one).
func chassisOf(uri string) string {
	const pre = "/redfish/v1/Chassis/"
	if !strings.HasPrefix(uri, pre) {
		return ""
	}
	rest := uri[len(pre):]
	if i := strings.IndexAny(rest, "/#?"); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		return ""
	}
	return pre + rest
}

// --- temperatures ---

// The kinds of Temperature.
const (
	TempInlet   = "inlet"
	TempExhaust = "exhaust"
	TempCPU     = "cpu"
	TempGPU     = "gpu"
	TempOther   = "other"
)

// tempKind classifies a temperature sensor by its PhysicalContext where
// that is specific (and trusted), else by its name.
func tempKind(name, context string, trusted bool) string {
	if trusted {
		switch context {
		case "CPU", "CPUSubsystem":
			return TempCPU
		case "GPU", "GPUSubsystem", "Accelerator":
			return TempGPU
		case "Intake", "Room":
			return TempInlet
		case "Exhaust":
			return TempExhaust
		case "VoltageRegulator", "Memory", "MemorySubsystem", "PowerSupply", "StorageDevice", "NetworkingDevice",
			"Battery", "ASIC", "Transceiver":
			return TempOther
		}
	}
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "gpu"):
		return TempGPU
	case strings.Contains(n, "cpu"), strings.Contains(n, "processor"):
		return TempCPU
	case strings.Contains(n, "inlet"), strings.Contains(n, "intake"), strings.Contains(n, "ambient"):
		return TempInlet
	case strings.Contains(n, "exhaust"), strings.Contains(n, "outlet"):
		return TempExhaust
	}
	return TempOther
}

// contextTrusted reports whether the PhysicalContext of a list of
// temperature sensors means anything. Vendor quirk (AMI MegaRAC, the
// Gigabyte capture): every sensor says "Intake", CPUs and DIMMs too.
func contextTrusted(ts []doc) bool {
	if len(ts) < 3 {
		return true
	}
	for _, t := range ts {
		if jstr(t, "PhysicalContext") != "Intake" {
			return true
		}
	}
	return false
}

// --- legacy Power and Thermal ---

// parsePower reads a Power resource: node watts (PowerControl), PSUs,
// redundancy.
func parsePower(c *chassisSample, d doc) {
	sum, found := 0.0, false
	for _, pc := range jarr(d, "PowerControl") {
		if w, ok := jnum(pc["PowerConsumedWatts"]); ok {
			sum += w
			found = true
		}
	}
	if found {
		c.watts, c.hasWatts, c.wattsFrom = sum, true, "PowerControl"
	}
	for _, ps := range jarr(d, "PowerSupplies") {
		in, hasIn := jnum(ps["PowerInputWatts"])
		out, hasOut := jnum(ps["PowerOutputWatts"])
		if !hasOut {
			out, hasOut = jnum(ps["LastPowerOutputWatts"])
		}
		rated, _ := jnum(ps["PowerCapacityWatts"])
		health, state := status(ps)
		if health == "" && state == "" && !hasIn && !hasOut {
			continue // Vendor quirk (AMI): unpopulated placeholders named "nil"
		}
		c.psus = append(c.psus, psuSample{key: jstr(ps, "@odata.id"), PSUReading: PSUReading{
			Name: firstNonEmpty(jstr(ps, "Name"), jstr(ps, "MemberId")), InputWatts: in, OutputWatts: out,
			RatedWatts: rated, Health: health, State: state}})
	}
	for _, r := range jarr(d, "Redundancy") {
		c.groups = append(c.groups, redundancyOf(r, "MinNumNeeded", "RedundancySet"))
	}
}

// parseThermal reads a Thermal resource: temperatures and fans.
func parseThermal(c *chassisSample, d doc) {
	ts := jarr(d, "Temperatures")
	trusted := contextTrusted(ts)
	for _, t := range ts {
		v, ok := jnum(t["ReadingCelsius"])
		if _, state := status(t); !ok || state == "Absent" {
			continue
		}
		name := firstNonEmpty(jstr(t, "Name"), jstr(t, "MemberId"))
		uc, _ := jnum(t["UpperThresholdCritical"])
		c.temps = append(c.temps, Temperature{Name: name, Celsius: v, Kind: tempKind(name, jstr(t, "PhysicalContext"), trusted), UpperCritical: uc})
	}
	for _, f := range jarr(d, "Fans") {
		v, ok := jnum(f["Reading"])
		health, state := status(f)
		if state == "Absent" || (!ok && health == "") {
			continue
		}
		fan := Fan{Name: firstNonEmpty(jstr(f, "Name"), jstr(f, "FanName"), jstr(f, "MemberId")), Health: health}
		if jstr(f, "ReadingUnits") == "Percent" {
			fan.Percent = v
		} else {
			fan.RPM = v
		}
		c.fans = append(c.fans, fan)
	}
}

// --- EnvironmentMetrics, PowerSubsystem, ThermalSubsystem ---

// parseEnvironment reads a chassis' EnvironmentMetrics: its power draw
// (where Power gave none) and fan speeds (where nothing else gave fans).
func parseEnvironment(c *chassisSample, d doc) {
	if w, ok := jnum(jobj(d, "PowerWatts")["Reading"]); ok && !c.hasWatts {
		c.watts, c.hasWatts, c.wattsFrom = w, true, "EnvironmentMetrics"
	}
	if len(c.fans) > 0 {
		return
	}
	for _, f := range jarr(d, "FanSpeedsPercent") {
		pct, ok := jnum(f["Reading"])
		if !ok {
			continue
		}
		rpm, _ := jnum(f["SpeedRPM"])
		c.fans = append(c.fans, Fan{Name: firstNonEmpty(jstr(f, "DeviceName"), lastSegment(jstr(f, "DataSourceUri"))), Percent: pct, RPM: rpm})
	}
}

// parsePowerSubsystem reads the redundancy groups of a PowerSubsystem.
func parsePowerSubsystem(c *chassisSample, d doc) {
	for _, r := range jarr(d, "PowerSupplyRedundancy") {
		c.groups = append(c.groups, redundancyOf(r, "MinNeededInGroup", "RedundancyGroup"))
	}
}

// redundancyOf reads one redundancy group: legacy Power names its fields
// MinNumNeeded and RedundancySet, PowerSubsystem MinNeededInGroup and
// RedundancyGroup.
func redundancyOf(r doc, minKey, setKey string) redundancyGroup {
	g := redundancyGroup{}
	g.health, _ = status(r)
	if n, ok := jnum(r[minKey]); ok {
		g.minNeeded = int(n)
	}
	for _, m := range jarr(r, setKey) {
		g.members = append(g.members, jstr(m, "@odata.id"))
	}
	return g
}

// parsePSU reads a PowerSupply (v1) resource; its watts come from its
// Metrics (readPSUMetrics).
func parsePSU(c *chassisSample, d doc) {
	rated, _ := jnum(d["PowerCapacityWatts"])
	health, state := status(d)
	c.psus = append(c.psus, psuSample{key: strings.TrimSuffix(jstr(d, "@odata.id"), "/"), PSUReading: PSUReading{
		Name: firstNonEmpty(jstr(d, "Name"), jstr(d, "Id")), RatedWatts: rated, Health: health, State: state}})
}

// parsePSUMetrics reads a PowerSupplyMetrics resource into its PSU (psu is
// the PSU's URI).
func parsePSUMetrics(c *chassisSample, psu string, d doc) {
	for i := range c.psus {
		if c.psus[i].key == psu {
			c.psus[i].InputWatts, _ = jnum(jobj(d, "InputPowerWatts")["Reading"])
			c.psus[i].OutputWatts, _ = jnum(jobj(d, "OutputPowerWatts")["Reading"])
		}
	}
}

// parseThermalMetrics reads temperatures from ThermalMetrics: its readings
// list, else its summary.
func parseThermalMetrics(c *chassisSample, d doc) {
	for _, t := range jarr(d, "TemperatureReadingsCelsius") {
		v, ok := jnum(t["Reading"])
		if !ok {
			continue
		}
		name := firstNonEmpty(jstr(t, "DeviceName"), lastSegment(jstr(t, "DataSourceUri")))
		c.temps = append(c.temps, Temperature{Name: name, Celsius: v, Kind: tempKind(name, jstr(t, "PhysicalContext"), true)})
	}
	if len(c.temps) > 0 {
		return
	}
	sum := jobj(d, "TemperatureSummaryCelsius")
	for _, k := range []string{"Intake", "Exhaust", "Internal", "Ambient"} {
		if v, ok := jnum(jobj(sum, k)["Reading"]); ok {
			kind := map[string]string{"Intake": TempInlet, "Ambient": TempInlet, "Exhaust": TempExhaust}[k]
			c.temps = append(c.temps, Temperature{Name: k, Celsius: v, Kind: firstNonEmpty(kind, TempOther)})
		}
	}
}

// parseFan reads a Fan (v1) resource of a ThermalSubsystem.
func parseFan(c *chassisSample, d doc) {
	health, state := status(d)
	if state == "Absent" {
		return
	}
	sp := jobj(d, "SpeedPercent")
	pct, _ := jnum(sp["Reading"])
	rpm, _ := jnum(sp["SpeedRPM"])
	c.fans = append(c.fans, Fan{Name: firstNonEmpty(jstr(d, "Name"), jstr(d, "Id")), Percent: pct, RPM: rpm, Health: health})
}

// --- Sensors ---

// sensorClass is what a Sensor measures, for Readings.
type sensorClass int

const (
	sensorNone sensorClass = iota
	sensorNodePower
	sensorTemperature
	sensorFan
)

// classifySensor decides what a Sensor is: the chassis' total power
// (PhysicalContext Chassis, or an Id like DMTF's "TotalPower"), a
// temperature, a fan.
func classifySensor(d doc) sensorClass {
	rt, units, ctx := jstr(d, "ReadingType"), jstr(d, "ReadingUnits"), jstr(d, "PhysicalContext")
	name := strings.ToLower(jstr(d, "Id") + " " + jstr(d, "Name"))
	switch {
	case rt == "Power" && (ctx == "Chassis" || strings.Contains(name, "totalpower") || strings.Contains(name, "total power")):
		return sensorNodePower
	case rt == "Temperature" || units == "Cel":
		return sensorTemperature
	case rt == "Rotational" || units == "RPM" || (rt == "Percent" && (ctx == "Fan" || strings.Contains(name, "fan"))):
		return sensorFan
	}
	return sensorNone
}

// parseSensor reads one Sensor into its chassis.
func parseSensor(c *chassisSample, d doc) {
	v, ok := jnum(d["Reading"])
	health, state := status(d)
	if state == "Absent" {
		return
	}
	name := firstNonEmpty(jstr(d, "Name"), jstr(d, "Id"))
	switch classifySensor(d) {
	case sensorNodePower:
		if ok && c.wattsFrom != "PowerControl" && c.wattsFrom != "EnvironmentMetrics" {
			c.watts, c.hasWatts, c.wattsFrom = c.watts+v, true, "Sensor"
		}
	case sensorTemperature:
		if ok {
			uc, _ := jnum(jobj(jobj(d, "Thresholds"), "UpperCritical")["Reading"])
			c.temps = append(c.temps, Temperature{Name: name, Celsius: v, Kind: tempKind(name, jstr(d, "PhysicalContext"), true), UpperCritical: uc})
		}
	case sensorFan:
		if ok || health != "" {
			f := Fan{Name: name, Health: health}
			if jstr(d, "ReadingType") == "Percent" || jstr(d, "ReadingUnits") == "%" {
				f.Percent = v
			} else {
				f.RPM = v
			}
			c.fans = append(c.fans, f)
		}
	}
}

// --- expanded chassis ---

// parseExpandedChassis reads a chassis whose Power, Thermal and
// EnvironmentMetrics came inline ($expand). It reports whether any did.
func parseExpandedChassis(s *sample, d doc) bool {
	uri := jstr(d, "@odata.id")
	if uri == "" {
		return false
	}
	c := s.ch(uri)
	c.containedBy = jlink(jobj(d, "Links"), "ContainedBy")
	found := false
	if p := inline(d, "Power"); p != nil {
		parsePower(c, p)
		found = true
	}
	if t := inline(d, "Thermal"); t != nil {
		parseThermal(c, t)
		found = true
	}
	if e := inline(d, "EnvironmentMetrics"); e != nil && (!c.hasWatts || len(c.fans) == 0) {
		parseEnvironment(c, e)
		found = true
	}
	return found
}

// members lists a collection's members: inline documents, or links.
func members(d doc) []doc { return jarr(d, "Members") }
