package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// beforeImage reports whether a reimage of r starts with the firmware
// step: the recipe says firmware.apply before-image and pins something
// with policy update.
func beforeImage(r *recipe.Recipe) bool {
	return r != nil && r.Firmware.BeforeImage() && r.Firmware.Updates()
}

// firmwareDeadline bounds a reimage's firmware step: every update pin's
// step timeout, and one more for the read-back.
func (e *Engine) firmwareDeadline(r *recipe.Recipe) time.Duration {
	n := 1
	for _, p := range r.Firmware.Pins() {
		if p.Policy == recipe.FirmwareUpdate {
			n++
		}
	}
	return time.Duration(n) * e.fw.cfg.Timeout
}

// firmwareProblems are the preflight's findings about a reimage's firmware
// step: the server must be able to run it.
func (e *Engine) firmwareProblems(r *recipe.Recipe) []string {
	if !beforeImage(r) || (e.fw.cfg.Dial != nil && e.fw.cfg.Images != nil) {
		return nil
	}
	return []string{fmt.Sprintf("recipe %s applies firmware before the image (firmware.apply: before-image), but %v", r.Name, errNoFirmware)}
}

// runFirmwareStep is a reimage's firmware step (recipe firmware.apply:
// before-image): the machine's update pins applied as a campaign would,
// with its progress in the job's status (Firmware) and its own phase in
// the time to restore; then the BMC step. A failure fails the job without
// a retry (nothing is flashed twice); a restart resumes from the
// persisted step.
func (e *Engine) runFirmwareStep(ctx context.Context, j *store.Job) {
	sp, err := decodeSpec(j)
	if err != nil {
		e.fail(ctx, j.ID, StepFirmware, err.Error())
		return
	}
	m, err := e.machines.Get(ctx, sp.Machine)
	if err != nil {
		e.fail(ctx, j.ID, StepFirmware, err.Error())
		return
	}
	r, err := e.jobRecipe(sp)
	if err != nil {
		e.fail(ctx, j.ID, StepFirmware, "recipe: "+err.Error())
		return
	}
	id := j.ID
	_, _ = e.advance(ctx, id, StepFirmware, "", 0, func(st *ReimageStatus) {
		startPhase(st, "firmware", e.now())
		if st.Firmware == nil {
			st.Firmware = &FirmwareNode{Machine: m.ID, Name: m.Name, Rack: m.Rack, Recipe: r.Name, BMC: m.BMC.Endpoint, Started: e.now()}
		}
		st.Firmware.State = NodeRunning
	})
	w := fwWork{job: id, m: m, r: r,
		load: func(ctx context.Context) (FirmwareNode, error) {
			j, err := e.jobs.GetJob(ctx, id)
			if err != nil {
				return FirmwareNode{}, err
			}
			st, err := decodeStatus(j)
			if err != nil || st.Firmware == nil {
				return FirmwareNode{}, errors.Join(err, errors.New("the job's firmware status is missing"))
			}
			return *st.Firmware, nil
		},
		save: func(ctx context.Context, change func(*FirmwareNode)) error {
			_, err := e.advance(ctx, id, StepFirmware, "", 0, func(st *ReimageStatus) { change(st.Firmware) })
			return err
		}}
	err = e.applyFirmware(ctx, w)
	if ctx.Err() != nil {
		return
	}
	state, msg := NodeDone, "every package applied and read back as pinned"
	if err != nil {
		state, msg = NodeFailed, err.Error()
	}
	_, _ = e.advance(ctx, id, StepFirmware, "", 0, func(st *ReimageStatus) {
		st.Firmware.State, st.Firmware.Message, st.Firmware.Ended = state, msg, e.now()
	})
	if err != nil {
		e.fail(ctx, id, StepFirmware, "firmware before the image: "+msg)
		return
	}
	e.event(ctx, m.ID, "firmware.done", "firmware at its pins before the image: "+msg, map[string]string{"job": id})
	if _, err := e.advance(ctx, id, StepFirmware, StepBMC, e.defaults.Power.D(), nil); err == nil {
		e.kick <- id
	}
}

// firmwareFirst starts a new reimage job at the firmware step when its
// recipe applies firmware before the image.
func (e *Engine) firmwareFirst(j *store.Job, sp ReimageSpec) {
	r, err := e.jobRecipe(sp)
	if err != nil || !beforeImage(r) {
		return
	}
	j.Step, j.Deadline = StepFirmware, e.now().Add(e.firmwareDeadline(r))
}

// firmwareSteps are the firmware step's lines of a reimage plan.
func firmwareSteps(r *recipe.Recipe) []string {
	if !beforeImage(r) {
		return nil
	}
	return []string{"firmware: bring the update pins to their versions before the image (firmware.apply: before-image), one package at a time"}
}

// runFirmwareJob runs a firmware campaign, or a reimage's firmware step,
// when j is one; it reports whether it was.
func (e *Engine) runFirmwareJob(ctx context.Context, j *store.Job) bool {
	switch {
	case j.Kind == KindFirmware:
		e.runCampaign(ctx, j.ID)
	case j.Step == StepFirmware:
		e.runFirmwareStep(ctx, j)
	default:
		return false
	}
	return true
}
