package engine

import (
	"context"
	"encoding/json"

	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// A restore drill reimages one machine of a class from its recipe and
// records the time to restore: a class that cannot be restored quickly is
// not ready to scale. Drills wipe a machine, so they pick only machines
// the operator marked as candidates (spares, nodes that may be wiped),
// unless one is named with force.

// StartDrill starts a restore drill of class recipe: on machine (a name
// or ID; "" picks the candidate of the class drilled longest ago) when it
// is a drill candidate or force is set.
func (e *Engine) StartDrill(ctx context.Context, recipeName, machineName string, force bool, actor string) (*store.Job, error) {
	if _, err := e.recipes(recipeName); err != nil {
		return nil, fmt.Errorf("drill: recipe %s: %w", recipeName, err)
	}
	var m *machine.Machine
	if machineName != "" {
		var err error
		if m, err = e.machines.Get(ctx, machineName); err != nil {
			return nil, fmt.Errorf("drill: machine %s: %w", machineName, err)
		}
		switch {
		case m.Recipe != recipeName:
			return nil, fmt.Errorf("%w: drill: machine %s uses recipe %q, not %s", ErrPreflight, m.Name, m.Recipe, recipeName)
		case !m.DrillCandidate && !force:
			return nil, fmt.Errorf("%w: drill: machine %s is not a drill candidate: a drill wipes it; mark it (ingot machine drill-candidate %s) or name it with --force",
				ErrPreflight, m.Name, m.Name)
		}
	} else {
		ms, err := e.machines.List(ctx, store.MachineFilter{Recipe: recipeName})
		if err != nil {
			return nil, err
		}
		last := e.lastDrills(ctx)
		var pick []machine.Machine
		for _, c := range ms {
			if c.DrillCandidate && (c.State == machine.StateReady || c.State == machine.StateFailed || c.State == machine.StateEnrolled) {
				pick = append(pick, c)
			}
		}
		if len(pick) == 0 {
			return nil, fmt.Errorf("%w: drill: recipe %s has no drill candidate that is idle; mark a spare (ingot machine drill-candidate NODE)", ErrPreflight, recipeName)
		}
		// The candidate drilled longest ago (never first), then by name.
		slices.SortFunc(pick, func(a, b machine.Machine) int {
			if c := last[a.ID].Compare(last[b.ID]); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		m = &pick[0]
	}
	return e.reimage(ctx, m.ID, actor, "restore drill of "+recipeName, "", true)
}

// lastDrills maps machine IDs to when their last drill started.
func (e *Engine) lastDrills(ctx context.Context) map[string]time.Time {
	out := map[string]time.Time{}
	for _, d := range e.drills(ctx, "") {
		if d.At.After(out[d.MachineID]) {
			out[d.MachineID] = d.At
		}
	}
	return out
}

// DrillResult is one finished restore drill.
type DrillResult struct {
	Job       string
	MachineID string
	Machine   string
	Recipe    string
	At        time.Time // when it ended
	Restore   time.Duration
	Target    time.Duration // the recipe's timeouts.restore when it ran; 0 none
	Passed    bool
	Why       string // why it did not pass
}

// drills lists the finished drills of recipe ("" every class), newest
// first.
func (e *Engine) drills(ctx context.Context, recipe string) []DrillResult {
	jobs, err := e.jobs.ListJobs(ctx, "")
	if err != nil {
		e.log.Warn("listing drills", "err", err)
		return nil
	}
	var out []DrillResult
	for _, j := range jobs {
		if j.Kind != "reimage" || j.State == store.JobRunning {
			continue
		}
		var sp ReimageSpec
		if json.Unmarshal(j.Spec, &sp) != nil || !sp.Drill || (recipe != "" && sp.Recipe != recipe) {
			continue
		}
		st, _ := decodeStatus(&j)
		d := DrillResult{Job: j.ID, MachineID: sp.Machine, Recipe: sp.Recipe, At: j.Updated, Restore: st.Restore}
		if r, err := e.jobRecipe(sp); err == nil {
			d.Target = r.Timeouts.Restore.D()
		}
		if m, err := e.machines.Get(ctx, sp.Machine); err == nil {
			d.Machine = m.Name
		}
		switch {
		case j.State != store.JobSucceeded:
			d.Why = "the drill failed: " + j.Reason
		case d.Target > 0 && d.Restore > d.Target:
			d.Why = fmt.Sprintf("time to restore %s, over the target %s (timeouts.restore)", d.Restore.Round(time.Second), d.Target)
		default:
			d.Passed = true
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b DrillResult) int { return b.At.Compare(a.At) })
	return out
}

// Readiness is whether a class is ready to scale: restored from its
// recipe recently enough and fast enough.
type Readiness struct {
	Recipe     string
	Target     time.Duration // timeouts.restore, 0 none
	Last       *DrillResult  // the newest drill, nil none
	LastPassed *DrillResult  // the newest passing drill
	ScaleReady bool
	Why        string
}

// ReadinessOf judges class recipe: scale-ready when its last drill passed
// (within its restore target) and is younger than maxAge (0: any age).
func (e *Engine) ReadinessOf(ctx context.Context, recipe string, maxAge time.Duration) Readiness {
	rd := Readiness{Recipe: recipe}
	if r, err := e.recipes(recipe); err == nil {
		rd.Target = r.Timeouts.Restore.D()
	}
	ds := e.drills(ctx, recipe)
	if len(ds) > 0 {
		rd.Last = &ds[0]
	}
	for i := range ds {
		if ds[i].Passed {
			rd.LastPassed = &ds[i]
			break
		}
	}
	switch {
	case rd.Last == nil:
		rd.Why = "never drilled: no restore of this class from its recipe has been timed (ingot drill " + recipe + ")"
	case !rd.Last.Passed:
		rd.Why = "its last drill did not pass: " + rd.Last.Why
	case maxAge > 0 && e.now().Sub(rd.Last.At) > maxAge:
		rd.Why = fmt.Sprintf("its last passing drill is %s old, over the %s allowed (serve --drill-max-age)", e.now().Sub(rd.Last.At).Round(time.Hour), maxAge)
	default:
		rd.ScaleReady = true
	}
	return rd
}
