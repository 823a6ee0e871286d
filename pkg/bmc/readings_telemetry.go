package bmc

// This file reads TelemetryService metric reports: the plan (which
// reports, and the names and kinds their values need) and the values.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/stmcginnis/gofish"
)

// telemetryPlan finds the metric reports that hold readings and learns the
// names and kinds of what their values point at.
func (c *Client) telemetryPlan(api *gofish.APIClient, root doc, exp expandSupport) (*readingPlan, error) {
	ts := jlink(root, "TelemetryService")
	if ts == "" {
		return nil, nil
	}
	svc, err := getDoc(api, ts)
	if err != nil || jlink(svc, "MetricReports") == "" {
		return nil, downOnly(err)
	}
	coll := jlink(svc, "MetricReports")
	q := ""
	if exp.ok {
		q = exp.query(1)
	}
	list, err := getDoc(api, coll+q)
	if err != nil {
		return nil, downOnly(err)
	}
	var reports []doc
	var fetchURIs []source
	for _, m := range members(list) {
		if len(m) > 1 {
			reports = append(reports, m)
		} else if len(fetchURIs) < maxProbeReports {
			fetchURIs = append(fetchURIs, source{uri: jstr(m, "@odata.id")})
		}
	}
	docs, errs := fetch(api, fetchURIs)
	for i, d := range docs {
		if errs[i] != nil && down(errs[i]) {
			return nil, errs[i]
		}
		if d != nil {
			reports = append(reports, d)
		}
	}
	p := &readingPlan{path: PathTelemetry, meta: map[string]metricMeta{}}
	targets := map[string]bool{}
	for _, rep := range reports {
		scratch := newSample()
		parseReport(scratch, rep, nil)
		if !scratch.anything() && scratch.memCorr < 0 && scratch.memUncorr < 0 {
			continue
		}
		p.sources = append(p.sources, source{uri: jstr(rep, "@odata.id"), kind: srcReport})
		for _, mv := range latestValues(rep) {
			res, _ := metricTarget(mv.property)
			if k := lastSegment(res); k == "Thermal" || k == "Power" || k == "ThermalMetrics" || strings.Contains(res, "/Sensors/") {
				targets[res] = true
			}
		}
	}
	if len(p.sources) == 0 {
		return nil, nil
	}
	// Learn names, kinds and thresholds once: the report has only values.
	// Past maxProbeReports resources (an HGX report names hundreds of
	// sensors) the rest are placed by their Ids.
	var learn []source
	for _, res := range slices.Sorted(maps.Keys(targets)) {
		if len(learn) == maxProbeReports {
			break
		}
		learn = append(learn, source{uri: res})
	}
	docs, errs = fetch(api, learn)
	for i, d := range docs {
		if errs[i] != nil {
			if down(errs[i]) {
				return nil, errs[i]
			}
			continue
		}
		learnMeta(p.meta, learn[i].uri, d)
	}
	return p, nil
}

// metricKey names what a MetricProperty points at, less the property
// itself: "RES#/Temperatures/0", or the Sensor's URI.
func metricKey(property string) string {
	res, t := metricTarget(property)
	if len(t) >= 2 {
		return res + "#/" + t[0] + "/" + t[1]
	}
	return res
}

// learnMeta records the names and kinds of a resource's readings.
func learnMeta(meta map[string]metricMeta, res string, d doc) {
	ts := jarr(d, "Temperatures")
	trusted := contextTrusted(ts)
	for i, t := range ts {
		name := firstNonEmpty(jstr(t, "Name"), jstr(t, "MemberId"))
		uc, _ := jnum(t["UpperThresholdCritical"])
		meta[fmt.Sprintf("%s#/Temperatures/%d", res, i)] = metricMeta{Name: name, Kind: tempKind(name, jstr(t, "PhysicalContext"), trusted), UpperCritical: uc}
	}
	for i, f := range jarr(d, "Fans") {
		meta[fmt.Sprintf("%s#/Fans/%d", res, i)] = metricMeta{Name: firstNonEmpty(jstr(f, "Name"), jstr(f, "FanName"), jstr(f, "MemberId")),
			Percent: jstr(f, "ReadingUnits") == "Percent"}
	}
	for i, p := range jarr(d, "PowerSupplies") {
		rated, _ := jnum(p["PowerCapacityWatts"])
		meta[fmt.Sprintf("%s#/PowerSupplies/%d", res, i)] = metricMeta{Name: firstNonEmpty(jstr(p, "Name"), jstr(p, "MemberId")), RatedWatts: rated}
	}
	for i, t := range jarr(d, "TemperatureReadingsCelsius") {
		name := firstNonEmpty(jstr(t, "DeviceName"), lastSegment(jstr(t, "DataSourceUri")))
		meta[fmt.Sprintf("%s#/TemperatureReadingsCelsius/%d", res, i)] = metricMeta{Name: name, Kind: tempKind(name, jstr(t, "PhysicalContext"), true)}
	}
	if jtype(d) == "Sensor" {
		name := firstNonEmpty(jstr(d, "Name"), jstr(d, "Id"))
		m := metricMeta{Name: name, Percent: jstr(d, "ReadingType") == "Percent"}
		if classifySensor(d) == sensorTemperature {
			m.Kind = tempKind(name, jstr(d, "PhysicalContext"), true)
			m.UpperCritical, _ = jnum(jobj(jobj(d, "Thresholds"), "UpperCritical")["Reading"])
		}
		meta[res] = m
	}
}

// metricMeta is what a telemetry probe learned of one MetricProperty:
// names and kinds the report itself does not carry.
type metricMeta struct {
	Name          string
	Kind          string // temperature kind
	UpperCritical float64
	Percent       bool    // a fan reading in percent
	RatedWatts    float64 // a PSU's capacity
}

// metricValue is one MetricValues entry of a report.
type metricValue struct {
	property string
	value    float64
	when     time.Time
	order    int
}

// latestValues keeps the newest value of each MetricProperty of a report
// (a report can hold a history: DMTF's PlatformPowerUsage).
func latestValues(d doc) []metricValue {
	latest := map[string]metricValue{}
	for i, mv := range jarr(d, "MetricValues") {
		p := jstr(mv, "MetricProperty")
		v, ok := jnum(mv["MetricValue"])
		if p == "" || !ok {
			continue
		}
		when, _ := time.Parse(time.RFC3339Nano, jstr(mv, "Timestamp"))
		cur, seen := latest[p]
		if !seen || !when.Before(cur.when) {
			o := i
			if seen {
				o = cur.order
			}
			latest[p] = metricValue{property: p, value: v, when: when, order: o}
		}
	}
	out := make([]metricValue, 0, len(latest))
	for _, v := range latest {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}

// metricTarget splits a MetricProperty into its resource and JSON pointer
// tokens ("/redfish/v1/Chassis/1/Power#/PowerControl/0/PowerConsumedWatts").
func metricTarget(p string) (res string, tokens []string) {
	res, ptr, _ := strings.Cut(p, "#")
	res = strings.TrimSuffix(res, "/")
	if ptr = strings.Trim(ptr, "/"); ptr != "" {
		tokens = strings.Split(ptr, "/")
	}
	return res, tokens
}

// parseReport reads a MetricReport's values: node power, PSU power,
// temperatures, fans (legacy Power/Thermal properties, EnvironmentMetrics
// and ThermalMetrics readings, Sensors) and memory ECC counts
// (MemoryMetrics). meta names what the probe learned; values it cannot
// place are left out.
func parseReport(s *sample, d doc, meta map[string]metricMeta) {
	for _, mv := range latestValues(d) {
		parseMetric(s, mv, meta[metricKey(mv.property)])
	}
}

func parseMetric(s *sample, mv metricValue, m metricMeta) {
	res, t := metricTarget(mv.property)
	kind := lastSegment(res)
	at := func(i int, want string) bool { return len(t) > i && t[i] == want }
	c := func() *chassisSample { return s.ch(chassisOf(res)) }
	switch {
	case kind == "Power" && at(0, "PowerControl") && at(2, "PowerConsumedWatts") && chassisOf(res) != "":
		cs := c()
		if cs.wattsFrom != "PowerControl" {
			cs.watts, cs.wattsFrom = 0, "PowerControl"
		}
		cs.watts += mv.value
		cs.hasWatts = true
	case kind == "EnvironmentMetrics" && at(0, "PowerWatts") && chassisOf(res) != "":
		if cs := c(); !cs.hasWatts {
			cs.watts, cs.hasWatts, cs.wattsFrom = mv.value, true, "EnvironmentMetrics"
		}
	case kind == "Power" && at(0, "PowerSupplies") && len(t) == 3 && chassisOf(res) != "":
		cs := c()
		key := res + "#/PowerSupplies/" + t[1]
		i := psuIndex(cs, key, firstNonEmpty(m.Name, "PowerSupplies/"+t[1]))
		cs.psus[i].RatedWatts = m.RatedWatts
		switch t[2] {
		case "PowerInputWatts":
			cs.psus[i].InputWatts = mv.value
		case "PowerOutputWatts", "LastPowerOutputWatts":
			cs.psus[i].OutputWatts = mv.value
		}
	case kind == "Thermal" && at(0, "Temperatures") && at(2, "ReadingCelsius") && chassisOf(res) != "":
		name := firstNonEmpty(m.Name, "Temperatures/"+t[1])
		c().temps = append(c().temps, Temperature{Name: name, Celsius: mv.value, Kind: firstNonEmpty(m.Kind, tempKind(name, "", false)), UpperCritical: m.UpperCritical})
	case kind == "ThermalMetrics" && at(0, "TemperatureReadingsCelsius") && chassisOf(res) != "":
		name := firstNonEmpty(m.Name, "TemperatureReadingsCelsius/"+t[1])
		c().temps = append(c().temps, Temperature{Name: name, Celsius: mv.value, Kind: firstNonEmpty(m.Kind, tempKind(name, "", false))})
	case kind == "Thermal" && at(0, "Fans") && at(2, "Reading") && chassisOf(res) != "":
		f := Fan{Name: firstNonEmpty(m.Name, "Fans/"+t[1])}
		if m.Percent {
			f.Percent = mv.value
		} else {
			f.RPM = mv.value
		}
		c().fans = append(c().fans, f)
	case kind == "MemoryMetrics" && len(t) == 2:
		switch t[1] {
		case "CorrectableECCErrorCount":
			if t[0] == "LifeTime" {
				s.memCorr = max(s.memCorr, 0) + int64(mv.value)
			}
		case "UncorrectableECCErrorCount":
			if t[0] == "LifeTime" {
				s.memUncorr = max(s.memUncorr, 0) + int64(mv.value)
			}
		}
	case len(t) == 0 && strings.Contains(res, "/Sensors/") && chassisOf(res) != "":
		parseMetricSensor(c(), res, mv.value, m)
	}
}

// parseMetricSensor places a report value that names a Sensor (HGX reports
// do: ".../Sensors/HGX_GPU_SXM_1_TEMP_0"), by what the probe learned of the
// sensor, else by its Id.
func parseMetricSensor(c *chassisSample, res string, v float64, m metricMeta) {
	id := lastSegment(res)
	name := firstNonEmpty(m.Name, id)
	l := strings.ToLower(id)
	switch {
	case m.Kind != "" || strings.Contains(l, "temp"):
		c.temps = append(c.temps, Temperature{Name: name, Celsius: v, Kind: firstNonEmpty(m.Kind, tempKind(id, "", false)), UpperCritical: m.UpperCritical})
	case (strings.Contains(l, "totalpower") || strings.Contains(l, "total_power")) && !strings.Contains(l, "gpu"):
		if c.wattsFrom != "PowerControl" && c.wattsFrom != "EnvironmentMetrics" {
			c.watts, c.hasWatts, c.wattsFrom = c.watts+v, true, "Sensor"
		}
	case strings.Contains(l, "fan"):
		f := Fan{Name: name}
		if m.Percent {
			f.Percent = v
		} else {
			f.RPM = v
		}
		c.fans = append(c.fans, f)
	}
}

func psuIndex(c *chassisSample, key, name string) int {
	for i := range c.psus {
		if c.psus[i].key == key {
			return i
		}
	}
	c.psus = append(c.psus, psuSample{key: key, PSUReading: PSUReading{Name: name}})
	return len(c.psus) - 1
}
