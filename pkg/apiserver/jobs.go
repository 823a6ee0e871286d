package apiserver

import (
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
)

// WireJob is a job as the API carries it: the engine's record with its
// kind's progress typed (wire.ReimageStatus, wire.RolloutStatus). A
// status the engine cannot decode travels without progress: the job's
// state and reason still say where it stands.
func WireJob(j *engine.Job) *wire.Job {
	if j == nil {
		return nil
	}
	out := &wire.Job{ID: j.ID, Kind: j.Kind, Machines: nonNil(j.Machines), State: string(j.State), Step: j.Step, Attempt: j.Attempt,
		Reason: j.Reason, Created: j.Created, Updated: j.Updated, Deadline: j.Deadline}
	switch j.Kind {
	case "reimage":
		out.Reimage = wireReimage(j)
	case "rollout":
		out.Rollout = wireRollout(j)
	}
	return out
}

func wireReimage(j *engine.Job) *wire.ReimageStatus {
	st, err := engine.Status(j)
	if err != nil {
		return nil
	}
	sp, _ := engine.Spec(j)
	out := &wire.ReimageStatus{Recipe: sp.Recipe, RestoreSeconds: st.Restore.Seconds(), Bytes: st.Bytes, Total: st.Total,
		RateBps: st.RateBps, Checks: wireChecks(st.Checks), BurnIn: wireChecks(st.BurnIn), LoadWatts: st.LoadWatts,
		LoadSamples: st.LoadSamples, Software: st.Software, Warm: st.Warm, Log: st.Log}
	for _, name := range engine.PhaseOrder(st) {
		p := st.Phases[name]
		out.Phases = append(out.Phases, wire.Phase{Name: name, Start: p.Start, End: p.End})
	}
	for _, f := range st.Findings {
		out.Findings = append(out.Findings, wire.Finding{Severity: f.Severity, Part: f.Part, Message: f.Message, Check: f.Check})
	}
	return out
}

func wireChecks(cs []engine.CheckResult) []wire.CheckResult {
	var out []wire.CheckResult
	for _, c := range cs {
		out = append(out, wire.CheckResult{Name: c.Name, OK: c.OK, Skipped: c.Skipped, Waived: c.Waived, Detail: c.Detail,
			Value: c.Value, Metrics: c.Metrics})
	}
	return out
}

func wireRollout(j *engine.Job) *wire.RolloutStatus {
	sp, st, err := engine.Rollout(j)
	if err != nil {
		return nil
	}
	out := &wire.RolloutStatus{Recipe: sp.Recipe, Waves: st.Waves, Wave: st.Wave, Jobs: st.Jobs, Failed: st.Failed,
		Stopped: st.Stopped, Warning: st.Warning}
	for _, r := range st.Reports {
		wr := wire.WaveReport{Wave: r.Wave}
		for _, n := range r.Nodes {
			wr.Nodes = append(wr.Nodes, wire.WaveNode{Machine: n.Machine, Rack: n.Rack, Watts: n.Watts, InletC: n.InletC,
				GPUMaxC: n.GPUMaxC, Failed: n.Failed, Problem: n.Problem})
		}
		out.Reports = append(out.Reports, wr)
	}
	return out
}
