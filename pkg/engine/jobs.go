package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Job returns a job by ID.
func (e *Engine) Job(ctx context.Context, id string) (*store.Job, error) {
	j, err := e.jobs.GetJob(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return j, nil
}

// Jobs lists the jobs in a state ("" all), newest first.
func (e *Engine) Jobs(ctx context.Context, state store.JobState) ([]store.Job, error) {
	switch state {
	case "", store.JobPending, store.JobRunning, store.JobSucceeded, store.JobFailed, store.JobCancelled:
	default:
		return nil, fmt.Errorf("%w: job state %q: expected pending, running, succeeded, failed or cancelled", ErrPreflight, state)
	}
	jobs, err := e.jobs.ListJobs(ctx, state)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return jobs, nil
}

// Spec decodes a reimage job's input.
func Spec(j *Job) (ReimageSpec, error) { return decodeSpec(j) }

// Rollout decodes a rollout job's input and progress.
func Rollout(j *Job) (RolloutSpec, RolloutStatus, error) {
	var (
		sp RolloutSpec
		st RolloutStatus
	)
	if err := json.Unmarshal(j.Spec, &sp); err != nil {
		return sp, st, fmt.Errorf("job %s: decoding the rollout's spec: %w", j.ID, err)
	}
	if len(j.Status) > 0 {
		if err := json.Unmarshal(j.Status, &st); err != nil {
			return sp, st, fmt.Errorf("job %s: decoding the rollout's status: %w", j.ID, err)
		}
	}
	return sp, st, nil
}

// PhaseOrder orders the phases of a status: the known ones in Phases'
// order, then any other by start.
func PhaseOrder(st ReimageStatus) []string {
	var out []string
	for _, name := range Phases {
		if _, ok := st.Phases[name]; ok {
			out = append(out, name)
		}
	}
	var rest []string
	for name := range st.Phases {
		if !slices.Contains(Phases, name) {
			rest = append(rest, name)
		}
	}
	slices.SortFunc(rest, func(a, b string) int { return st.Phases[a].Start.Compare(st.Phases[b].Start) })
	return append(out, rest...)
}
