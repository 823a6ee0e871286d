package telemetry

import (
	"fmt"
	"strings"
	"time"
)

// Alert states.
const (
	Pending = "pending" // the condition holds, not yet for Limits.For
	Firing  = "firing"
)

// Alert is one rule's state on one machine.
type Alert struct {
	Rule      string    `json:"rule"`
	Machine   string    `json:"machine"` // machine ID
	Name      string    `json:"name"`    // machine name
	Rack      string    `json:"rack,omitempty"`
	Recipe    string    `json:"recipe,omitempty"`
	Severity  string    `json:"severity"` // warning or critical
	State     string    `json:"state"`
	Reading   string    `json:"reading"`
	Threshold string    `json:"threshold"`
	Summary   string    `json:"summary"`
	Action    string    `json:"action"`
	Since     time.Time `json:"since"` // the condition first held
	FiredAt   time.Time `json:"fired_at,omitzero"`
	// Clearing is when the condition was last seen gone while firing: the
	// alert clears once it stays gone for Limits.For (hysteresis in time
	// beside the rules' hysteresis in value).
	Clearing time.Time `json:"clearing,omitzero"`
	// Silenced: the machine is in a job or in maintenance; the alert is
	// listed but neither fires nor is delivered.
	Silenced bool `json:"silenced,omitempty"`
	// SilencedBy and SilencedUntil: an operator silenced the alert
	// (Service.Silence): listed, not delivered to the notifiers.
	SilencedBy    string    `json:"silenced_by,omitempty"`
	SilencedUntil time.Time `json:"silenced_until,omitzero"`
}

// Transition is an alert that fired or cleared in one evaluation.
type Transition struct {
	Alert Alert
	Fired bool // false: cleared
}

// rule judges one condition. on: the condition holds; off: it is gone
// past the rule's hysteresis (between the two the state stays).
type rule struct {
	name, severity, summary, action string
	eval                            func(s Sample, l Limits, m *memory) (on, off bool, reading, threshold string)
}

// memory is what a rule needs beyond one sample: the correctable-error
// count at the start of the current day's window.
type memory struct {
	corrBase  int64
	corrSince time.Time
}

// Rules are every alert rule, in the order they are listed.
var rules = []rule{
	{"bmc-unreachable", "critical", "the BMC does not answer", "check the BMC's network and power; ingot sees nothing of this machine meanwhile",
		func(s Sample, l Limits, _ *memory) (bool, bool, string, string) {
			return !s.Up, s.Up, orDash(s.Err), "answers within 30 s"
		}},
	{"inlet-temperature", "critical", "inlet air too hot", "check the rack's cooling and airflow (blanking panels, hot-aisle containment, CRAC) before the GPUs throttle",
		func(s Sample, l Limits, _ *memory) (bool, bool, string, string) {
			if !s.Up || s.InletC == 0 {
				return false, true, "-", ""
			}
			return s.InletC > l.InletMaxC, s.InletC <= l.InletMaxC-2, fmt.Sprintf("inlet %.1f °C", s.InletC), fmt.Sprintf("%.0f °C", l.InletMaxC)
		}},
	{"gpu-temperature", "critical", "a GPU too hot", "check fans and airflow; drain the node if it keeps throttling",
		func(s Sample, l Limits, _ *memory) (bool, bool, string, string) {
			if !s.Up || s.GPUMaxC == 0 {
				return false, true, "-", ""
			}
			return s.GPUMaxC > l.GPUMaxC, s.GPUMaxC <= l.GPUMaxC-3, fmt.Sprintf("hottest GPU %.1f °C", s.GPUMaxC), fmt.Sprintf("%.0f °C", l.GPUMaxC)
		}},
	{"fan-failed", "critical", "a fan failed", "replace the fan; the node runs hot meanwhile",
		func(s Sample, _ Limits, _ *memory) (bool, bool, string, string) {
			return s.Up && len(s.FansFailed) > 0, s.Up && len(s.FansFailed) == 0, "failed: " + joinOrNone(s.FansFailed), "none failed"
		}},
	{"psu-redundancy-lost", "critical", "PSU redundancy lost", "replace or reseat the supply, check its feed; one more failure takes the node down",
		func(s Sample, _ Limits, _ *memory) (bool, bool, string, string) {
			return s.Up && s.PSURedundancyLost, s.Up && !s.PSURedundancyLost, "redundancy lost", "redundant"
		}},
	{"drive-predicted-failure", "warning", "a drive predicts its failure", "replace the drive at the next drain",
		func(s Sample, _ Limits, _ *memory) (bool, bool, string, string) {
			return s.Up && len(s.DrivesPredicted) > 0, s.Up && len(s.DrivesPredicted) == 0, joinOrNone(s.DrivesPredicted), "no predicted failure"
		}},
	{"gpu-health", "critical", "a GPU reports bad health", "drain the node and run its burn-in (ingot reimage); replace the GPU if it fails",
		func(s Sample, _ Limits, _ *memory) (bool, bool, string, string) {
			return s.Up && len(s.GPUsUnhealthy) > 0, s.Up && len(s.GPUsUnhealthy) == 0, joinOrNone(s.GPUsUnhealthy), "all OK"
		}},
	{"watts-above-load", "warning", "drawing more than the class's load watts", "check the node's power (a failing PSU, a GPU stuck at full power) and the rack's headroom",
		func(s Sample, l Limits, _ *memory) (bool, bool, string, string) {
			if !s.Up || s.Watts == 0 || l.LoadWatts == 0 {
				return false, true, "-", ""
			}
			max := l.LoadWatts * (1 + l.WattsMarginPct/100)
			return s.Watts > max, s.Watts <= max*0.95, fmt.Sprintf("%.0f W", s.Watts), fmt.Sprintf("%.0f W (load_watts %.0f + %.0f%%)", max, l.LoadWatts, l.WattsMarginPct)
		}},
	{"power-sensor", "warning", "0 W while the host is on: a power sensor fault", "check the BMC's power sensors (a firmware update or a reseat); power and cost reports skip this node meanwhile",
		func(s Sample, _ Limits, _ *memory) (bool, bool, string, string) {
			fault := s.Up && s.PowerOn && s.Watts == 0
			return fault, !fault, "0 W, power on", "> 0 W"
		}},
	{"memory-errors", "warning", "correctable memory errors climbing", "find the DIMM in the BMC's event log; replace it at the next drain",
		func(s Sample, l Limits, m *memory) (bool, bool, string, string) {
			if !s.Up || s.MemCorrectable < 0 {
				return false, true, "-", ""
			}
			if m.corrSince.IsZero() || s.Time.Sub(m.corrSince) >= 24*time.Hour || s.MemCorrectable < m.corrBase {
				m.corrBase, m.corrSince = s.MemCorrectable, s.Time
			}
			n := s.MemCorrectable - m.corrBase
			return n > l.CorrectablePerDay, n <= l.CorrectablePerDay, fmt.Sprintf("%d since %s", n, m.corrSince.UTC().Format("15:04")), fmt.Sprintf("%d a day", l.CorrectablePerDay)
		}},
	{"uncorrectable-memory", "critical", "uncorrectable memory errors", "drain the node now and replace the DIMM",
		func(s Sample, _ Limits, _ *memory) (bool, bool, string, string) {
			on := s.Up && s.MemUncorrectable > 0
			return on, s.Up && s.MemUncorrectable <= 0, fmt.Sprintf("%d", max(s.MemUncorrectable, 0)), "0"
		}},
}

// RuleNames lists the rules, for documentation and the Prometheus rules.
func RuleNames() []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.name
	}
	return out
}

// nodeState is one machine's alerts and rule memory.
type nodeState struct {
	alerts map[string]*Alert
	mem    memory
}

// evaluate judges s against every rule and returns what fired or cleared.
// An alert fires once its condition held for l.For and clears once it has
// been gone (past the rule's hysteresis) for l.For. While silenced nothing
// fires (a pending alert waits) and nothing is delivered, but a firing
// alert still clears.
func (n *nodeState) evaluate(s Sample, l Limits, silenced bool) []Transition {
	if n.alerts == nil {
		n.alerts = map[string]*Alert{}
	}
	var out []Transition
	for _, r := range rules {
		on, off, reading, threshold := r.eval(s, l, &n.mem)
		a := n.alerts[r.name]
		switch {
		case a == nil && on:
			a = &Alert{Rule: r.name, Machine: s.Machine, Severity: r.severity, State: Pending, Summary: r.summary, Action: r.action, Since: s.Time}
			n.alerts[r.name] = a
		case a == nil:
			continue
		}
		a.Reading, a.Threshold, a.Silenced = reading, threshold, silenced
		switch a.State {
		case Pending:
			switch {
			case !on:
				delete(n.alerts, r.name)
			case silenced:
				a.Since = time.Time{} // the hold starts again when the silence ends
			case a.Since.IsZero():
				a.Since = s.Time
				if l.For > 0 {
					break
				}
				fallthrough
			case s.Time.Sub(a.Since) >= l.For:
				a.State, a.FiredAt = Firing, s.Time
				out = append(out, Transition{Alert: *a, Fired: true})
			}
		case Firing:
			switch {
			case !off:
				a.Clearing = time.Time{}
			case a.Clearing.IsZero():
				a.Clearing = s.Time
				fallthrough
			default:
				if s.Time.Sub(a.Clearing) >= l.For {
					delete(n.alerts, r.name)
					out = append(out, Transition{Alert: *a, Fired: false})
				}
			}
		}
	}
	return out
}

// Message is the event text of a transition: the rule, the reading, the
// threshold and what to do.
func (t Transition) Message() string {
	a := t.Alert
	if t.Fired {
		return fmt.Sprintf("alert %s FIRING (%s): %s: %s, limit %s, since %s; what to do: %s",
			a.Rule, a.Severity, a.Summary, a.Reading, a.Threshold, a.Since.UTC().Format(time.RFC3339), a.Action)
	}
	return fmt.Sprintf("alert %s resolved: %s (now %s, limit %s), firing since %s",
		a.Rule, a.Summary, a.Reading, a.Threshold, a.FiredAt.UTC().Format(time.RFC3339))
}

func joinOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
