package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Task is what the agent on a machine should do now.
type Task struct {
	JobID     string
	MachineID string
	Mode      string // "provision" or "discover"
	Recipe    *recipe.Recipe
	// Hostname is the recipe's network.hostname rendered for the machine
	// ("" without a pattern): the agent sets it in the installed OS.
	Hostname string
}

// OnTask is called when the agent asks for its task: the machine has
// network-booted, so the boot phase ends.
func (e *Engine) OnTask(ctx context.Context, machineID string) (*Task, error) {
	j, err := e.activeJob(ctx, machineID)
	if errors.Is(err, store.ErrNotFound) {
		return &Task{MachineID: machineID, Mode: "discover"}, nil
	}
	if err != nil {
		return nil, err
	}
	sp, err := decodeSpec(j)
	if err != nil {
		return nil, err
	}
	r, err := e.jobRecipe(sp)
	if err != nil {
		return nil, fmt.Errorf("recipe %s: %w", sp.Recipe, err)
	}
	switch j.Step {
	case StepBMC, StepBoot:
		// StepBMC too: the machine may have booted before a restarted
		// process re-ran the BMC step.
		if _, err := e.advance(ctx, j.ID, j.Step, StepInventory, e.timeouts(r).Provision.D(), nil); err != nil {
			return nil, err
		}
		e.event(ctx, machineID, "agent.started", "agent asked for its task", map[string]string{"job": j.ID})
	}
	m, err := e.machines.Get(ctx, machineID)
	if err != nil {
		return nil, err
	}
	host, err := hostname(r, m)
	if err != nil {
		return nil, err
	}
	return &Task{JobID: j.ID, MachineID: machineID, Mode: "provision", Recipe: r, Hostname: host}, nil
}

// hostname renders the recipe's network.hostname for m ("" without one).
func hostname(r *recipe.Recipe, m *machine.Machine) (string, error) {
	if r.Network.Hostname == "" {
		return "", nil
	}
	mac := ""
	if len(m.MACs) > 0 {
		mac = m.MACs[0]
	}
	h, err := recipe.RenderHostname(r.Network.Hostname, recipe.HostnameVars{Recipe: r.Name, Rack: m.Rack, Index: m.Index, Serial: m.Serial, MAC: mac})
	if err != nil {
		return "", fmt.Errorf("machine %s: network.hostname: %w", m.Name, err)
	}
	return h, nil
}

// OnInventory stores the agent's inventory and checks it against the recipe:
// a critical finding fails the job (drift blocks ready).
func (e *Engine) OnInventory(ctx context.Context, machineID string, inv machine.Inventory) error {
	if inv.Taken.IsZero() {
		inv.Taken = e.now()
	}
	if _, err := e.machines.PutInventory(ctx, machineID, inv); err != nil {
		return fmt.Errorf("storing inventory of %s: %w", machineID, err)
	}
	j, err := e.activeJob(ctx, machineID)
	if err != nil {
		return nil // discovery or inspection: stored, nothing to decide
	}
	sp, _ := decodeSpec(j)
	r, err := e.jobRecipe(sp)
	if err != nil {
		return err
	}
	var findings []Finding
	if e.drift != nil {
		findings = e.drift(inv, r)
	}
	findings = append(findings, e.bmcFindings(ctx, machineID, j, inv, r)...)
	m, err := e.machines.Get(ctx, machineID)
	if err != nil {
		return err
	}
	var critical []string
	for _, f := range findings {
		if f.Severity != "critical" {
			continue
		}
		if w, ok := m.Waiver(f.Check); ok && f.Check != "" {
			e.eventBy(ctx, machineID, w.Actor, "check.waived", fmt.Sprintf("finding let past by the waiver of %s: %s: %s (%s)", f.Check, f.Part, f.Message, w.Reason), map[string]string{"job": j.ID})
			continue
		}
		critical = append(critical, f.Part+": "+f.Message)
	}
	_, err = e.advance(ctx, j.ID, StepInventory, StepImage, 0, func(st *ReimageStatus) { st.Findings = findings })
	if err != nil && !errors.Is(err, errWrongStep) {
		return err
	}
	e.event(ctx, machineID, "inventory", fmt.Sprintf("inventory from %s: %d findings, %d critical", inv.Source, len(findings), len(critical)), map[string]string{"job": j.ID})
	if len(critical) > 0 {
		e.fail(ctx, j.ID, StepInventory, "hardware does not match recipe "+r.Name+": "+strings.Join(critical, "; "))
	}
	return nil
}

// bmcFindings judges what only the BMC shows, on the BMC inventory read in
// this job's BMC step: firmware pins (BMC, CPLD, baseboard: the agent cannot
// read them), PSUs and power; and reconciles its GPUs with the agent's.
func (e *Engine) bmcFindings(ctx context.Context, machineID string, j *store.Job, inv machine.Inventory, r *recipe.Recipe) []Finding {
	if e.reconcile == nil {
		return nil
	}
	bmc, ok := e.jobSnapshot(ctx, machineID, j, "redfish")
	if !ok {
		return nil
	}
	out := e.reconcile(inv, bmc)
	if e.drift != nil {
		for _, f := range e.drift(bmc, r) {
			if strings.HasPrefix(f.Part, "firmware") || strings.HasPrefix(f.Part, "psu") || f.Part == "power" {
				f.Part = "BMC: " + f.Part
				out = append(out, f)
			}
		}
	}
	return out
}

// jobSnapshot is the machine's newest inventory from source taken in job j.
func (e *Engine) jobSnapshot(ctx context.Context, machineID string, j *store.Job, source string) (machine.Inventory, bool) {
	snaps, err := e.machines.History(ctx, machineID)
	if err != nil {
		return machine.Inventory{}, false
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		if s := snaps[i]; s.Inventory.Source == source && !s.Taken.Before(j.Created) {
			return s.Inventory, true
		}
	}
	return machine.Inventory{}, false
}

// OnProgress records image-write progress.
func (e *Engine) OnProgress(ctx context.Context, machineID, step string, bytes, total int64, rate float64) error {
	j, err := e.activeJob(ctx, machineID)
	if err != nil {
		return fmt.Errorf("progress from %s: no running job", machineID)
	}
	_, err = e.advance(ctx, j.ID, "", "", 0, func(st *ReimageStatus) {
		st.Bytes, st.Total, st.RateBps = bytes, total, rate
	})
	return err
}

// OnLog keeps the agent's last log lines as evidence.
func (e *Engine) OnLog(ctx context.Context, machineID string, lines []string) error {
	j, err := e.activeJob(ctx, machineID)
	if err != nil {
		return nil
	}
	_, err = e.advance(ctx, j.ID, "", "", 0, func(st *ReimageStatus) {
		st.Log = append(st.Log, lines...)
		if n := len(st.Log); n > 200 {
			st.Log = st.Log[n-200:]
		}
	})
	return err
}

// ErrNotAccepted is returned by OnChecks and OnFirstBoot after they failed
// the job on the results: the reporter learns the verdict (409).
var ErrNotAccepted = errors.New("not accepted")

// OnChecks records the agent's acceptance check results and judges them
// against the recipe's agent-stage checks (see judge): a required check that
// failed, was skipped or has no result fails the job, unless the machine
// holds a waiver for a failed one.
func (e *Engine) OnChecks(ctx context.Context, machineID string, results []CheckResult) error {
	j, err := e.activeJob(ctx, machineID)
	if err != nil {
		return fmt.Errorf("checks from %s: no running job", machineID)
	}
	from := j.Step
	if from != StepImage && from != StepChecks {
		return fmt.Errorf("checks from %s at step %s", machineID, from)
	}
	sp, _ := decodeSpec(j)
	r, err := e.jobRecipe(sp)
	if err != nil {
		return err
	}
	m, err := e.machines.Get(ctx, machineID)
	if err != nil {
		return err
	}
	v := judge(r.Acceptance.Checks, recipe.StageAgent, results, m)
	if _, err := e.advance(ctx, j.ID, from, StepChecks, 0, func(st *ReimageStatus) { st.Checks = v.Results }); err != nil {
		return err
	}
	e.recordWaivers(ctx, machineID, j.ID, v)
	if len(v.Failed) > 0 {
		reason := "acceptance checks failed: " + strings.Join(v.Failed, "; ")
		e.fail(ctx, j.ID, StepChecks, reason)
		return fmt.Errorf("%w: %s", ErrNotAccepted, reason)
	}
	e.event(ctx, machineID, "checks", fmt.Sprintf("%d acceptance checks reported, every required one passed", len(v.Results)), map[string]string{"job": j.ID})
	return nil
}

func (e *Engine) recordWaivers(ctx context.Context, machineID, jobID string, v Verdict) {
	for _, w := range v.Waived {
		e.event(ctx, machineID, "check.waived", "failed check let past by a waiver: "+w, map[string]string{"job": jobID})
	}
}

// OnDone is the agent's last word: ok at the end of its work (the image is
// written and verified, checks passed), or a failure with its reason (an
// image hash mismatch, a disk that could not be found). Success hands the
// machine over to its installed OS through the BMC.
func (e *Engine) OnDone(ctx context.Context, machineID, step string, ok bool, reason string) error {
	j, err := e.activeJob(ctx, machineID)
	if err != nil {
		return fmt.Errorf("done from %s: no running job", machineID)
	}
	if !ok {
		if step == "" {
			step = j.Step
		}
		e.fail(ctx, j.ID, step, reason)
		return nil
	}
	switch j.Step {
	case StepImage, StepChecks:
	default:
		return fmt.Errorf("agent on %s reported done at step %s; expected image or checks", machineID, j.Step)
	}
	sp, _ := decodeSpec(j)
	r, err := e.jobRecipe(sp)
	if err != nil {
		return err
	}
	if n := countStage(r.Acceptance.Checks, recipe.StageAgent); n > 0 && j.Step != StepChecks {
		e.fail(ctx, j.ID, StepChecks, fmt.Sprintf("the agent reported done without the recipe's %d acceptance checks", n))
		return nil
	}
	if _, err := e.advance(ctx, j.ID, j.Step, StepHandoff, e.timeouts(r).Power.D(), nil); err != nil {
		return err
	}
	if err := e.setState(ctx, machineID, machine.StateVerifying, "image written and checked; booting the installed OS", map[string]string{"job": j.ID}); err != nil {
		return err
	}
	e.kick <- j.ID
	return nil
}

// FirstBoot is the installed OS's report: what it runs, and the burn-in
// checks it ran with the real driver stack.
type FirstBoot struct {
	Software machine.Software
	BurnIn   []CheckResult
}

// OnFirstBoot is the installed OS's report. The engine checks the driver
// pins, judges the burn-in checks, checks that the BIOS attributes stuck,
// then marks the machine ready.
func (e *Engine) OnFirstBoot(ctx context.Context, machineID string, fb FirstBoot) error {
	sw := fb.Software
	var (
		j *store.Job
		r *recipe.Recipe
		m *machine.Machine
		v Verdict
	)
	// The report may race the hand-off step's own move from handoff to
	// firstboot (a kexec'd OS reports within seconds): read the job again
	// when the step moved under us.
	for try := 0; ; try++ {
		var err error
		if j, err = e.activeJob(ctx, machineID); err != nil {
			return fmt.Errorf("first boot from %s: no running job", machineID)
		}
		if j.Step != StepFirstBoot && j.Step != StepHandoff {
			return fmt.Errorf("first boot from %s at step %s", machineID, j.Step)
		}
		sp, _ := decodeSpec(j)
		if r, err = e.jobRecipe(sp); err != nil {
			return err
		}
		if m, err = e.machines.Get(ctx, machineID); err != nil {
			return err
		}
		v = judge(r.Acceptance.Checks, recipe.StageBurnIn, fb.BurnIn, m)
		_, err = e.advance(ctx, j.ID, j.Step, StepVerify, e.timeouts(r).Verify.D(), func(st *ReimageStatus) {
			st.Software = &sw
			st.BurnIn = v.Results
		})
		if err == nil {
			break
		}
		if !errors.Is(err, errWrongStep) || try == 2 {
			return err
		}
	}
	e.event(ctx, machineID, "firstboot", fmt.Sprintf("installed OS up: kernel %s; %d burn-in results", sw.Kernel, len(fb.BurnIn)), map[string]string{"job": j.ID})
	if bad := driverMismatches(r.Drivers, sw.Drivers); len(bad) > 0 {
		e.fail(ctx, j.ID, StepVerify, "driver versions differ from the recipe's pins: "+strings.Join(bad, "; "))
		return nil
	}
	if bad := installedMismatches(r, m, sw); len(bad) > 0 {
		e.fail(ctx, j.ID, StepVerify, strings.Join(bad, "; "))
		return nil
	}
	e.recordWaivers(ctx, machineID, j.ID, v)
	if len(v.Failed) > 0 {
		reason := "burn-in failed: " + strings.Join(v.Failed, "; ")
		e.fail(ctx, j.ID, StepVerify, reason)
		return fmt.Errorf("%w: %s", ErrNotAccepted, reason)
	}
	if err := e.verifyMachine(ctx, machineID, r); err != nil {
		e.fail(ctx, j.ID, StepVerify, err.Error())
		return nil
	}
	e.storeVerified(ctx, machineID, j, sw, v.Results)
	return e.finish(ctx, j.ID, machineID)
}

// storeVerified adds to the machine's inventory history what the job
// verified: the agent's inventory of this job with the installed OS's
// software and every check's numbers (Source "verified").
func (e *Engine) storeVerified(ctx context.Context, machineID string, j *store.Job, sw machine.Software, burnIn []CheckResult) {
	inv, _ := e.jobSnapshot(ctx, machineID, j, "agent")
	cur, err := e.jobs.GetJob(ctx, j.ID) // the status as the load sampler left it
	if err != nil {
		return
	}
	st, err := decodeStatus(cur)
	if err != nil {
		return
	}
	inv.Source, inv.Taken, inv.Software = "verified", e.now(), sw
	if st.LoadSamples > 0 {
		inv.Power.Watts = st.LoadWatts
		inv.Measurements = append(inv.Measurements, machine.Measurement{Check: "node-watts-under-load", OK: true,
			Value: float64(st.LoadWatts), Metrics: map[string]float64{"samples": float64(st.LoadSamples)},
			Detail: fmt.Sprintf("highest BMC reading over %d samples during the burn-in", st.LoadSamples)})
	}
	for _, c := range append(st.Checks, burnIn...) {
		if c.Skipped {
			continue
		}
		inv.Measurements = append(inv.Measurements, machine.Measurement{Check: c.Name, OK: c.OK, Waived: c.Waived, Value: c.Value, Metrics: c.Metrics, Detail: c.Detail})
	}
	if _, err := e.machines.PutInventory(ctx, machineID, inv); err != nil {
		e.log.Warn("storing the verified inventory", "machine", machineID, "err", err)
	}
}

func countStage(cs []recipe.Check, st recipe.Stage) int {
	n := 0
	for _, c := range cs {
		if stageOf(c.Name) == st {
			n++
		}
	}
	return n
}

// installedMismatches checks what the agent set up in the installed OS took:
// the hostname the recipe's pattern gives, cloud-init's user data ran.
func installedMismatches(r *recipe.Recipe, m *machine.Machine, sw machine.Software) []string {
	var bad []string
	if want, err := hostname(r, m); err != nil {
		bad = append(bad, err.Error())
	} else if want != "" && sw.Hostname != want {
		bad = append(bad, fmt.Sprintf("hostname is %q, the recipe's network.hostname gives %q", sw.Hostname, want))
	}
	if r.OS.FirstBoot != nil && r.OS.FirstBoot.CloudInit != "" && sw.CloudInit != "done" {
		got := sw.CloudInit
		if got == "" {
			got = "no cloud-init result was reported (is cloud-init in the image?)"
		}
		bad = append(bad, "first_boot.cloud_init did not complete: "+got)
	}
	return bad
}

func driverMismatches(want, got map[string]string) []string {
	var bad []string
	for name, v := range want {
		if got[name] != v {
			found := got[name]
			if found == "" {
				found = "not installed"
			}
			bad = append(bad, fmt.Sprintf("%s: want %s, found %s", name, v, found))
		}
	}
	sort.Strings(bad)
	return bad
}

// verifyMachine confirms over Redfish, after the installed OS reported,
// what only the BMC can show: the machine is on, it is not left to boot from
// the network again, the boot mode is the recipe's, and the BIOS attributes
// stuck.
func (e *Engine) verifyMachine(ctx context.Context, machineID string, r *recipe.Recipe) error {
	m, err := e.machines.Get(ctx, machineID)
	if err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, e.timeouts(r).Power.D())
	defer cancel()
	b, err := e.dial(bctx, m)
	if err != nil {
		return fmt.Errorf("verifying through the BMC %s: %w", m.BMC.Endpoint, err)
	}
	defer b.Close()
	st, err := b.BootState(bctx)
	if err != nil {
		return fmt.Errorf("reading power and boot state: %w", err)
	}
	var bad []string
	if st.Power != "On" {
		bad = append(bad, fmt.Sprintf("the BMC says the machine is %q, not On", st.Power))
	}
	if (st.Target == "Pxe" || st.Target == "UefiHttp" || st.Target == "Cd") && st.Enabled != "Disabled" {
		bad = append(bad, fmt.Sprintf("the next boot is set to %s (%s), not the installed disk", st.Target, st.Enabled))
	}
	if want := bootMode(r); want != "" {
		switch st.Mode {
		case want:
		case "":
			bad = append(bad, fmt.Sprintf("the BMC does not report the boot mode: bios.boot_mode %s cannot be verified", r.BIOS.BootMode))
		default:
			bad = append(bad, fmt.Sprintf("boot mode is %s, the recipe's bios.boot_mode is %s", st.Mode, r.BIOS.BootMode))
		}
	}
	if attrs := biosAttrs(r); len(attrs) > 0 {
		wrong, err := b.VerifyBIOS(bctx, attrs)
		if err != nil {
			return fmt.Errorf("verifying BIOS: %w", err)
		}
		if len(wrong) > 0 {
			sort.Strings(wrong)
			bad = append(bad, "BIOS attributes did not stick: "+strings.Join(wrong, ", "))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// finish marks the job succeeded and the machine ready, with the time to
// restore split by phase.
func (e *Engine) finish(ctx context.Context, jobID, machineID string) error {
	now := e.now()
	done := func(j *store.Job) (string, error) {
		st, err := decodeStatus(j)
		if err != nil {
			return "", err
		}
		endPhase(&st, phaseOf(j.Step), now)
		start := j.Created
		if p, ok := st.Phases["bmc"]; ok {
			start = p.Start
		}
		st.Restore = now.Sub(start)
		j.State, j.Step, j.Updated = store.JobSucceeded, "done", now
		return formatPhases(st), encodeStatus(j, st)
	}
	// The machine turns ready before its job reads succeeded, so nobody who
	// sees the job done finds the machine still verifying. A crash between
	// the two leaves the job running at verify: it then times out and fails
	// the machine, the safe side.
	cur, err := e.jobs.GetJob(ctx, jobID)
	if err != nil {
		return err
	}
	restore, err := done(cur)
	if err != nil {
		return err
	}
	if err := e.setState(ctx, machineID, machine.StateReady, "verified against its recipe; "+restore, map[string]string{"job": jobID}); err != nil {
		return err
	}
	e.mu.Lock()
	j, err := e.jobs.UpdateJob(ctx, jobID, func(j *store.Job) error { _, err := done(j); return err })
	e.mu.Unlock()
	if err != nil {
		return err
	}
	e.deleteCredentials(ctx, j.ID)
	e.notify(j.ID)
	return nil
}
