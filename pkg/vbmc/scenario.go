package vbmc

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Scenario scripts a BMC's readings over time, for testing a poller: a power
// ramp, a fan failing, a PSU lost, an inlet temperature excursion, a 0 W
// glitch. Start it with BMC.Script; the step in force is the last one whose
// At has passed on the BMC's clock (Config.Now) since Script was called.
// Before the first step, and for every field a step leaves zero, the
// mockup's own values are served. Steps do not accumulate: a fan failed in
// one step is healthy again in the next unless that step names it too.
//
// Every resource the mockup serves for those readings reflects the step:
// Chassis Power (PowerControl, PowerSupplies, Redundancy) and Thermal
// (Temperatures, Fans), EnvironmentMetrics, PowerSubsystem and its
// PowerSupplies (and their Metrics), ThermalSubsystem Fans and
// ThermalMetrics, Sensors, and TelemetryService MetricReports (each
// MetricValue is read from the resource its MetricProperty names, with a
// current Timestamp). Expanded answers ($expand) show the same.
type Scenario struct {
	Steps []Step
}

// Step is the state of the readings from At (since Script) until the next
// step.
type Step struct {
	At time.Duration
	// Watts is the node's power draw: PowerConsumedWatts, EnvironmentMetrics
	// PowerWatts and the chassis' total-power Sensor of the first chassis
	// (in Chassis collection order) that reports a power draw. 0: the
	// mockup's value.
	Watts float64
	// ZeroWatts makes those readings 0 W while the host stays on: the
	// sensor glitch a poller must not take for a measurement.
	ZeroWatts bool
	// InletCelsius is every inlet temperature (PhysicalContext Intake or
	// Room, or a name saying inlet, intake or ambient). 0: the mockup's.
	InletCelsius float64
	// FanFailed names a fan (its Name, MemberId, Id, FanName or
	// DeviceName, in whichever resource lists it): its reading is 0 and its
	// Status.Health Critical.
	FanFailed string
	// PSULost names a power supply (Name, MemberId or Id): Status.Health
	// Critical, its input and output power 0, and every redundancy group
	// holding it Status.Health Critical (redundancy lost).
	PSULost string
	// Log is added to the event log (SEL) when the step comes into force,
	// Created at the step's start unless set. Unlike the readings, entries
	// stay: a later step does not take them back.
	Log []LogEntry
}

// script is a running Scenario.
type script struct {
	steps   []Step
	start   time.Time
	chassis string // the chassis whose power draw Watts sets
	logged  int    // steps whose Log is in the event log
}

// Script starts sc on b now (b's clock); a later call replaces it, an empty
// Scenario stops scripting. Steps must be in order of At.
func (b *BMC) Script(sc Scenario) error {
	for i, s := range sc.Steps {
		if s.At < 0 {
			return fmt.Errorf("scenario step %d: At = %v: expected a duration >= 0", i, s.At)
		}
		if i > 0 && s.At < sc.Steps[i-1].At {
			return fmt.Errorf("scenario step %d: At = %v comes before step %d's %v: expected steps in order of At", i, s.At, i-1, sc.Steps[i-1].At)
		}
		if s.Watts < 0 || s.ZeroWatts && s.Watts != 0 {
			return fmt.Errorf("scenario step %d: Watts = %v with ZeroWatts %v: expected Watts > 0, or ZeroWatts alone", i, s.Watts, s.ZeroWatts)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushScriptLog() // what the old scenario logged stays logged
	if len(sc.Steps) == 0 {
		b.script = nil
		return nil
	}
	b.script = &script{steps: append([]Step(nil), sc.Steps...), start: b.cfg.Now(), chassis: b.powerChassis()}
	return nil
}

// ScriptStep returns the index of the step in force, -1 before the first
// step or without a scenario.
func (b *BMC) ScriptStep() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, _ := b.step()
	return i
}

// step returns the step in force and its index. b.mu held.
func (b *BMC) step() (int, *Step) {
	s := b.script
	if s == nil {
		return -1, nil
	}
	since := b.cfg.Now().Sub(s.start)
	i := sort.Search(len(s.steps), func(i int) bool { return s.steps[i].At > since }) - 1
	if i < 0 {
		return -1, nil
	}
	return i, &s.steps[i]
}

// powerChassis is the first chassis, in collection order, with a power
// draw reading. b.mu held.
func (b *BMC) powerChassis() string {
	coll, ok := b.peek(serviceRoot + "/Chassis")
	if !ok {
		return ""
	}
	for _, ch := range members(coll) {
		doc, ok := b.peek(ch)
		if !ok {
			continue
		}
		if p, ok := b.peek(linkOf(doc, "Power")); ok && hasConsumedWatts(p) {
			return ch
		}
		if em, ok := b.peek(linkOf(doc, "EnvironmentMetrics")); ok && readingOf(em["PowerWatts"]) {
			return ch
		}
	}
	return ""
}

func hasConsumedWatts(power map[string]any) bool {
	for _, pc := range objects(power["PowerControl"]) {
		if _, ok := pc["PowerConsumedWatts"]; ok && pc["PowerConsumedWatts"] != nil {
			return true
		}
	}
	return false
}

func readingOf(v any) bool {
	m, ok := v.(map[string]any)
	return ok && m["Reading"] != nil
}

// scripted applies the step in force to the resource at p. b.mu held.
func (b *BMC) scripted(p string, body []byte, etag string) ([]byte, string) {
	i, st := b.step()
	if st == nil {
		return body, etag
	}
	doc, err := decodeDoc(body)
	if err != nil {
		return body, etag
	}
	if !b.applyStep(p, doc, st) {
		return body, etag
	}
	out, err := encodeDoc(doc)
	if err != nil {
		return body, etag
	}
	return out, fmt.Sprintf(`W/"%s-step%d"`, strings.Trim(strings.TrimPrefix(etag, "W/"), `"`), i)
}

// applyStep changes doc (the resource at p) to show st. It reports whether
// the resource is one that shows readings.
func (b *BMC) applyStep(p string, doc map[string]any, st *Step) bool {
	inPowerChassis := b.script.chassis != "" && strings.HasPrefix(p+"/", b.script.chassis+"/")
	switch {
	case typeIs(doc, "Power"):
		if inPowerChassis {
			for _, pc := range objects(doc["PowerControl"]) {
				if pc["PowerConsumedWatts"] != nil {
					setWatts(pc, "PowerConsumedWatts", st)
					break
				}
			}
		}
		lost := map[string]bool{}
		for _, ps := range objects(doc["PowerSupplies"]) {
			if named(ps, st.PSULost, "Name", "MemberId", "Id") {
				lose(ps, "PowerInputWatts", "PowerOutputWatts", "LastPowerOutputWatts", "LineInputVoltage")
				lost[str(ps["@odata.id"])] = true
			}
		}
		for _, r := range objects(doc["Redundancy"]) {
			if len(lost) > 0 && (holds(r["RedundancySet"], lost) || len(objects(doc["Redundancy"])) == 1) {
				critical(r)
			}
		}
	case typeIs(doc, "Thermal"):
		for _, t := range objects(doc["Temperatures"]) {
			if st.InletCelsius != 0 && inlet(t, "Name") && t["ReadingCelsius"] != nil {
				t["ReadingCelsius"] = num(st.InletCelsius)
			}
		}
		for _, f := range objects(doc["Fans"]) {
			if named(f, st.FanFailed, "Name", "MemberId", "FanName") {
				f["Reading"] = num(0)
				critical(f)
			}
		}
	case typeIs(doc, "EnvironmentMetrics"):
		if m, ok := doc["PowerWatts"].(map[string]any); ok && inPowerChassis && m["Reading"] != nil {
			setWatts(m, "Reading", st)
		}
		for _, f := range objects(doc["FanSpeedsPercent"]) {
			if named(f, st.FanFailed, "DeviceName") {
				f["Reading"] = num(0)
				if f["SpeedRPM"] != nil {
					f["SpeedRPM"] = num(0)
				}
			}
		}
	case typeIs(doc, "ThermalMetrics"):
		if s, ok := doc["TemperatureSummaryCelsius"].(map[string]any); ok && st.InletCelsius != 0 {
			if m, ok := s["Intake"].(map[string]any); ok && m["Reading"] != nil {
				m["Reading"] = num(st.InletCelsius)
			}
		}
		for _, t := range objects(doc["TemperatureReadingsCelsius"]) {
			if st.InletCelsius != 0 && inlet(t, "DeviceName") && t["Reading"] != nil {
				t["Reading"] = num(st.InletCelsius)
			}
		}
	case typeIs(doc, "Fan"):
		if named(doc, st.FanFailed, "Name", "Id") {
			if m, ok := doc["SpeedPercent"].(map[string]any); ok {
				m["Reading"] = num(0)
				if m["SpeedRPM"] != nil {
					m["SpeedRPM"] = num(0)
				}
			}
			critical(doc)
		}
	case typeIs(doc, "PowerSupply"):
		if named(doc, st.PSULost, "Name", "Id") {
			critical(doc)
		}
	case typeIs(doc, "PowerSupplyMetrics"):
		if psu, ok := b.peek(parentPath(p)); ok && named(psu, st.PSULost, "Name", "Id") {
			for _, k := range []string{"InputPowerWatts", "OutputPowerWatts", "InputVoltage", "InputCurrentAmps"} {
				if m, ok := doc[k].(map[string]any); ok && m["Reading"] != nil {
					m["Reading"] = num(0)
				}
			}
		}
	case typeIs(doc, "PowerSubsystem"):
		for _, r := range objects(doc["PowerSupplyRedundancy"]) {
			for _, l := range objects(r["RedundancyGroup"]) {
				if psu, ok := b.peek(cleanPath(str(l["@odata.id"]))); ok && named(psu, st.PSULost, "Name", "Id") {
					critical(r)
				}
			}
		}
	case typeIs(doc, "Sensor"):
		b.applySensor(p, doc, st, inPowerChassis)
	case typeIs(doc, "MetricReport"):
		b.applyReport(doc)
	default:
		return false
	}
	return true
}

// applySensor scripts one Sensor: the chassis' total power, an inlet
// temperature, a fan.
func (b *BMC) applySensor(p string, doc map[string]any, st *Step, inPowerChassis bool) {
	rt, units, ctx := str(doc["ReadingType"]), str(doc["ReadingUnits"]), str(doc["PhysicalContext"])
	id := str(doc["Id"])
	switch {
	case rt == "Power" && inPowerChassis && (ctx == "Chassis" || strings.Contains(strings.ToLower(id), "totalpower")):
		setWatts(doc, "Reading", st)
	case (rt == "Temperature" || units == "Cel") && st.InletCelsius != 0 && inlet(doc, "Name", "Id"):
		doc["Reading"] = num(st.InletCelsius)
	case (rt == "Rotational" || rt == "Percent" || units == "RPM") && named(doc, st.FanFailed, "Name", "Id"):
		doc["Reading"] = num(0)
		critical(doc)
	}
}

// applyReport reads each MetricValue from the (scripted) resource its
// MetricProperty names: "URI#/json/pointer", or a Sensor's URI alone (its
// Reading). Values whose resource is not in the tree stay as captured.
func (b *BMC) applyReport(doc map[string]any) {
	now := b.cfg.Now().UTC().Format(time.RFC3339)
	for _, mv := range objects(doc["MetricValues"]) {
		res, ptr, _ := strings.Cut(str(mv["MetricProperty"]), "#")
		if res == "" {
			continue
		}
		body, _, ok := b.render(cleanPath(res))
		if !ok {
			continue
		}
		target, err := decodeDoc(body)
		if err != nil {
			continue
		}
		var v any = target["Reading"]
		if ptr != "" {
			v = pointer(target, ptr)
		}
		if n, ok := v.(json.Number); ok {
			mv["MetricValue"] = n.String()
			mv["Timestamp"] = now
		}
	}
	if _, ok := doc["Timestamp"]; ok {
		doc["Timestamp"] = now
	}
}

// pointer follows a JSON pointer ("/PowerControl/0/PowerConsumedWatts").
func pointer(v any, ptr string) any {
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func setWatts(m map[string]any, key string, st *Step) {
	switch {
	case st.ZeroWatts:
		m[key] = num(0)
	case st.Watts > 0:
		m[key] = num(st.Watts)
	}
}

// lose zeroes a lost PSU's readings (those it has) and marks it Critical.
func lose(ps map[string]any, keys ...string) {
	for _, k := range keys {
		if ps[k] != nil {
			ps[k] = num(0)
		}
	}
	critical(ps)
}

// critical sets Status.Health Critical, keeping Status.State.
func critical(m map[string]any) {
	s, ok := m["Status"].(map[string]any)
	if !ok {
		s = map[string]any{"State": "Enabled"}
		m["Status"] = s
	}
	s["Health"] = "Critical"
}

// named reports whether name (non-empty) is one of m's keys' values.
func named(m map[string]any, name string, keys ...string) bool {
	if name == "" {
		return false
	}
	for _, k := range keys {
		if str(m[k]) == name {
			return true
		}
	}
	return false
}

// inlet reports an inlet temperature: PhysicalContext Intake or Room, or a
// name saying inlet, intake or ambient.
func inlet(m map[string]any, nameKeys ...string) bool {
	if c := str(m["PhysicalContext"]); c == "Intake" || c == "Room" {
		return true
	}
	for _, k := range nameKeys {
		n := strings.ToLower(str(m[k]))
		if strings.Contains(n, "inlet") || strings.Contains(n, "intake") || strings.Contains(n, "ambient") {
			return true
		}
	}
	return false
}

// holds reports whether a list of links names one of ids.
func holds(v any, ids map[string]bool) bool {
	for _, l := range objects(v) {
		if ids[str(l["@odata.id"])] {
			return true
		}
	}
	return false
}

func objects(v any) []map[string]any {
	a, _ := v.([]any)
	var out []map[string]any
	for _, e := range a {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(f float64) json.Number { return json.Number(strconv.FormatFloat(f, 'f', -1, 64)) }

func parentPath(p string) string {
	if i := strings.LastIndex(p, "/"); i > 0 {
		return p[:i]
	}
	return p
}
