package web

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// machineFacts is what the grid shows of one machine beyond its record:
// from its latest inventory, its recipe, telemetry and its alerts.
type machineFacts struct {
	serial    string
	gpus      []gpuFact // from the inventory; nil without one
	expected  int       // GPUs the recipe expects
	sampled   bool      // a reading in the last 15 minutes
	watts     float64
	inletC    float64
	loadWatts float64 // the recipe's power.load_watts, 0 none
	inletMax  float64 // the recipe's inlet limit
	critical  []string
	warning   []string
	drift     string // ok, warn, bad, none
	driftNote string
}

type gpuFact struct {
	label  string
	status string // ok, warn, bad
	why    string
}

// recentReading is how old a reading may be for the grid to show it.
const recentReading = 15 * time.Minute

// gatherFacts reads, per machine, its latest inventory (through the
// facts cache) and what telemetry knows.
func (s *Server) gatherFacts(ctx context.Context, ms []machine.Machine) map[string]machineFacts {
	rc := &recipeCache{get: s.cfg.Recipes, m: map[string]*recipe.Recipe{}}
	samples, alerts := s.telemetryByMachine()
	now := s.cfg.Now()
	recipes := make([]*recipe.Recipe, len(ms))
	for i, m := range ms {
		recipes[i] = rc.of(m.Recipe)
	}
	s.facts.warm(ctx, s.cfg.Fleet, ms, recipes, now)
	out := make(map[string]machineFacts, len(ms))
	for i, m := range ms {
		f := machineFacts{drift: "none", driftNote: "no inventory yet"}
		r := recipes[i]
		lim := telemetry.LimitsOf(r)
		f.loadWatts, f.inletMax = lim.LoadWatts, lim.InletMaxC
		if r != nil {
			for _, g := range r.Hardware.GPUs {
				f.expected += g.Count
			}
		}
		if inv, ok := s.facts.get(ctx, s.cfg.Fleet, m, r, now); ok {
			f.serial, f.drift, f.driftNote = inv.serial, inv.drift, inv.driftNote
			f.gpus = gpuFacts(inv.gpus, samples[m.ID].GPUsUnhealthy)
		}
		if smp, ok := samples[m.ID]; ok && now.Sub(smp.Time) < recentReading && smp.Up {
			f.sampled, f.watts, f.inletC = true, smp.Watts, smp.InletC
		} else if s.cfg.Telemetry != nil {
			if bs := s.cfg.Telemetry.Aggregates().Window(m.ID, now.Add(-recentReading), now); len(bs) > 0 {
				b := bs[len(bs)-1]
				f.sampled, f.watts, f.inletC = true, b.MeanWatts(), b.MaxInletC()
			}
		}
		for _, a := range alerts[m.ID] {
			if a.State != telemetry.Firing {
				continue
			}
			if a.Severity == "critical" {
				f.critical = append(f.critical, a.Rule)
			} else {
				f.warning = append(f.warning, a.Rule)
			}
		}
		out[m.ID] = f
	}
	return out
}

// telemetryByMachine indexes the last samples and the alerts by machine.
func (s *Server) telemetryByMachine() (map[string]telemetry.Sample, map[string][]telemetry.Alert) {
	samples, alerts := map[string]telemetry.Sample{}, map[string][]telemetry.Alert{}
	if s.cfg.Telemetry == nil {
		return samples, alerts
	}
	for _, c := range s.cfg.Telemetry.Last() {
		samples[c.Machine.ID] = c.Sample
	}
	for _, a := range s.cfg.Telemetry.Alerts() {
		alerts[a.Machine] = append(alerts[a.Machine], a)
	}
	return samples, alerts
}

// gpuFacts judges each GPU: bad when its health is not OK or telemetry
// names it unhealthy, warn when its PCIe link runs below its maximum.
func gpuFacts(gpus []machine.GPU, unhealthy []string) []gpuFact {
	out := []gpuFact{}
	for i, g := range gpus {
		f := gpuFact{label: cmp.Or(g.Slot, g.PCIAddress, fmt.Sprintf("GPU %d", i)), status: "ok"}
		sick := slices.ContainsFunc(unhealthy, func(u string) bool {
			return u != "" && (u == g.Slot || u == g.Serial || strings.Contains(u, g.PCIAddress) && g.PCIAddress != "")
		})
		switch {
		case sick || g.Health != "" && !strings.EqualFold(g.Health, "ok"):
			f.status, f.why = "bad", "health "+cmp.Or(g.Health, "reported unhealthy by the BMC")
		case degraded(g.LinkCurrent, g.LinkMax):
			f.status, f.why = "warn", fmt.Sprintf("PCIe link %s of %s", linkText(g.LinkCurrent), linkText(g.LinkMax))
		}
		out = append(out, f)
	}
	return out
}

func degraded(cur, max machine.PCIeLink) bool {
	return max.Gen > 0 && cur.Gen > 0 && cur.Gen < max.Gen || max.Width > 0 && cur.Width > 0 && cur.Width < max.Width
}

func linkText(l machine.PCIeLink) string {
	if l.Gen == 0 && l.Width == 0 {
		return "-"
	}
	return fmt.Sprintf("Gen%d x%d", l.Gen, l.Width)
}

// driftOf summarizes a firmware plan: bad when a component blocks the
// node (off its pin under update or block, or missing), warn when one is
// off its pin under warn, ok when every pinned one is at its pin.
func driftOf(p firmware.Plan) (string, string) {
	var bad, warn []string
	pinned := 0
	for _, e := range p.Entries {
		switch {
		case e.Action == firmware.ActionUnpinned:
			continue
		case e.Action == firmware.ActionWarn:
			warn = append(warn, e.Component)
		case e.Action != firmware.ActionNone:
			bad = append(bad, e.Component)
		}
		pinned++
	}
	switch {
	case len(bad) > 0:
		return "bad", fmt.Sprintf("off its pin: %s", strings.Join(bad, ", "))
	case len(warn) > 0:
		return "warn", fmt.Sprintf("off its pin (warn): %s", strings.Join(warn, ", "))
	case pinned == 0:
		return "none", "no firmware pins"
	}
	return "ok", fmt.Sprintf("%d components at their pins", pinned)
}

// rackGrid is one rack's row of cells.
type rackGrid struct {
	Name    string
	Summary string
	Cells   []gridCell
}

// gridCell is one machine: its colour class, what it says to a screen
// reader and on hover, and one pip per GPU.
type gridCell struct {
	Name, URL, Class, Label string
	Pips                    []pip
}

type pip struct{ Class, Label string }

// buildGrid lays the machines out by rack (name order), each rack's
// machines by their index in it, coloured for view. It is pure.
func buildGrid(ms []machine.Machine, facts map[string]machineFacts, view string) []rackGrid {
	byRack := map[string][]machine.Machine{}
	for _, m := range ms {
		byRack[rackOf(m)] = append(byRack[rackOf(m)], m)
	}
	var out []rackGrid
	for _, name := range slices.Sorted(mapKeys(byRack)) {
		rms := byRack[name]
		slices.SortFunc(rms, func(a, b machine.Machine) int {
			return cmp.Or(cmp.Compare(a.Index, b.Index), strings.Compare(a.Name, b.Name))
		})
		g := rackGrid{Name: name}
		worst := map[string]int{}
		for _, m := range rms {
			c := cellFor(m, facts[m.ID], view)
			worst[strings.TrimPrefix(c.Class, "c-")]++
			g.Cells = append(g.Cells, c)
		}
		g.Summary = rackSummary(len(rms), worst)
		out = append(out, g)
	}
	return out
}

func rackSummary(n int, classes map[string]int) string {
	parts := []string{fmt.Sprintf("%d machines", n)}
	for _, k := range []string{"bad", "warn", "busy", "hot", "high"} {
		if classes[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", classes[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

// cellFor colours one machine for the view and writes its label.
func cellFor(m machine.Machine, f machineFacts, view string) gridCell {
	c := gridCell{Name: m.Name, URL: machineURL(m.Name)}
	status, why := worstStatus(m, f)
	label := []string{m.Name, string(m.State)}
	if why != "" {
		label = append(label, why)
	}
	switch view {
	case "power":
		c.Class, label = "c-"+powerClass(f), append(label, wattsText(f))
	case "inlet":
		c.Class, label = "c-"+inletClass(f), append(label, inletText(f))
	case "drift":
		c.Class, label = "c-d"+f.drift, append(label, "firmware: "+f.driftNote)
	default:
		c.Class = "c-" + status
	}
	c.Pips = pipsFor(m, f)
	c.Label = strings.Join(label, "; ")
	return c
}

// worstStatus is a machine's worst condition: failed, a critical alert or
// a bad GPU (bad); a warning alert, a degraded link, a missing GPU
// (warn); a job at work (busy); ready (ok); otherwise idle.
func worstStatus(m machine.Machine, f machineFacts) (string, string) {
	var bad, warn []string
	if m.State == machine.StateFailed {
		bad = append(bad, "failed")
	}
	if len(f.critical) > 0 {
		bad = append(bad, "alerts "+strings.Join(f.critical, ", "))
	}
	if len(f.warning) > 0 {
		warn = append(warn, "alerts "+strings.Join(f.warning, ", "))
	}
	for _, g := range f.gpus {
		switch g.status {
		case "bad":
			bad = append(bad, g.label+" "+g.why)
		case "warn":
			warn = append(warn, g.label+" "+g.why)
		}
	}
	if f.gpus != nil && len(f.gpus) < f.expected {
		warn = append(warn, fmt.Sprintf("%d of %d GPUs seen", len(f.gpus), f.expected))
	}
	switch {
	case len(bad) > 0:
		return "bad", strings.Join(append(bad, warn...), "; ")
	case len(warn) > 0:
		return "warn", strings.Join(warn, "; ")
	}
	switch m.State {
	case machine.StateReady:
		return "ok", ""
	case machine.StateInspecting, machine.StateProvisioning, machine.StateVerifying, machine.StateReimaging:
		return "busy", ""
	}
	return "idle", ""
}

// pipsFor gives one pip per GPU the inventory lists, plus a missing one
// for each GPU the recipe expects and the inventory lacks; without an
// inventory, the recipe's count in grey.
func pipsFor(m machine.Machine, f machineFacts) []pip {
	var out []pip
	for _, g := range f.gpus {
		out = append(out, pip{Class: "p-" + g.status, Label: g.label})
	}
	n := len(f.gpus)
	for ; n < f.expected; n++ {
		if f.gpus == nil {
			out = append(out, pip{Class: "p-none", Label: "not inventoried"})
		} else {
			out = append(out, pip{Class: "p-missing", Label: "missing"})
		}
	}
	return out
}

// powerClass grades the draw against the recipe's load watts (or, with
// none, in absolute steps).
func powerClass(f machineFacts) string {
	if !f.sampled || f.watts <= 0 {
		return "none"
	}
	frac := f.watts / cmp.Or(f.loadWatts, 10000)
	switch {
	case frac > 1:
		return "high"
	case frac > 0.75:
		return "p3"
	case frac > 0.5:
		return "p2"
	case frac > 0.25:
		return "p1"
	}
	return "p0"
}

func inletClass(f machineFacts) string {
	if !f.sampled || f.inletC <= 0 {
		return "none"
	}
	switch d := f.inletMax - f.inletC; {
	case d < 0:
		return "hot"
	case d < 3:
		return "t3"
	case d < 8:
		return "t2"
	case d < 15:
		return "t1"
	}
	return "t0"
}

func wattsText(f machineFacts) string {
	if !f.sampled || f.watts <= 0 {
		return "no power reading"
	}
	if f.loadWatts > 0 {
		return fmt.Sprintf("%.0f W of %.0f W load", f.watts, f.loadWatts)
	}
	return fmt.Sprintf("%.0f W", f.watts)
}

func inletText(f machineFacts) string {
	if !f.sampled || f.inletC <= 0 {
		return "no inlet reading"
	}
	return fmt.Sprintf("inlet %.1f °C, limit %.0f °C", f.inletC, f.inletMax)
}

type legendItem struct{ Class, Label string }

func legendFor(view string) []legendItem {
	switch view {
	case "power":
		return []legendItem{{"c-p0", "under 25% of load watts"}, {"c-p1", "25-50%"}, {"c-p2", "50-75%"}, {"c-p3", "75-100%"},
			{"c-high", "above load watts"}, {"c-none", "no reading"}}
	case "inlet":
		return []legendItem{{"c-t0", "15 °C or more below the limit"}, {"c-t1", "8-15 °C below"}, {"c-t2", "3-8 °C below"},
			{"c-t3", "within 3 °C"}, {"c-hot", "above the limit"}, {"c-none", "no reading"}}
	case "drift":
		return []legendItem{{"c-dok", "firmware at its pins"}, {"c-dwarn", "off a warn pin"}, {"c-dbad", "off a pin that blocks"},
			{"c-dnone", "no pins or no inventory"}}
	}
	return []legendItem{{"c-ok", "ready"}, {"c-busy", "in a job"}, {"c-idle", "enrolled, discovered"},
		{"c-warn", "warning: alert, degraded link, GPU missing"}, {"c-bad", "failed, critical alert or bad GPU"}}
}
