package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Run resumes the jobs a previous process left running, then executes BMC
// steps as they are asked for and fails or retries steps that time out. It
// returns when ctx ends. Because every step is persisted before and after it
// runs, a process killed at any point resumes here: a BMC step is repeated
// (its actions are idempotent), a step waiting on the agent keeps waiting
// until its persisted deadline.
func (e *Engine) Run(ctx context.Context) error {
	jobs, err := e.jobs.ListJobs(ctx, store.JobRunning)
	if err != nil {
		return fmt.Errorf("engine: listing running jobs: %w", err)
	}
	for _, j := range jobs {
		e.adopt(ctx, j.ID) // owner.go: claims it, then resumes it
	}
	go e.own.owner.Run(ctx, e.adopt)
	t := time.NewTicker(e.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-e.kick:
			e.startBMCStep(ctx, id)
		case id := <-e.rollouts:
			e.adopt(ctx, id)
		case <-t.C:
			e.checkDeadlines(ctx)
		}
	}
}

// startBMCStep runs a job's BMC step in its own goroutine, once at a time
// per job; a kick that arrives while it runs makes it run again after.
func (e *Engine) startBMCStep(ctx context.Context, id string) {
	ctx, ok := e.claim(ctx, id) // another instance's job: its owner runs it
	if !ok {
		return
	}
	e.mu.Lock()
	if e.running[id] {
		e.again[id] = true
		e.mu.Unlock()
		return
	}
	e.running[id] = true
	e.mu.Unlock()
	go func() {
		for {
			e.runBMCStep(ctx, id)
			e.mu.Lock()
			if !e.again[id] || ctx.Err() != nil {
				delete(e.running, id)
				delete(e.again, id)
				e.mu.Unlock()
				return
			}
			delete(e.again, id)
			e.mu.Unlock()
		}
	}()
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// runBMCStep performs the BMC side of the bmc and handoff steps.
func (e *Engine) runBMCStep(ctx context.Context, jobID string) {
	j, err := e.jobs.GetJob(ctx, jobID)
	if err != nil || j.State != store.JobRunning {
		return
	}
	if e.runFirmwareJob(ctx, j) {
		return
	}
	sp, err := decodeSpec(j)
	if err != nil {
		e.fail(ctx, jobID, j.Step, err.Error())
		return
	}
	m, err := e.machines.Get(ctx, sp.Machine)
	if err != nil {
		e.fail(ctx, jobID, j.Step, err.Error())
		return
	}
	r, err := e.jobRecipe(sp)
	if err != nil {
		e.fail(ctx, jobID, j.Step, "recipe: "+err.Error())
		return
	}
	to := e.timeouts(r)
	step := j.Step
	warmTry := step == StepBMC && sp.Warm && j.Attempt == 0 && e.warm != nil
	if (step == StepBMC && !warmTry) || (step == StepHandoff && !kexecHandoff(r)) {
		// Both power the machine on: wait for the rack's start-up margin
		// first, outside the power timeout.
		if err := e.startSlot(ctx, m, r); err != nil {
			return // serve is stopping; the step runs again at start
		}
	}
	bctx, cancel := context.WithTimeout(ctx, to.Power.D())
	defer cancel()
	switch step {
	case StepBMC:
		_, _ = e.advance(ctx, jobID, StepBMC, "", 0, func(st *ReimageStatus) { startPhase(st, "bmc", e.now()) })
		// A new boot attempt: whatever was issued to the one before is void.
		e.deleteCredentials(ctx, jobID)
		err = e.bootAgent(ctx, bctx, jobID, m, r, warmTry)
		if err == nil && m.State == machine.StateReimaging {
			err = e.setState(ctx, m.ID, machine.StateProvisioning, "booting into the agent", map[string]string{"job": jobID})
		}
		if err == nil {
			_, err = e.advance(ctx, jobID, StepBMC, StepBoot, to.POST.D(), nil)
		}
	case StepHandoff:
		err = e.bmcHandoff(bctx, m, r)
		if err == nil {
			_, err = e.advance(ctx, jobID, StepHandoff, StepFirstBoot, firstBootDeadline(r, to), nil)
		}
		if err == nil && countStage(r.Acceptance.Checks, recipe.StageBurnIn) > 0 {
			go e.sampleLoad(ctx, jobID, m, to.Power.D())
		}
	default:
		return
	}
	if err != nil && ctx.Err() == nil {
		e.retryOrFail(ctx, jobID, step, err.Error(), to.Retries)
	}
}

func (e *Engine) bmcProvision(ctx context.Context, m *machine.Machine, r *recipe.Recipe) error {
	b, err := e.dial(ctx, m)
	if err != nil {
		return fmt.Errorf("BMC %s: %w", m.BMC.Endpoint, err)
	}
	defer b.Close()
	e.readBMCInventory(ctx, b, m)
	if attrs := biosAttrs(r); len(attrs) > 0 {
		if err := b.ApplyBIOS(ctx, attrs); err != nil {
			return fmt.Errorf("applying %d BIOS attributes: %w", len(attrs), err)
		}
		e.event(ctx, m.ID, "bmc.bios", fmt.Sprintf("staged %d BIOS attributes", len(attrs)), nil)
	}
	if mode := bootMode(r); mode != "" {
		if err := b.SetBootMode(ctx, mode); err != nil {
			return fmt.Errorf("setting boot mode %s (bios.boot_mode %s): %w", mode, r.BIOS.BootMode, err)
		}
		e.event(ctx, m.ID, "bmc.bootmode", "boot mode set to "+mode, nil)
	}
	if r.OS.Agent.VirtualMedia() {
		return e.bootFromMedia(ctx, b, m, r)
	}
	target, uri := "Pxe", ""
	if r.OS.Agent.Boot == recipe.AgentBootHTTP {
		// UEFI HTTP boot of the machine's agent UKI; the URI spares the
		// firmware waiting for a DHCP offer that names one.
		target = "UefiHttp"
		if e.bootURL != "" && len(m.MACs) > 0 {
			uri = e.bootURL + "/uki/" + strings.ReplaceAll(m.MACs[0], ":", "-") + ".efi"
		}
	}
	if err := b.SetBootOverride(ctx, target, uri, true); err != nil {
		return fmt.Errorf("setting one-time network boot (%s): %w", target, err)
	}
	if err := b.PowerCycle(ctx); err != nil {
		return fmt.Errorf("power cycle: %w", err)
	}
	e.event(ctx, m.ID, "bmc.boot", "one-time network boot set, power cycled", nil)
	return nil
}

// bmcHandoff boots the installed OS: boot from disk, then a power cycle;
// under os.handoff kexec the agent has already jumped into the installed
// kernel, so the override only makes a later reboot (or the agent's
// fallback when kexec fails) boot the disk, and nothing is power-cycled:
// a power cycle here would throw away the POST the kexec saved.
func (e *Engine) bmcHandoff(ctx context.Context, m *machine.Machine, r *recipe.Recipe) error {
	b, err := e.dial(ctx, m)
	if err != nil {
		return fmt.Errorf("BMC %s: %w", m.BMC.Endpoint, err)
	}
	defer b.Close()
	e.ejectAgentMedia(ctx, b, m, r)
	if err := b.SetBootOverride(ctx, "Hdd", "", true); err != nil {
		return fmt.Errorf("setting boot from disk: %w", err)
	}
	if kexecHandoff(r) {
		e.event(ctx, m.ID, "bmc.handoff", "boot from disk set for the next reboot; the agent kexecs into the installed OS (no power cycle, no POST)", nil)
		return nil
	}
	if err := b.PowerCycle(ctx); err != nil {
		return fmt.Errorf("power cycle into the installed OS: %w", err)
	}
	e.event(ctx, m.ID, "bmc.handoff", "boot from disk set, power cycled into the installed OS", nil)
	return nil
}

// firstBootDeadline bounds the wait for the installed OS's report: the
// verify timeout, plus the burn-in's own deadline (burn_in.timeout, not
// the provision deadline) when the recipe has burn-in checks, which the
// installed OS runs before it reports.
func firstBootDeadline(r *recipe.Recipe, to recipe.Timeouts) time.Duration {
	d := to.Verify.D()
	if countStage(r.Acceptance.Checks, recipe.StageBurnIn) > 0 {
		b := recipe.BurnIn{}
		if r.Acceptance.BurnIn != nil {
			b = *r.Acceptance.BurnIn
		}
		d += b.Deadline().D()
	}
	return d
}

// resumeLoadSampler starts the load sampler again for a job a previous
// process left in burn-in: the highest reading so far is in its status,
// and sampling goes on until the first-boot report.
func (e *Engine) resumeLoadSampler(ctx context.Context, j *store.Job) {
	sp, err := decodeSpec(j)
	if err != nil {
		return
	}
	r, err := e.jobRecipe(sp)
	if err != nil || countStage(r.Acceptance.Checks, recipe.StageBurnIn) == 0 {
		return
	}
	m, err := e.machines.Get(ctx, sp.Machine)
	if err != nil {
		return
	}
	go e.sampleLoad(ctx, j.ID, m, e.timeouts(r).Power.D())
}

// sampleLoad reads the node's power draw from the BMC while the installed
// OS runs its burn-in (the job waits at firstboot), keeping the highest.
// Readings that fail are skipped: the BMC's power sensor is best effort.
func (e *Engine) sampleLoad(ctx context.Context, jobID string, m *machine.Machine, timeout time.Duration) {
	t := time.NewTicker(e.sample)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j, err := e.jobs.GetJob(ctx, jobID)
		if err != nil || j.State != store.JobRunning || j.Step != StepFirstBoot {
			return
		}
		bctx, cancel := context.WithTimeout(ctx, timeout)
		w, err := e.nodeWatts(bctx, m)
		cancel()
		if err != nil {
			e.log.Debug("no power reading during burn-in", "machine", m.ID, "err", err)
			continue
		}
		_, _ = e.advance(ctx, jobID, StepFirstBoot, "", 0, func(st *ReimageStatus) {
			st.LoadWatts, st.LoadSamples = max(st.LoadWatts, w), st.LoadSamples+1
		})
	}
}

func (e *Engine) nodeWatts(ctx context.Context, m *machine.Machine) (int, error) {
	b, err := e.dial(ctx, m)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	return b.NodeWatts(ctx)
}

// readBMCInventory stores the BMC's view of the machine for the agent's
// inventory to be reconciled with; a BMC that cannot be read is an event,
// not a failure (the in-band inventory is then judged alone).
func (e *Engine) readBMCInventory(ctx context.Context, b BMC, m *machine.Machine) {
	if e.reconcile == nil {
		return
	}
	inv, err := b.Inventory(ctx)
	if err != nil {
		e.event(ctx, m.ID, "bmc.inventory", "the BMC's inventory could not be read; GPUs are not cross-checked: "+err.Error(), nil)
		return
	}
	inv.Source, inv.Taken = "redfish", e.now()
	if _, err := e.machines.PutInventory(ctx, m.ID, inv); err != nil {
		e.log.Warn("storing the BMC inventory", "machine", m.ID, "err", err)
	}
}

// bootMode is the Redfish boot mode of the recipe's bios.boot_mode.
func bootMode(r *recipe.Recipe) string {
	switch r.BIOS.BootMode {
	case "uefi":
		return "UEFI"
	case "legacy":
		return "Legacy"
	}
	return ""
}

func biosAttrs(r *recipe.Recipe) map[string]any {
	out := map[string]any{}
	for k, v := range r.BIOS.Attributes {
		out[k] = v.Any()
	}
	return out
}

// timeouts returns the recipe's step timeouts with the engine's defaults.
func (e *Engine) timeouts(r *recipe.Recipe) recipe.Timeouts {
	t := r.Timeouts
	d := e.defaults
	if t.Power == 0 {
		t.Power = d.Power
	}
	if t.POST == 0 {
		t.POST = d.POST
	}
	if t.Provision == 0 {
		t.Provision = d.Provision
	}
	if t.Verify == 0 {
		t.Verify = d.Verify
	}
	if t.Retries == 0 {
		t.Retries = d.Retries
	}
	return t
}

// retryOrFail repeats a job from its BMC step while attempts remain.
// Steps that wait on the machine are retried by network-booting it again.
func (e *Engine) retryOrFail(ctx context.Context, jobID, step, reason string, retries int) {
	e.mu.Lock()
	j, err := e.jobs.UpdateJob(ctx, jobID, func(j *store.Job) error {
		if j.State != store.JobRunning || j.Step != step {
			return errWrongStep
		}
		if j.Attempt+1 >= retries {
			return errNoRetries
		}
		j.Attempt++
		if step != StepHandoff {
			j.Step = StepBMC
		}
		j.Updated = e.now()
		j.Deadline = e.now().Add(e.defaults.Power.D())
		return nil
	})
	e.mu.Unlock()
	switch {
	case err == nil:
		e.event(ctx, firstOf(j.Machines), "job.retry", fmt.Sprintf("step %s: %s; attempt %d of %d", step, reason, j.Attempt+1, retries), map[string]string{"job": jobID})
		e.kick <- jobID
	case errors.Is(err, errNoRetries):
		e.fail(ctx, jobID, step, reason)
	}
}

var errNoRetries = errors.New("no retries left")

func (e *Engine) checkDeadlines(ctx context.Context) {
	jobs, err := e.jobs.ListJobs(ctx, store.JobRunning)
	if err != nil {
		return
	}
	now := e.now()
	for _, j := range jobs {
		if j.Kind != "reimage" || j.Deadline.IsZero() || now.Before(j.Deadline) {
			continue
		}
		ctx, ok := e.claim(ctx, j.ID) // only the owner judges its deadlines
		if !ok {
			continue
		}
		e.mu.Lock()
		busy := e.running[j.ID]
		e.mu.Unlock()
		if busy {
			continue
		}
		reason := fmt.Sprintf("step %s timed out after %s", j.Step, j.Deadline.Sub(j.Updated).Round(time.Second))
		retries := e.defaults.Retries
		if sp, err := decodeSpec(&j); err == nil {
			if r, err := e.jobRecipe(sp); err == nil {
				retries = e.timeouts(r).Retries
			}
		}
		// A timed-out image write or check is not retried: the agent
		// reported nothing for the whole step, which is evidence in itself.
		if j.Step == StepImage || j.Step == StepChecks || j.Step == StepVerify {
			e.fail(ctx, j.ID, j.Step, reason)
			continue
		}
		e.retryOrFail(ctx, j.ID, j.Step, reason, retries)
	}
}

// kexecHandoff: the agent jumps into the installed kernel itself.
func kexecHandoff(r *recipe.Recipe) bool { return r.OS.Handoff == "kexec" }
