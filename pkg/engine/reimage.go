package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"crypto/rand"
	"encoding/hex"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Plan is what a reimage would do, as `ingot reimage --dry-run` prints it.
type Plan struct {
	Machine  string   `json:"machine"`
	Name     string   `json:"name"`
	Recipe   string   `json:"recipe"`
	Steps    []string `json:"steps"`
	Problems []string `json:"problems,omitempty"`
}

// ErrPreflight wraps every preflight failure.
var ErrPreflight = errors.New("preflight failed")

// Preflight checks everything a reimage needs before touching the machine:
// the recipe lints, every pinned artifact is present, the BMC answers with
// valid credentials, and the machine is not in another job.
func (e *Engine) Preflight(ctx context.Context, idOrName string) (*Plan, error) {
	m, err := e.machines.Get(ctx, idOrName)
	if err != nil {
		return nil, fmt.Errorf("reimage %s: %w", idOrName, err)
	}
	p := &Plan{Machine: m.ID, Name: m.Name, Recipe: m.Recipe}
	if m.Recipe == "" {
		p.Problems = append(p.Problems, "machine has no recipe: run 'ingot machine set-recipe "+m.Name+" RECIPE'")
	}
	var r *recipe.Recipe
	if m.Recipe != "" {
		if r, err = e.recipes(m.Recipe); err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("recipe %s: %v", m.Recipe, err))
		}
	}
	if r != nil && r.IsTemplate() {
		p.Problems = append(p.Problems, fmt.Sprintf("recipe %s is a template (template: true): it is only extended, never assigned; "+
			"assign a recipe that extends it with its pins filled ('ingot recipe pin')", r.Name))
		r = nil
	}
	if r != nil {
		p.Steps = planSteps(r)
		p.Problems = append(p.Problems, e.missingArtifacts(r)...)
		if _, err := hostname(r, m); err != nil {
			p.Problems = append(p.Problems, err.Error())
		}
		problems, notes := e.poolRules(r, m)
		p.Problems, p.Steps = append(p.Problems, problems...), append(p.Steps, notes...)
	}
	if job, _ := e.activeJob(ctx, m.ID); job != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("machine is already in job %s (step %s)", job.ID, job.Step))
	}
	if err := e.probeBMC(ctx, m); err != nil {
		p.Problems = append(p.Problems, err.Error())
	}
	if len(p.Problems) > 0 {
		return p, fmt.Errorf("%w for %s: %s", ErrPreflight, m.Name, strings.Join(p.Problems, "; "))
	}
	return p, nil
}

func planSteps(r *recipe.Recipe) []string {
	var s []string
	if n := len(r.BIOS.Attributes); n > 0 {
		s = append(s, fmt.Sprintf("bmc: stage %d BIOS attributes (applied at the next reset)", n))
	}
	s = append(s,
		"bmc: one-time boot override to the network (Pxe), power cycle",
		"boot: DHCP, iPXE, agent "+short(r.OS.Agent.Kernel.SHA256),
		"inventory: compare with the recipe's hardware; critical drift fails the job",
		fmt.Sprintf("image: write %s (sha256 %s) to the boot disk", r.OS.Image.Name, short(r.OS.Image.SHA256)),
		fmt.Sprintf("checks: %d acceptance checks", len(r.Acceptance.Checks)),
		"handoff: boot override to disk, reboot into the installed OS",
		"firstboot: installed OS reports kernel and drivers",
		"verify: BIOS attributes stuck, driver pins match, then ready",
	)
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12] + "…"
	}
	return sha
}

func (e *Engine) missingArtifacts(r *recipe.Recipe) []string {
	if e.artifacts == nil {
		return nil
	}
	var out []string
	image := r.OS.Image.SHA256
	if r.OS.Image.URL != "" {
		image = "" // served elsewhere: the agent verifies it as it streams
	}
	for _, a := range []struct{ what, sha string }{
		{"image " + r.OS.Image.Name, image},
		{"agent kernel", r.OS.Agent.Kernel.SHA256},
		{"agent initrd", r.OS.Agent.Initrd.SHA256},
	} {
		if a.sha != "" && !e.artifacts.Has(a.sha) {
			out = append(out, fmt.Sprintf("%s: sha256 %s is not in the artifact store (ingot image import)", a.what, a.sha))
		}
	}
	return out
}

func (e *Engine) probeBMC(ctx context.Context, m *machine.Machine) error {
	if m.BMC.Endpoint == "" {
		return fmt.Errorf("machine %s has no BMC endpoint", m.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, e.defaults.Power.D())
	defer cancel()
	b, err := e.dial(ctx, m)
	if err != nil {
		return fmt.Errorf("BMC %s: %w", m.BMC.Endpoint, err)
	}
	return b.Close()
}

// Reimage runs the preflight and, when it passes, starts a persisted job.
func (e *Engine) Reimage(ctx context.Context, idOrName, actor, reason string) (*store.Job, error) {
	return e.reimage(ctx, idOrName, actor, reason, "", false)
}

// ReimageOptions change one job, not the recipe.
type ReimageOptions struct {
	// Handoff overrides the recipe's os.handoff for this job: "reboot"
	// where kexec misbehaves on a machine, or "kexec" to measure it; ""
	// keeps the recipe's.
	Handoff string
	// Warm asks the installed OS to kexec into the agent: no POST (the
	// recipe must opt in with os.warm_reimage); the BMC path is the
	// fallback.
	Warm bool
}

// ReimageWith is Reimage with per-job options.
func (e *Engine) ReimageWith(ctx context.Context, idOrName, actor, reason string, o ReimageOptions) (*store.Job, error) {
	switch o.Handoff {
	case "", "reboot", "kexec":
	default:
		return nil, fmt.Errorf("%w: handoff %q: expected reboot or kexec", ErrPreflight, o.Handoff)
	}
	return e.reimageWith(ctx, idOrName, actor, reason, "", false, o)
}

// reimage starts a reimage job; wave names the rollout wave it belongs to
// ("" outside a rollout): fabric burn-in pairs nodes of one wave.
func (e *Engine) reimage(ctx context.Context, idOrName, actor, reason, wave string, drill bool) (*store.Job, error) {
	return e.reimageWith(ctx, idOrName, actor, reason, wave, drill, ReimageOptions{})
}

func (e *Engine) reimageWith(ctx context.Context, idOrName, actor, reason, wave string, drill bool, o ReimageOptions) (*store.Job, error) {
	p, err := e.Preflight(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	m, err := e.machines.Get(ctx, p.Machine)
	if err != nil {
		return nil, err
	}
	sp := ReimageSpec{Machine: m.ID, Recipe: m.Recipe, Reason: reason, Actor: actor, Wave: wave, Drill: drill, Warm: o.Warm}
	if o.Warm {
		r, err := e.recipes(m.Recipe)
		switch {
		case e.warm == nil:
			return nil, fmt.Errorf("%w: --warm: this server does not send warm reimage requests", ErrPreflight)
		case err == nil && !r.OS.WarmReimage:
			return nil, fmt.Errorf("%w: --warm: recipe %s does not opt in (os.warm_reimage: true), so %s runs no warm reimage service", ErrPreflight, r.Name, m.Name)
		}
	}
	if r, err := e.recipes(m.Recipe); err == nil {
		if err := e.reserve(ctx, r, m); err != nil {
			return nil, fmt.Errorf("%w for %s: %v", ErrPreflight, m.Name, err)
		}
		pinned := *r
		if o.Handoff != "" && o.Handoff != r.OS.Handoff {
			pinned.OS.Handoff, sp.Handoff = o.Handoff, o.Handoff
		}
		sp.Pinned, _ = json.Marshal(&pinned)
		sp.RecipeDigest = r.Digest()
	}
	spec, _ := json.Marshal(sp)
	job := &store.Job{
		ID: newID("j-"), Kind: "reimage", Machines: []string{m.ID}, State: store.JobRunning,
		Step: StepBMC, Spec: spec, Created: e.now(), Updated: e.now(),
		Deadline: e.now().Add(e.defaults.Power.D()),
	}
	if err := e.jobs.CreateJob(ctx, job); err != nil {
		return nil, fmt.Errorf("creating reimage job for %s: %w", m.Name, err)
	}
	to := machine.StateReimaging
	if m.State != machine.StateReady && m.State != machine.StateFailed {
		to = machine.StateProvisioning
	}
	if err := e.setState(ctx, m.ID, to, "reimage requested by "+actor+": "+reason, map[string]string{"job": job.ID}); err != nil {
		e.fail(ctx, job.ID, StepBMC, err.Error())
		return nil, err
	}
	e.kick <- job.ID
	return job, nil
}

// activeJob returns the running job that holds a machine, if any.
func (e *Engine) activeJob(ctx context.Context, machineID string) (*store.Job, error) {
	jobs, err := e.jobs.ListJobs(ctx, store.JobRunning)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		for _, id := range jobs[i].Machines {
			if id == machineID && jobs[i].Kind == "reimage" {
				return &jobs[i], nil
			}
		}
	}
	return nil, store.ErrNotFound
}

// ActiveJob is activeJob for the API: a machine token is valid only while
// its machine's job runs.
func (e *Engine) ActiveJob(ctx context.Context, machineID string) (*store.Job, error) {
	return e.activeJob(ctx, machineID)
}

func newID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// advance moves a job to the next step, closing and opening phases.
// fn may also change the status. It is the one place job steps change.
func (e *Engine) advance(ctx context.Context, jobID, from, to string, timeout time.Duration, fn func(*ReimageStatus)) (*store.Job, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	return e.jobs.UpdateJob(ctx, jobID, func(j *store.Job) error {
		if j.State != store.JobRunning {
			return fmt.Errorf("job %s is %s, not running", j.ID, j.State)
		}
		if from != "" && j.Step != from {
			return fmt.Errorf("%w: job %s is at step %s, not %s", errWrongStep, j.ID, j.Step, from)
		}
		st, err := decodeStatus(j)
		if err != nil {
			return err
		}
		if fn != nil {
			fn(&st)
		}
		if to != "" && to != j.Step {
			if phaseOf(j.Step) != phaseOf(to) {
				endPhase(&st, phaseOf(j.Step), now)
				startPhase(&st, phaseOf(to), now)
			}
			j.Step = to
			if timeout > 0 {
				j.Deadline = now.Add(timeout)
			}
		}
		j.Updated = now
		j.Status, err = json.Marshal(st)
		return err
	})
}

var errWrongStep = errors.New("wrong step")

func phaseOf(step string) string {
	switch step {
	case StepBMC:
		return "bmc"
	case StepBoot:
		return "post+boot"
	case StepHandoff, StepFirstBoot:
		return "reboot+firstboot"
	}
	return step
}

func startPhase(st *ReimageStatus, name string, t time.Time) {
	if _, ok := st.Phases[name]; !ok {
		st.Phases[name] = Phase{Start: t}
	}
}

func endPhase(st *ReimageStatus, name string, t time.Time) {
	if p, ok := st.Phases[name]; ok && p.End.IsZero() {
		p.End = t
		st.Phases[name] = p
	}
}

// fail ends a job and its machine in failed, with the step and the reason.
// The job keeps its status as the evidence bundle (events, agent log,
// inventory findings, check results).
func (e *Engine) fail(ctx context.Context, jobID, step, reason string) {
	e.end(ctx, jobID, step, reason, store.JobFailed)
}

// Cancel ends a running job at an operator's request: its machines turn
// failed (the job may have left them half-written; a reimage restores
// them), a rollout stops before its next wave, and the job reads cancelled.
func (e *Engine) Cancel(ctx context.Context, jobID, actor, reason string) (*store.Job, error) {
	j, err := e.jobs.GetJob(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("cancelling job %s: %w", jobID, err)
	}
	if j.State != store.JobRunning {
		return nil, fmt.Errorf("cancelling job %s: %w: it is %s, not running", jobID, ErrEnded, j.State)
	}
	msg := "cancelled by " + actor
	if reason != "" {
		msg += ": " + reason
	}
	if j.Kind == "rollout" {
		var st RolloutStatus
		_ = json.Unmarshal(j.Status, &st)
		e.endRollout(ctx, jobID, store.JobCancelled, msg, st)
	} else {
		e.end(ctx, jobID, j.Step, msg, store.JobCancelled)
	}
	return e.jobs.GetJob(ctx, jobID)
}

// ErrEnded: the job has already ended.
var ErrEnded = errors.New("job has ended")

// end ends a running job in state (failed or cancelled), its machines
// failed first.
func (e *Engine) end(ctx context.Context, jobID, step, reason string, state store.JobState) {
	cur, err := e.jobs.GetJob(ctx, jobID)
	if err != nil || cur.State != store.JobRunning {
		e.log.Warn("failing job", "job", jobID, "err", err)
		return
	}
	full := fmt.Sprintf("%s: %s", step, reason)
	// The machine turns failed before its job does, so nobody who sees the
	// job ended finds the machine still in its old state (as in finish).
	for _, id := range cur.Machines {
		if err := e.setState(ctx, id, machine.StateFailed, full, map[string]string{"job": jobID, "step": step}); err != nil {
			e.log.Error("marking machine failed", "machine", id, "err", err)
		}
	}
	e.mu.Lock()
	j, err := e.jobs.UpdateJob(ctx, jobID, func(j *store.Job) error {
		if j.State != store.JobRunning {
			return fmt.Errorf("job %s already %s", j.ID, j.State)
		}
		j.State, j.Reason, j.Updated = state, full, e.now()
		return nil
	})
	e.mu.Unlock()
	if err != nil {
		e.log.Warn("failing job", "job", jobID, "err", err)
		return
	}
	e.deleteCredentials(ctx, j.ID)
	e.log.Info("job ended", "job", j.ID, "state", state, "step", step, "reason", reason)
	e.notify(j.ID)
}

// deleteCredentials deletes (not only revokes) every machine credential
// issued for the job: at its end, and when a new boot attempt starts.
func (e *Engine) deleteCredentials(ctx context.Context, jobID string) {
	if e.creds == nil {
		return
	}
	if err := e.creds.DeleteJob(ctx, jobID); err != nil {
		e.log.Warn("deleting the job's machine credentials", "job", jobID, "err", err)
	}
}

// Wait blocks until the job leaves the running state or ctx ends.
func (e *Engine) Wait(ctx context.Context, jobID string) (*store.Job, error) {
	for {
		ch := make(chan struct{})
		e.mu.Lock()
		e.waiters[jobID] = append(e.waiters[jobID], ch)
		e.mu.Unlock()
		j, err := e.jobs.GetJob(ctx, jobID)
		if err != nil || j.State != store.JobRunning {
			return j, err
		}
		select {
		case <-ch:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return j, ctx.Err()
		}
	}
}

func (e *Engine) notify(jobID string) {
	e.mu.Lock()
	ws := e.waiters[jobID]
	delete(e.waiters, jobID)
	e.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
}
