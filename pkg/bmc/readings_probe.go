package bmc

// This file finds how to read a BMC: the plans of each path, and the
// probe that tries them in order.

import (
	"fmt"
	"io"
	"strings"

	"github.com/stmcginnis/gofish"
)

// maxProbeReports bounds the metric reports (and the resources their
// values name) a telemetry probe reads one by one.
const maxProbeReports = 16

// srcKind says how to read a source's document.
type srcKind int

const (
	srcReport            srcKind = iota // a MetricReport
	srcChassisCollection                // the Chassis collection expanded two levels
	srcChassisExpanded                  // one chassis expanded one level
	srcPower
	srcThermal
	srcEnvironment
	srcPowerSubsystem
	srcPSUs // a PowerSupplies collection, members (and their Metrics) inline
	srcPSU
	srcPSUMetrics
	srcThermalMetrics
	srcFans // a Fans collection, members inline
	srcFan
	srcSensors // a Sensors collection, members inline
	srcSensor
	srcGPUs
	srcDrives
	srcSimpleStorage
	srcMemory
)

// source is one GET of a plan.
type source struct {
	uri     string  // path and query
	kind    srcKind // how to read it
	chassis string  // the chassis it belongs to, where it is one chassis'
	parent  string  // srcPSUMetrics: the PSU's URI
	prefix  string  // health: the name prefix of its parts ("HGX_Baseboard_0/")
}

// readingPlan is how Readings reads one BMC, found by a probe and kept on
// the Client until it fails.
type readingPlan struct {
	path    string
	sources []source
	meta    map[string]metricMeta // telemetry: names and kinds by metricKey
}

// healthPlan is how Readings reads drive, GPU and memory health.
type healthPlan struct{ sources []source }

// expandSupport is what the service root says of $expand.
type expandSupport struct {
	ok     bool   // expands subordinate resources at all
	opt    string // "." or "*"
	levels bool   // honours $levels
	max    int
}

func (e expandSupport) query(levels int) string {
	if levels > 1 && e.levels && e.max >= levels {
		return fmt.Sprintf("?$expand=%s($levels=%d)", e.opt, levels)
	}
	return "?$expand=" + e.opt
}

func (e expandSupport) deep() bool { return e.ok && e.levels && e.max >= 2 }

func expandOf(api *gofish.APIClient) expandSupport {
	q := api.Service.ProtocolFeaturesSupported.ExpandQuery
	e := expandSupport{levels: q.Levels, max: int(q.MaxLevels)}
	switch {
	case q.NoLinks:
		e.ok, e.opt = true, "."
	case q.ExpandAll:
		e.ok, e.opt = true, "*"
	}
	return e
}

// fetch GETs every source at once (the client's MaxInFlight bounds how many
// are on the wire).
func fetch(api *gofish.APIClient, srcs []source) ([]doc, []error) {
	docs := make([]doc, len(srcs))
	errs := make([]error, len(srcs))
	fns := make([]func(), len(srcs))
	for i, s := range srcs {
		fns[i] = func() { docs[i], errs[i] = getDoc(api, s.uri) }
	}
	parallel(fns...)
	return docs, errs
}

// getDoc GETs one resource, decoded (numbers kept exact).
func getDoc(api *gofish.APIClient, uri string) (doc, error) {
	resp, err := api.Get(uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	d, err := decodeJSON(b)
	if err != nil {
		return nil, &Error{Kind: KindBadResponse, Op: "GET " + uri, Err: fmt.Errorf("expected a JSON object: %w", err)}
	}
	return d, nil
}

// apply reads one source's document into s.
func apply(s *sample, src source, d doc, meta map[string]metricMeta) {
	c := func() *chassisSample { return s.ch(src.chassis) }
	switch src.kind {
	case srcReport:
		parseReport(s, d, meta)
	case srcChassisCollection:
		for _, ch := range members(d) {
			parseExpandedChassis(s, ch)
		}
	case srcChassisExpanded:
		parseExpandedChassis(s, d)
	case srcPower:
		parsePower(c(), d)
	case srcThermal:
		parseThermal(c(), d)
	case srcEnvironment:
		parseEnvironment(c(), d)
	case srcPowerSubsystem:
		parsePowerSubsystem(c(), d)
	case srcPSUs:
		for _, ps := range members(d) {
			parsePSU(c(), ps)
			if m := inline(ps, "Metrics"); m != nil {
				parsePSUMetrics(c(), strings.TrimSuffix(jstr(ps, "@odata.id"), "/"), m)
			}
		}
	case srcPSU:
		parsePSU(c(), d)
	case srcPSUMetrics:
		parsePSUMetrics(c(), src.parent, d)
	case srcThermalMetrics:
		parseThermalMetrics(c(), d)
	case srcFans:
		for _, f := range members(d) {
			parseFan(c(), f)
		}
	case srcFan:
		parseFan(c(), d)
	case srcSensors:
		for _, sn := range members(d) {
			parseSensor(c(), sn)
		}
	case srcSensor:
		parseSensor(c(), d)
	case srcGPUs:
		parseGPUs(s, d, src.prefix)
	case srcDrives:
		parseDrives(s, d, src.prefix)
	case srcSimpleStorage:
		parseSimpleStorage(s, d, src.prefix)
	case srcMemory:
		parseMemoryErrors(s, d)
	}
}

// candidate is a plan under trial during a probe, with what it read.
type candidate struct {
	plan  *readingPlan
	s     *sample
	score int
}

// probe tries the paths in order and returns the first complete one, else
// the best (nil when none read anything).
func (c *Client) probe(api *gofish.APIClient) (*readingPlan, *sample, error) {
	root, err := getDoc(api, "/redfish/v1/")
	if err != nil {
		if down(err) {
			return nil, nil, err
		}
		root = doc{}
	}
	exp := expandOf(api)
	var best candidate
	chassis := &chassisList{uri: jlink(root, "Chassis")}
	builders := []func() (*readingPlan, error){
		func() (*readingPlan, error) { return c.telemetryPlan(api, root, exp) },
		func() (*readingPlan, error) { return expandPlan(api, chassis, exp) },
		func() (*readingPlan, error) { return legacyPlan(api, chassis) },
		func() (*readingPlan, error) { return subsystemsPlan(api, chassis, exp) },
		func() (*readingPlan, error) { return sensorsPlan(api, chassis, exp, best.score == 0) },
	}
	for _, build := range builders {
		p, err := build()
		if err != nil {
			return nil, nil, err
		}
		if p == nil || len(p.sources) == 0 {
			continue
		}
		cand, err := evaluate(api, p)
		if err != nil {
			return nil, nil, err
		}
		if cand.score > best.score || best.plan == nil && cand.s.anything() {
			best = cand
		}
		if best.score == 3 {
			break
		}
	}
	if best.plan == nil {
		return nil, newSample(), nil
	}
	return best.plan, best.s, nil
}

// evaluate reads a candidate plan once, keeping the sources that answered
// (and, for per-resource sources, gave a reading).
func evaluate(api *gofish.APIClient, p *readingPlan) (candidate, error) {
	docs, errs := fetch(api, p.sources)
	kept := &readingPlan{path: p.path, meta: p.meta}
	s := newSample()
	for i, src := range p.sources {
		if errs[i] != nil {
			if down(errs[i]) {
				return candidate{}, errs[i]
			}
			continue
		}
		switch src.kind {
		case srcPower, srcThermal, srcSensor, srcReport, srcChassisExpanded:
			scratch := newSample()
			apply(scratch, src, docs[i], p.meta)
			if !scratch.anything() && scratch.memCorr < 0 && scratch.memUncorr < 0 {
				continue
			}
		}
		kept.sources = append(kept.sources, src)
		apply(s, src, docs[i], p.meta)
	}
	if !s.anything() {
		return candidate{plan: nil, s: s}, nil
	}
	return candidate{plan: kept, s: s, score: s.score()}, nil
}

// chassisList loads the Chassis collection and each chassis once per probe.
type chassisList struct {
	uri    string
	loaded bool
	uris   []string
	docs   []doc
	err    error
}

func (l *chassisList) load(api *gofish.APIClient) ([]string, []doc, error) {
	if l.loaded || l.uri == "" {
		return l.uris, l.docs, l.err
	}
	l.loaded = true
	coll, err := getDoc(api, l.uri)
	if err != nil {
		if down(err) {
			l.err = err
		}
		return nil, nil, l.err
	}
	for _, m := range members(coll) {
		l.uris = append(l.uris, jstr(m, "@odata.id"))
	}
	srcs := make([]source, len(l.uris))
	for i, u := range l.uris {
		srcs[i] = source{uri: u}
	}
	docs, errs := fetch(api, srcs)
	for i := range docs {
		if errs[i] != nil && down(errs[i]) {
			l.err = errs[i]
			return nil, nil, l.err
		}
	}
	l.docs = docs
	return l.uris, l.docs, nil
}

// downOnly passes on an error only when the BMC is down: a path that is
// missing is just not a candidate.
func downOnly(err error) error {
	if err != nil && down(err) {
		return err
	}
	return nil
}

// expandPlan reads every chassis' Power and Thermal inline: one GET of the
// collection where the BMC expands two levels, else one per chassis.
func expandPlan(api *gofish.APIClient, l *chassisList, exp expandSupport) (*readingPlan, error) {
	if !exp.ok || l.uri == "" {
		return nil, nil
	}
	p := &readingPlan{path: PathExpand}
	if exp.deep() {
		p.sources = []source{{uri: l.uri + exp.query(2), kind: srcChassisCollection}}
		return p, nil
	}
	uris, _, err := l.load(api)
	for _, u := range uris {
		p.sources = append(p.sources, source{uri: u + exp.query(1), kind: srcChassisExpanded, chassis: u})
	}
	return p, err
}

// legacyPlan reads each chassis' Power and Thermal.
func legacyPlan(api *gofish.APIClient, l *chassisList) (*readingPlan, error) {
	uris, docs, err := l.load(api)
	p := &readingPlan{path: PathLegacy}
	for i, d := range docs {
		if d == nil {
			continue
		}
		if u := jlink(d, "Power"); u != "" {
			p.sources = append(p.sources, source{uri: u, kind: srcPower, chassis: uris[i]})
		}
		if u := jlink(d, "Thermal"); u != "" {
			p.sources = append(p.sources, source{uri: u, kind: srcThermal, chassis: uris[i]})
		}
	}
	return p, err
}

// subsystemsPlan reads EnvironmentMetrics, PowerSubsystem (PSUs and their
// Metrics) and ThermalSubsystem (ThermalMetrics, Fans): collections with
// $expand where the BMC has it, else their members one by one.
func subsystemsPlan(api *gofish.APIClient, l *chassisList, exp expandSupport) (*readingPlan, error) {
	uris, docs, err := l.load(api)
	if err != nil {
		return nil, err
	}
	p := &readingPlan{path: PathSubsystems}
	add := func(s source) { p.sources = append(p.sources, s) }
	for i, d := range docs {
		ch := uris[i]
		if d == nil {
			continue
		}
		if u := jlink(d, "PowerSubsystem"); u != "" {
			ps, err := getDoc(api, u)
			if err != nil && down(err) {
				return nil, err
			}
			if ps != nil {
				add(source{uri: u, kind: srcPowerSubsystem, chassis: ch})
				if err := addMembers(api, jlink(ps, "PowerSupplies"), ch, exp, srcPSUs, srcPSU, add); err != nil {
					return nil, err
				}
			}
		}
		if u := jlink(d, "ThermalSubsystem"); u != "" {
			ts, err := getDoc(api, u)
			if err != nil && down(err) {
				return nil, err
			}
			if ts != nil {
				if m := jlink(ts, "ThermalMetrics"); m != "" {
					add(source{uri: m, kind: srcThermalMetrics, chassis: ch})
				}
				if err := addMembers(api, jlink(ts, "Fans"), ch, exp, srcFans, srcFan, add); err != nil {
					return nil, err
				}
			}
		}
		// Last: its power draw, and its fan speeds only where the
		// ThermalSubsystem listed no fans (they are the same fans).
		if u := jlink(d, "EnvironmentMetrics"); u != "" {
			add(source{uri: u, kind: srcEnvironment, chassis: ch})
		}
	}
	return p, nil
}

// addMembers adds a collection as one expanded source, or its members one
// by one (with each PSU's Metrics).
func addMembers(api *gofish.APIClient, coll, ch string, exp expandSupport, whole, each srcKind, add func(source)) error {
	if coll == "" {
		return nil
	}
	if exp.ok {
		levels := 1
		if whole == srcPSUs {
			levels = 2 // each PSU's Metrics
		}
		add(source{uri: coll + exp.query(levels), kind: whole, chassis: ch})
		return nil
	}
	d, err := getDoc(api, coll)
	if err != nil {
		return downOnly(err)
	}
	var ms []source
	for _, m := range members(d) {
		ms = append(ms, source{uri: jstr(m, "@odata.id"), kind: each, chassis: ch})
	}
	if each != srcPSU {
		for _, m := range ms {
			add(m)
		}
		return nil
	}
	psus, errs := fetch(api, ms)
	for i, m := range ms {
		if errs[i] != nil {
			if down(errs[i]) {
				return errs[i]
			}
			continue
		}
		add(m)
		if met := jlink(psus[i], "Metrics"); met != "" {
			add(source{uri: met, kind: srcPSUMetrics, chassis: ch, parent: strings.TrimSuffix(m.uri, "/")})
		}
	}
	return nil
}

// sensorsPlan reads the chassis' Sensors: expanded collections, or (only
// when perSensor: nothing cheaper read anything) each sensor.
func sensorsPlan(api *gofish.APIClient, l *chassisList, exp expandSupport, perSensor bool) (*readingPlan, error) {
	if !exp.ok && !perSensor {
		return nil, nil
	}
	uris, docs, err := l.load(api)
	if err != nil {
		return nil, err
	}
	p := &readingPlan{path: PathSensors}
	for i, d := range docs {
		u := jlink(d, "Sensors")
		if d == nil || u == "" {
			continue
		}
		if err := addMembers(api, u, uris[i], exp, srcSensors, srcSensor, func(s source) { p.sources = append(p.sources, s) }); err != nil {
			return nil, err
		}
	}
	return p, nil
}
