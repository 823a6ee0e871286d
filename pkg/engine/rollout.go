package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// RolloutSpec asks for a recipe's machines to be (re)provisioned in waves.
type RolloutSpec struct {
	Recipe      string   `json:"recipe"`
	Machines    []string `json:"machines,omitempty"` // default: every machine of the recipe
	Canary      int      `json:"canary,omitempty"`   // size of the first wave (default 1)
	Batch       int      `json:"batch"`              // size of later waves
	MaxFailures int      `json:"max_failures"`       // stop when a wave has more failures than this
	PerRack     int      `json:"per_rack,omitempty"` // at most this many per rack in one wave (0 = no limit)
	Reason      string   `json:"reason,omitempty"`
}

// RolloutStatus is a rollout's progress, persisted with its job.
type RolloutStatus struct {
	Waves   [][]string        `json:"waves"` // machine IDs
	Wave    int               `json:"wave"`  // index of the current wave
	Jobs    map[string]string `json:"jobs"`  // machine ID -> reimage job ID
	Failed  map[string]string `json:"failed,omitempty"`
	Stopped string            `json:"stopped,omitempty"`
	// Warning says, before the first wave, what the operator should know:
	// a class that is not scale-ready (no recent, fast enough restore drill).
	Warning string `json:"warning,omitempty"`
	// Reports are the finished waves' reports, kept with the rollout.
	Reports []WaveReport `json:"reports,omitempty"`
}

// WaveReport is what a wave's machines did under load (their burn-in): the
// peak watts and temperatures telemetry saw while their jobs ran, and
// failures. The next wave starts only when no machine crossed its recipe's
// limits.
type WaveReport struct {
	Wave  int        `json:"wave"` // 1-based
	Nodes []WaveNode `json:"nodes"`
}

// WaveNode is one machine's line of a wave report.
type WaveNode struct {
	Machine string  `json:"machine"`
	Rack    string  `json:"rack,omitempty"`
	Watts   float64 `json:"peak_watts,omitempty"`
	InletC  float64 `json:"peak_inlet_c,omitempty"`
	GPUMaxC float64 `json:"peak_gpu_c,omitempty"`
	Failed  string  `json:"failed,omitempty"`
	// Problem is the limit the machine crossed under load, "" none.
	Problem string `json:"problem,omitempty"`
}

// WaveCheck judges a machine of a finished wave by what was measured of it
// between from and to (its job): its line of the wave report, with Problem
// set when it crossed its recipe's thermal or power limits.
type WaveCheck func(ctx context.Context, m *machine.Machine, r *recipe.Recipe, from, to time.Time) WaveNode

// Waves splits machines into a canary wave and batches, never putting more
// than perRack machines of one rack into a wave. The order is deterministic.
func Waves(ms []machine.Machine, canary, batch, perRack int) [][]string {
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	left := ms
	var waves [][]string
	size := canary
	for len(left) > 0 {
		var wave []string
		var rest []machine.Machine
		perRackCount := map[string]int{}
		for _, m := range left {
			if len(wave) < size && (perRack <= 0 || perRackCount[m.Rack] < perRack) {
				wave = append(wave, m.ID)
				perRackCount[m.Rack]++
				continue
			}
			rest = append(rest, m)
		}
		waves = append(waves, wave)
		left, size = rest, batch
	}
	return waves
}

// StartRollout validates the spec, plans the waves and starts a rollout job
// that Run drives (and resumes after a restart).
func (e *Engine) StartRollout(ctx context.Context, sp RolloutSpec, actor string) (*store.Job, error) {
	if sp.Recipe == "" {
		return nil, errors.New("rollout: recipe is empty")
	}
	if sp.Batch <= 0 {
		return nil, fmt.Errorf("rollout: batch %d: expected a positive wave size", sp.Batch)
	}
	if sp.MaxFailures < 0 {
		return nil, fmt.Errorf("rollout: max_failures %d: expected 0 or more", sp.MaxFailures)
	}
	if sp.Canary < 0 {
		return nil, fmt.Errorf("rollout: canary %d: expected the first wave's size, 1 or more (0: 1)", sp.Canary)
	}
	if sp.PerRack < 0 {
		return nil, fmt.Errorf("rollout: per_rack %d: expected 0 (no limit) or more", sp.PerRack)
	}
	if sp.Canary == 0 {
		sp.Canary = 1
	}
	r, err := e.recipes(sp.Recipe)
	if err != nil {
		return nil, fmt.Errorf("rollout: recipe %s: %w", sp.Recipe, err)
	}
	var ms []machine.Machine
	if len(sp.Machines) == 0 {
		all, err := e.machines.List(ctx, store.MachineFilter{Recipe: sp.Recipe})
		if err != nil {
			return nil, err
		}
		ms = all
	}
	for _, n := range sp.Machines {
		m, err := e.machines.Get(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("rollout: machine %s: %w", n, err)
		}
		if m.Recipe != sp.Recipe {
			return nil, fmt.Errorf("rollout: machine %s uses recipe %q, not %s", m.Name, m.Recipe, sp.Recipe)
		}
		ms = append(ms, *m)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("rollout: no machines use recipe %s", sp.Recipe)
	}
	perRack, err := e.rackPower(ctx, r, ms, sp.PerRack)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	st := RolloutStatus{Waves: Waves(ms, sp.Canary, sp.Batch, perRack), Jobs: map[string]string{}, Failed: map[string]string{}}
	if err := lonePairs(r, st.Waves); err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if rd := e.ReadinessOf(ctx, sp.Recipe, e.drillAge); !rd.ScaleReady {
		st.Warning = fmt.Sprintf("recipe %s is not scale-ready: %s", sp.Recipe, rd.Why)
		e.log.Warn("rollout of a class that is not scale-ready", "recipe", sp.Recipe, "why", rd.Why)
	}
	spec, _ := json.Marshal(sp)
	status, _ := json.Marshal(st)
	j := &store.Job{ID: newID("r-"), Kind: "rollout", State: store.JobRunning, Step: "wave 1", Spec: spec, Status: status,
		Created: e.now(), Updated: e.now()}
	for _, m := range ms {
		j.Machines = append(j.Machines, m.ID)
	}
	if err := e.jobs.CreateJob(ctx, j); err != nil {
		return nil, err
	}
	e.log.Info("rollout started", "job", j.ID, "recipe", sp.Recipe, "waves", len(st.Waves), "actor", actor)
	e.rollouts <- j.ID
	return j, nil
}

// lonePairs refuses waves that cannot pass the recipe's required two-node
// burn-in checks (iperf3, ib-write-bw pair nodes of one wave): a wave of one
// machine would wait for a partner and fail.
func lonePairs(r *recipe.Recipe, waves [][]string) error {
	var fabric []string
	for _, c := range r.Acceptance.Checks {
		if spec, ok := recipe.LookupCheck(c.Name); ok && spec.Pairwise && !c.Optional {
			fabric = append(fabric, c.Name)
		}
	}
	if len(fabric) == 0 {
		return nil
	}
	for i, w := range waves {
		if len(w) == 1 {
			return fmt.Errorf("wave %d of %d has one machine (%s), but recipe %s requires %s between two nodes of a wave: "+
				"make every wave at least 2 (--canary 2, --batch 2 or more, per-rack 2 or more) or mark the check optional",
				i+1, len(waves), w[0], r.Name, strings.Join(fabric, " and "))
		}
	}
	return nil
}

// driveRollout runs a rollout's waves until it ends or ctx does. Each wave's
// reimage jobs are recorded before they start, so a restart resumes the
// same wave without starting a machine twice.
func (e *Engine) driveRollout(ctx context.Context, id string) {
	for ctx.Err() == nil {
		j, err := e.jobs.GetJob(ctx, id)
		if err != nil || j.State != store.JobRunning {
			return
		}
		var sp RolloutSpec
		var st RolloutStatus
		if json.Unmarshal(j.Spec, &sp) != nil || json.Unmarshal(j.Status, &st) != nil {
			e.endRollout(ctx, id, store.JobFailed, "rollout job is corrupt", st)
			return
		}
		if st.Jobs == nil {
			st.Jobs = map[string]string{}
		}
		if st.Failed == nil {
			st.Failed = map[string]string{}
		}
		if st.Wave >= len(st.Waves) {
			e.endRollout(ctx, id, store.JobSucceeded, "", st)
			return
		}
		wave := st.Waves[st.Wave]
		for _, mid := range wave {
			if _, ok := st.Jobs[mid]; ok {
				continue
			}
			rj, err := e.reimage(ctx, mid, "rollout "+id, sp.Reason, fmt.Sprintf("%s/%d", id, st.Wave+1), false)
			if err != nil {
				st.Jobs[mid] = ""
				st.Failed[mid] = err.Error()
			} else {
				st.Jobs[mid] = rj.ID
			}
			if err := e.saveRollout(ctx, id, st, j.Step); err != nil {
				return
			}
		}
		failures := 0
		for _, mid := range wave {
			if jid := st.Jobs[mid]; jid != "" {
				rj, err := e.Wait(ctx, jid)
				if err != nil {
					return
				}
				if rj.State != store.JobSucceeded {
					st.Failed[mid] = rj.Reason
				}
			}
			if _, bad := st.Failed[mid]; bad {
				failures++
			}
		}
		rep, problems := e.waveReport(ctx, st.Wave+1, wave, st, sp.Recipe)
		st.Reports = append(st.Reports, rep)
		if failures > sp.MaxFailures {
			e.endRollout(ctx, id, store.JobFailed, fmt.Sprintf("stopped after wave %d of %d: %d failed, more than max-failures %d", st.Wave+1, len(st.Waves), failures, sp.MaxFailures), st)
			return
		}
		if len(problems) > 0 {
			e.endRollout(ctx, id, store.JobFailed, fmt.Sprintf("stopped after wave %d of %d: under load %s; the next wave waits for the cause (cooling, power) to be fixed: start a new rollout then",
				st.Wave+1, len(st.Waves), strings.Join(problems, "; ")), st)
			return
		}
		st.Wave++
		if err := e.saveRollout(ctx, id, st, fmt.Sprintf("wave %d", st.Wave+1)); err != nil {
			return
		}
	}
}

// waveReport builds a finished wave's report and lists the limits its
// machines crossed under load.
func (e *Engine) waveReport(ctx context.Context, n int, wave []string, st RolloutStatus, recipeName string) (WaveReport, []string) {
	rep := WaveReport{Wave: n, Nodes: []WaveNode{}}
	var problems []string
	r, _ := e.recipes(recipeName)
	for _, mid := range wave {
		m, err := e.machines.Get(ctx, mid)
		if err != nil {
			continue
		}
		node := WaveNode{Machine: m.Name, Rack: m.Rack, Failed: st.Failed[mid]}
		if jid := st.Jobs[mid]; jid != "" && node.Failed == "" && e.waveCheck != nil && r != nil {
			if rj, err := e.jobs.GetJob(ctx, jid); err == nil {
				node = e.waveCheck(ctx, m, r, rj.Created, rj.Updated)
				node.Machine, node.Rack = m.Name, m.Rack
				if node.Problem != "" {
					problems = append(problems, m.Name+": "+node.Problem)
				}
			}
		}
		rep.Nodes = append(rep.Nodes, node)
	}
	e.log.Info("rollout wave report", "wave", n, "machines", len(wave), "problems", len(problems))
	return rep, problems
}

func (e *Engine) saveRollout(ctx context.Context, id string, st RolloutStatus, step string) error {
	_, err := e.jobs.UpdateJob(ctx, id, func(j *store.Job) error {
		if j.State != store.JobRunning {
			return fmt.Errorf("rollout %s is %s: %w", j.ID, j.State, ErrEnded) // cancelled meanwhile
		}
		b, err := json.Marshal(st)
		j.Status, j.Step, j.Updated = b, step, e.now()
		return err
	})
	return err
}

func (e *Engine) endRollout(ctx context.Context, id string, state store.JobState, reason string, st RolloutStatus) {
	st.Stopped = reason
	_, _ = e.jobs.UpdateJob(ctx, id, func(j *store.Job) error {
		b, _ := json.Marshal(st)
		j.State, j.Reason, j.Status, j.Updated, j.Step = state, reason, b, e.now(), "done"
		return nil
	})
	e.log.Info("rollout ended", "job", id, "state", state, "reason", reason)
	e.notify(id)
}
