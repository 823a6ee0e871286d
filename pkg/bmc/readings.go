package bmc

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stmcginnis/gofish"
)

// Readings is one poll of a BMC's sensors, for fleet telemetry: power,
// temperatures, fans, PSUs and the health of drives, GPUs and memory.
// Zero values mean unknown, never a reading of 0 (see NodeWatts).
type Readings struct {
	Taken      time.Time
	PowerState string // of the System (Config.SystemID, else the first): On, Off, ...
	// NodeWatts is the machine's power draw: the sum over its chassis that
	// report one (a chassis inside another that reports is left out). 0 is
	// unknown: a BMC reporting 0 W while the host is On has a sensor fault,
	// which Problems names; it is never passed on as a reading.
	NodeWatts     float64
	PSUs          []PSUReading
	PSURedundancy string // "OK", "Lost", or "" where the BMC shows no redundancy group
	Temperatures  []Temperature
	Fans          []Fan
	// MemoryCorrectable and MemoryUncorrectable are the DIMMs' ECC error
	// counts (MemoryMetrics LifeTime, summed); -1 where the BMC does not
	// report them or reading them would cost a request per DIMM (they are
	// read only with $expand, or from a telemetry report).
	MemoryCorrectable, MemoryUncorrectable int64
	Drives                                 []DriveHealth
	GPUs                                   []GPUHealth // GPUs the Systems' Processors list (not HPE OEM-only ones)
	Path                                   string      // the path that answered (Path*), "" when none gave readings
	Requests                               int         // HTTP requests this call sent (retries and a probe included)
	Problems                               []string    // what could not be read, and why
}

// PSUReading is one power supply. Absent bays are listed (State Absent),
// so that a PSU pulled between two polls shows.
type PSUReading struct {
	Name                                string
	InputWatts, OutputWatts, RatedWatts float64 // 0: not reported
	Health, State                       string
}

// Temperature is one temperature sensor. Kind is TempInlet, TempExhaust,
// TempCPU, TempGPU or TempOther, from the sensor's PhysicalContext or
// name. Where the BMC has more than one chassis with readings, names are
// "CHASSIS/NAME".
type Temperature struct {
	Name          string
	Celsius       float64
	Kind          string
	UpperCritical float64 // 0: no threshold reported
}

// Fan is one fan: RPM or Percent, whichever the BMC reports (both where it
// reports both).
type Fan struct {
	Name         string
	RPM, Percent float64
	Health       string
}

// DriveHealth is one drive's Status.Health and FailurePredicted.
type DriveHealth struct {
	Name, Health     string
	PredictedFailure bool
}

// GPUHealth is one GPU's Status.Health.
type GPUHealth struct{ Name, Health string }

// The paths Readings reads a BMC by, cheapest first.
const (
	// PathTelemetry reads TelemetryService MetricReports: one GET holds
	// many readings (NVIDIA HGX BMCs). It gives numbers, not health states.
	PathTelemetry = "telemetry"
	// PathExpand reads every chassis' Power and Thermal in one GET of the
	// Chassis collection with $expand (.($levels=2)), or one per chassis
	// where the BMC expands one level only.
	PathExpand = "expand"
	// PathLegacy reads Chassis Power (PowerControl, PowerSupplies) and
	// Thermal (Temperatures, Fans): two GETs per chassis.
	PathLegacy = "power-thermal"
	// PathSubsystems reads EnvironmentMetrics, PowerSubsystem and
	// ThermalSubsystem (Redfish 2020.4 and later).
	PathSubsystems = "subsystems"
	// PathSensors reads the chassis' Sensors: one GET per collection with
	// $expand, else one per sensor (probed only when nothing cheaper gave
	// a reading).
	PathSensors = "sensors"
)

// Readings reads the BMC's sensors the cheapest way that works for this
// BMC. The first call probes the paths in order (PathTelemetry,
// PathExpand, PathLegacy, PathSubsystems, PathSensors), taking the first
// that gives both a power draw and temperatures (else the one that gave
// most) and remembering it; later calls use it alone, and probe again only
// when it fails (a 404, a bad answer, nothing read). Drive, GPU and memory
// health are found once the same way. A BMC that does not answer (timeout,
// refused, busy, password refused) is an error and is not probed again.
// Parts that cannot be read are Problems; the call fails only when the BMC
// fails. Requests go through the client's session and in-flight limit.
func (c *Client) Readings(ctx context.Context) (Readings, error) {
	sent := new(atomic.Int64)
	ctx = context.WithValue(ctx, countKey{}, sent)
	r := Readings{Taken: c.cfg.Now().UTC(), MemoryCorrectable: -1, MemoryUncorrectable: -1}
	api, err := c.gf(ctx)
	if err != nil {
		return r, err
	}
	var (
		state            string
		stateErr, envErr error
		plan             *readingPlan
		env, health      *sample
		notes            []string
	)
	parallel(
		func() { state, stateErr = c.PowerState(ctx) },
		func() { plan, env, notes, envErr = c.environment(api) },
		func() { health = c.health(api) },
	)
	r.Requests = int(sent.Load())
	r.Problems = append(r.Problems, notes...)
	switch {
	case ctx.Err() != nil:
		return r, c.wrap("reading sensors", ctx.Err())
	case envErr != nil:
		return r, c.wrap("reading sensors", envErr)
	case stateErr != nil && down(stateErr):
		return r, stateErr
	case stateErr != nil:
		r.Problems = append(r.Problems, "power state: "+problemDetail(stateErr))
	}
	r.PowerState = state
	if plan != nil {
		r.Path = plan.path
	}
	r.finish(env, health)
	return r, nil
}

// down reports an error that says the BMC itself is not answering (or not
// letting ingot in), as opposed to a path that does not work.
func down(err error) bool {
	if err == nil {
		return false
	}
	switch kindOf(err) {
	case KindTimeout, KindUnreachable, KindAuth, KindCanceled, KindBusy:
		return true
	}
	return false
}

// kindOf classifies any error (gofish's too) as wrapErr would.
func kindOf(err error) Kind { return wrapErr("", "", err).(*Error).Kind }

// environment reads power, temperatures, fans and PSUs by the remembered
// plan, probing for one when there is none or it failed.
func (c *Client) environment(api *gofish.APIClient) (*readingPlan, *sample, []string, error) {
	c.mu.Lock()
	p := c.plan
	c.mu.Unlock()
	var notes []string
	if p != nil {
		s, failed, err := c.runPlan(api, p)
		if err != nil {
			return p, s, nil, err
		}
		if failed == "" {
			return p, s, nil, nil
		}
		notes = append(notes, fmt.Sprintf("the remembered readings path %q failed (%s); probed again", p.path, failed))
	}
	c.probing.Lock()
	defer c.probing.Unlock()
	c.mu.Lock()
	q := c.plan
	c.mu.Unlock()
	if q != nil && q != p { // another caller probed meanwhile
		if s, failed, err := c.runPlan(api, q); err != nil || failed == "" {
			return q, s, notes, err
		}
	}
	q, s, err := c.probe(api)
	if err != nil {
		return nil, newSample(), notes, err
	}
	c.mu.Lock()
	c.plan = q
	c.mu.Unlock()
	return q, s, notes, nil
}

// runPlan reads p once. failed says why p no longer works ("" when it
// does); err is a BMC that does not answer.
func (c *Client) runPlan(api *gofish.APIClient, p *readingPlan) (*sample, string, error) {
	docs, errs := fetch(api, p.sources)
	s := newSample()
	var failed []string
	for i, src := range p.sources {
		if errs[i] != nil {
			if down(errs[i]) {
				return s, "", errs[i]
			}
			failed = append(failed, partName(src.uri)+": "+problemDetail(errs[i]))
			continue
		}
		apply(s, src, docs[i], p.meta)
	}
	if len(failed) == 0 && !s.anything() {
		failed = append(failed, "it read nothing")
	}
	return s, strings.Join(failed, "; "), nil
}

// finish turns the samples into r: names, sums, redundancy, the 0 W rule.
func (r *Readings) finish(env, health *sample) {
	var with []*chassisSample
	for _, c := range env.chassis {
		if c.hasWatts || len(c.temps) > 0 || len(c.fans) > 0 || len(c.psus) > 0 {
			with = append(with, c)
		}
	}
	multi := len(with) > 1
	watts, hasWatts := 0.0, false
	lost, groups := false, false
	for _, c := range with {
		name := func(n string) string {
			if multi && !namedFor(n, c.id) {
				return c.id + "/" + n
			}
			return n
		}
		for _, t := range c.temps {
			t.Name = name(t.Name)
			r.Temperatures = append(r.Temperatures, t)
		}
		for _, f := range c.fans {
			f.Name = name(f.Name)
			r.Fans = append(r.Fans, f)
		}
		for _, p := range c.psus {
			p.Name = name(p.Name)
			r.PSUs = append(r.PSUs, p.PSUReading)
		}
		if c.hasWatts && !reportingParent(env, c) {
			watts += c.watts
			hasWatts = true
		}
		for _, g := range c.groups {
			groups = true
			lost = lost || g.lost(c.psus)
		}
	}
	switch {
	case lost:
		r.PSURedundancy = "Lost"
	case groups:
		r.PSURedundancy = "OK"
	}
	via := ""
	if r.Path != "" {
		via = " (path " + r.Path + ")"
	}
	switch {
	case r.Path == "":
		r.Problems = append(r.Problems, "no sensor readings: the BMC answers none of TelemetryService MetricReports, Chassis Power/Thermal, EnvironmentMetrics/PowerSubsystem/ThermalSubsystem or Sensors")
	case !hasWatts:
		r.Problems = append(r.Problems, "no power draw reading: the BMC reports no node power"+via)
	case watts == 0 && r.PowerState != "Off":
		r.Problems = append(r.Problems, fmt.Sprintf("the BMC reports 0 W while the system is %s: a sensor fault, not a reading%s", firstNonEmpty(r.PowerState, "in an unknown power state"), via))
	default:
		r.NodeWatts = watts
	}
	r.MemoryCorrectable, r.MemoryUncorrectable = env.memCorr, env.memUncorr
	if health != nil {
		if health.memCorr >= 0 || health.memUncorr >= 0 {
			r.MemoryCorrectable, r.MemoryUncorrectable = health.memCorr, health.memUncorr
		}
		r.Drives, r.GPUs = health.drives, health.gpus
		r.Problems = append(r.Problems, health.problems...)
	}
}

// namedFor reports whether a reading's name already starts with its
// chassis' Id ("HGX_GPU_SXM_1 Temp 0" of chassis HGX_GPU_SXM_1).
func namedFor(name, id string) bool {
	rest, ok := strings.CutPrefix(name, id)
	return ok && (rest == "" || strings.ContainsAny(rest[:1], " _-/."))
}

// reportingParent reports whether c sits in a chassis that reports a power
// draw too (its watts are part of that one). Containment is followed a few
// levels up, never round a loop.
func reportingParent(s *sample, c *chassisSample) bool {
	p := c.containedBy
	for range 8 {
		pc, ok := s.byURI[strings.TrimSuffix(p, "/")]
		if p == "" || !ok || pc == c {
			return false
		}
		if pc.hasWatts {
			return true
		}
		p = pc.containedBy
	}
	return false
}

// lost reports a redundancy group that lost its redundancy: its health says
// so, or no more of its PSUs work than it needs.
func (g redundancyGroup) lost(psus []psuSample) bool {
	if g.health == "Warning" || g.health == "Critical" {
		return true
	}
	if g.minNeeded <= 0 || len(g.members) == 0 {
		return false
	}
	known, working := 0, 0
	for _, m := range g.members {
		for _, p := range psus {
			if p.key != m {
				continue
			}
			known++
			if (p.State == "" || p.State == "Enabled" || p.State == "StandbySpare") && p.Health != "Critical" {
				working++
			}
		}
	}
	return known > 0 && working <= g.minNeeded
}

// ForgetReadingsPath drops the remembered readings path and health parts:
// the next Readings probes again (after a BMC firmware update, say).
func (c *Client) ForgetReadingsPath() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.plan, c.healthPlan = nil, nil
}
