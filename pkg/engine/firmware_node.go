package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// fwWork is one machine's firmware work in a job, and where its progress
// is kept (a campaign's node, or a reimage's status).
type fwWork struct {
	job      string
	m        *machine.Machine
	r        *recipe.Recipe
	rollback bool
	// load reads the node as persisted; save changes it and persists it.
	load func(ctx context.Context) (FirmwareNode, error)
	save func(ctx context.Context, change func(*FirmwareNode)) error
	// stop reports a cancelled job: no further package starts.
	stop func() bool
	// svc is the firmware inventory the node was just planned from, when
	// planned before its update began (nil: read it again).
	svc *bmc.UpdateService
}

// errFirmwareCancelled ends a node whose job was cancelled between packages.
var errFirmwareCancelled = errors.New("cancelled before its next package")

// applyFirmware brings one machine to its pins: plan it from its BMC's
// firmware inventory (and its in-band inventory) unless a previous run
// did, then apply each package not yet final, in order, persisting every
// move; then read the firmware again and judge it. It stops at the first
// failure with the BMC's own message. A cancelled ctx returns ctx.Err()
// with everything persisted: the next Run resumes from there.
func (e *Engine) applyFirmware(ctx context.Context, w fwWork) error {
	release, err := e.fw.lockBMC(ctx, w.m.BMC.Endpoint)
	if err != nil {
		return err
	}
	defer release()
	n, err := w.load(ctx)
	if err != nil {
		return err
	}
	raw, err := e.fw.cfg.Dial(ctx, w.m)
	if err != nil {
		return fmt.Errorf("BMC %s: %w", w.m.BMC.Endpoint, err)
	}
	b := staggeredBMC{FirmwareBMC: raw, e: e, m: w.m, r: w.r}
	svc := w.svc
	if !n.Planned {
		if svc, n, err = e.planFirmware(ctx, w, b); err != nil {
			return err
		}
	}
	imgs := e.fw.cfg.Images(w.job)
	for i := range n.Steps {
		s := n.Steps[i]
		switch {
		case s.Phase == firmware.PhaseDone:
			continue
		case s.Phase.Final():
			return errors.New(s.Message)
		case s.Phase == firmware.PhasePending && w.stop != nil && w.stop():
			return errFirmwareCancelled
		}
		o := firmware.Options{Timeout: e.fw.cfg.Timeout, Poll: e.fw.cfg.Poll, Rollback: w.rollback, Service: svc, Now: e.now,
			Logger: e.log.With("machine", w.m.ID, "job", w.job)}
		last := s
		var err error
		n.Steps[i], err = firmware.Apply(ctx, b, imgs, s, o, func(ctx context.Context, s firmware.Step) error {
			err := w.save(ctx, func(n *FirmwareNode) { n.Steps[i] = s })
			e.stepEvent(ctx, w, last, s)
			last = s
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
	return e.verifyFirmware(ctx, w, b, readBack(svc, n.Steps))
}

// readBack is the firmware inventory as this run read it: the plan's read
// with each applied target's version as Apply read it back at its pin. nil
// when the plan was read by an earlier process (a resumed node): then
// verifyFirmware reads the inventory again.
func readBack(svc *bmc.UpdateService, steps []firmware.Step) []bmc.FirmwareItem {
	if svc == nil {
		return nil
	}
	items := slices.Clone(svc.Items)
	for _, s := range steps {
		for i := range items {
			if v, ok := s.After[items[i].URI]; ok {
				items[i].Version = v
			}
		}
	}
	return items
}

// planFirmware plans a machine from its BMC's firmware inventory and its
// last in-band inventory, and persists the plan and its steps. An update
// pin the BMC cannot carry out (a refused downgrade, versions that cannot
// be ordered, a component it does not list or will not update) fails the
// node before anything is flashed.
func (e *Engine) planFirmware(ctx context.Context, w fwWork, b FirmwareBMC) (*bmc.UpdateService, FirmwareNode, error) {
	us, err := b.UpdateService(ctx)
	if err != nil {
		return nil, FirmwareNode{}, fmt.Errorf("reading the BMC's firmware inventory: %w", err)
	}
	plan := firmware.MakePlan(us.Items, e.lastInventory(ctx, w.m.ID), w.r.Firmware)
	steps := firmware.Steps(plan)
	var kept []firmware.Entry
	var blocked []string
	for _, en := range plan.Entries {
		if en.Action.Flashes() || en.Action.Blocks() {
			kept = append(kept, en)
		}
		if strings.HasPrefix(string(en.Action), "blocked-") {
			blocked = append(blocked, fmt.Sprintf("%s (%s, pin %s): %s", en.Component, en.Version, en.Pinned, en.Reason))
		}
	}
	var n FirmwareNode
	err = w.save(ctx, func(node *FirmwareNode) {
		node.Planned, node.Plan, node.Steps = true, kept, steps
		n = *node
	})
	if err != nil {
		return nil, n, err
	}
	var what []string
	for _, s := range steps {
		what = append(what, fmt.Sprintf("%s -> %s", short(s.Package), wants(s)))
	}
	msg := fmt.Sprintf("planned from the BMC's firmware inventory: %d package(s)", len(steps))
	if len(what) > 0 {
		msg += ": " + strings.Join(what, "; ")
	}
	e.event(ctx, w.m.ID, "firmware.plan", msg, map[string]string{"job": w.job})
	if len(blocked) > 0 {
		return nil, n, fmt.Errorf("update pins the BMC cannot carry out, nothing flashed: %s", strings.Join(blocked, "; "))
	}
	return &us, n, nil
}

// wants renders a step's targets and pinned versions.
func wants(s firmware.Step) string {
	var out []string
	for _, t := range s.Targets {
		out = append(out, t[strings.LastIndex(t, "/")+1:]+" "+s.Want[t])
	}
	return strings.Join(out, ", ")
}

// stepEvent records a step's move on the machine: a new phase, or a new
// message in the same phase.
func (e *Engine) stepEvent(ctx context.Context, w fwWork, before, now firmware.Step) {
	if before.Phase == now.Phase && before.Message == now.Message && before.Task == now.Task {
		return
	}
	msg := fmt.Sprintf("package %s (%s): %s", short(now.Package), wants(now), now.Phase)
	if now.Task != "" && now.Phase == firmware.PhaseRunning {
		msg += ", task " + now.Task
	}
	if now.Message != "" {
		msg += ": " + now.Message
	}
	e.event(ctx, w.m.ID, "firmware.step", msg, map[string]string{"job": w.job, "package": now.Package, "phase": string(now.Phase)})
}

// lastInventory is the machine's newest in-band inventory (the agent's),
// else its newest of any source; the zero value when it has none.
func (e *Engine) lastInventory(ctx context.Context, id string) machine.Inventory {
	hist, err := e.machines.History(ctx, id)
	if err != nil || len(hist) == 0 {
		return machine.Inventory{}
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Inventory.Source != "redfish" {
			return hist[i].Inventory
		}
	}
	return hist[len(hist)-1].Inventory
}

// lastBMCInventory is the machine's newest BMC inventory ("redfish"),
// else a fresh one.
func (e *Engine) lastBMCInventory(ctx context.Context, id string) machine.Inventory {
	hist, _ := e.machines.History(ctx, id)
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Inventory.Source == "redfish" {
			return hist[i].Inventory
		}
	}
	return machine.Inventory{Source: "redfish"}
}

// verifyFirmware takes the BMC's firmware inventory once every package
// is applied (items: as this run read it, the applied targets read back
// by Apply; nil: read now), stores it with the machine's BMC inventory
// (the fleet's readiness judges the versions now running) and judges the
// node on it: the plan made again must flash nothing more, and no update
// pin may be blocked. Drift over the firmware is run on it too; what it
// still finds (block and warn pins) is told in the event, not failed on: a
// campaign flashes update pins only.
func (e *Engine) verifyFirmware(ctx context.Context, w fwWork, b FirmwareBMC, items []bmc.FirmwareItem) error {
	if items == nil {
		var err error
		if items, err = b.FirmwareItems(ctx); err != nil {
			return fmt.Errorf("reading the firmware inventory after the update: %w", err)
		}
	}
	inv := firmware.WithFirmware(e.lastBMCInventory(ctx, w.m.ID), items)
	inv.Taken = e.now()
	if _, err := e.machines.PutInventory(ctx, w.m.ID, inv); err != nil {
		e.log.Warn("storing the BMC's firmware inventory", "machine", w.m.ID, "err", err)
	}
	var off, drift []string
	for _, en := range firmware.MakePlan(items, e.lastInventory(ctx, w.m.ID), w.r.Firmware).Entries {
		if en.Action.Flashes() || strings.HasPrefix(string(en.Action), "blocked-") {
			off = append(off, fmt.Sprintf("%s reads %q, pinned %q (%s)", en.Component, en.Version, en.Pinned, en.Action))
		}
	}
	if e.drift != nil {
		for _, f := range e.drift(inv, w.r) {
			if strings.HasPrefix(strings.ToLower(f.Part), "firmware") {
				drift = append(drift, f.Severity+" "+f.Part+": "+f.Message)
			}
		}
	}
	if len(off) > 0 {
		msg := "firmware read again after the update is off its update pins: " + strings.Join(off, "; ")
		e.event(ctx, w.m.ID, "firmware.drift", msg, map[string]string{"job": w.job})
		return errors.New(msg)
	}
	msg := "every update pin read again is at its version"
	if len(drift) > 0 {
		msg += "; drift still finds: " + strings.Join(drift, "; ")
	}
	e.event(ctx, w.m.ID, "firmware.verified", msg, map[string]string{"job": w.job})
	return nil
}

// staggeredBMC powers the host on for firmware (the reset an apply time
// needs) through the engine's start gate, as every other power-on.
type staggeredBMC struct {
	FirmwareBMC
	e *Engine
	m *machine.Machine
	r *recipe.Recipe
}

func (b staggeredBMC) ResetForFirmware(ctx context.Context, applyTime string) error {
	if applyTime != bmc.ApplyImmediate && applyTime != "" {
		if err := b.e.startSlot(ctx, b.m, b.r); err != nil {
			return err
		}
	}
	return b.FirmwareBMC.ResetForFirmware(ctx, applyTime)
}
