package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Owner decides which ingot instance runs each job where several share one
// store (pkg/scaleout on etcd); a single instance runs them all (Solo).
// The engine claims a job before it does the job's own work (a BMC step,
// a deadline, a rollout's waves) and does that work under the context the
// claim returns.
type Owner interface {
	// Claim makes this instance the job's owner, taking it over from an
	// owner that is gone, and returns the context the job's work runs
	// under: every store write made with it carries the ownership's fence
	// (store.WithFence), so it fails with store.ErrFenced once another
	// instance owns the job, and it ends the moment the ownership is lost.
	// A job this instance holds already returns the same context; an
	// error when a live instance owns it (the engine leaves it alone).
	Claim(ctx context.Context, jobID string) (context.Context, error)
	// Holds fails when ctx came from Claim and the ownership may have
	// lapsed, judged from the clock now (not from a timer that a paused
	// process has not run yet). The engine asks before every BMC call
	// that changes the machine.
	Holds(ctx context.Context) error
	// Release gives up a job that ended.
	Release(ctx context.Context, jobID string)
	// Run calls adopt with each running job this instance should pick up
	// (its owner is gone, or another instance's write moved it to a step
	// this instance runs) until ctx ends.
	Run(ctx context.Context, adopt func(ctx context.Context, jobID string)) error
}

// Solo is the Owner of a single instance (bbolt): every job is its own,
// nothing is fenced, nothing is ever taken over.
type Solo struct{}

// Claim returns ctx: the job is this instance's.
func (Solo) Claim(ctx context.Context, _ string) (context.Context, error) { return ctx, nil }

// Holds is always nil.
func (Solo) Holds(context.Context) error { return nil }

// Release does nothing.
func (Solo) Release(context.Context, string) {}

// Run waits for ctx: no other instance hands jobs over.
func (Solo) Run(ctx context.Context, _ func(context.Context, string)) error {
	<-ctx.Done()
	return nil
}

// ownership is the engine's side of Owner: the claims it resumed work
// for (a rollout's driver, a burn-in's load sampler run once a claim).
type ownership struct {
	owner Owner
	mu    sync.Mutex
	// resumed maps a job to the claim context its long-running work was
	// started under; a new claim (a takeover, a rejoin) starts it again.
	resumed map[string]context.Context
}

func newOwnership(o Owner) ownership {
	if o == nil {
		o = Solo{}
	}
	return ownership{owner: o, resumed: map[string]context.Context{}}
}

// claim is Owner.Claim; ok is false when the job is another instance's.
func (e *Engine) claim(ctx context.Context, jobID string) (context.Context, bool) {
	jctx, err := e.own.owner.Claim(ctx, jobID)
	if err != nil {
		e.log.Debug("job is not this instance's", "job", jobID, "err", err)
		return nil, false
	}
	return jctx, true
}

// fresh records that the job's long-running work starts under jctx, and
// reports whether it was not started under it before.
func (e *Engine) fresh(jobID string, jctx context.Context) bool {
	e.own.mu.Lock()
	defer e.own.mu.Unlock()
	if e.own.resumed[jobID] == jctx {
		return false
	}
	e.own.resumed[jobID] = jctx
	return true
}

// forget drops a job's record once its work has stopped.
func (e *Engine) forget(jobID string, jctx context.Context) {
	e.own.mu.Lock()
	defer e.own.mu.Unlock()
	if e.own.resumed[jobID] == jctx {
		delete(e.own.resumed, jobID)
	}
}

// adopt picks up a running job: claims it (taking it over from an
// instance that is gone) and resumes it from its persisted step, as Run
// does at start. An ended job is released. Owner.Run calls it, and Run
// for each running job at start and each new rollout.
func (e *Engine) adopt(ctx context.Context, jobID string) {
	j, err := e.jobs.GetJob(ctx, jobID)
	if err != nil {
		return
	}
	if j.State != store.JobRunning {
		e.own.owner.Release(ctx, jobID)
		return
	}
	jctx, ok := e.claim(ctx, jobID)
	if !ok {
		return
	}
	isNew := e.fresh(jobID, jctx)
	if isNew && j.Step != "" {
		e.log.Info("resuming job", "job", j.ID, "step", j.Step)
		e.event(jctx, firstOf(j.Machines), "job.resumed", "resuming at step "+j.Step+" (ingot restarted, or this instance took the job over)", map[string]string{"job": j.ID})
	}
	switch {
	case j.Kind == "rollout":
		if isNew {
			go func() {
				e.driveRollout(jctx, jobID)
				e.forget(jobID, jctx)
			}()
		}
	case j.Step == StepBMC || j.Step == StepHandoff || j.Step == StepFirmware || j.Kind == KindFirmware:
		e.kick <- jobID
	case j.Step == StepFirstBoot && isNew:
		e.resumeLoadSampler(jctx, j)
	}
}

// guardBMC makes dial's sessions ask the owner before each call that
// changes the machine (power, boot override, media, BIOS): a job's BMC
// step that lost its ownership makes no further change, even in the
// instant between a paused process running again and its timers firing.
// Reads go through unguarded.
func guardBMC(dial DialBMC, o Owner, log *slog.Logger) DialBMC {
	if _, solo := o.(Solo); solo {
		return dial
	}
	return func(ctx context.Context, m *machine.Machine) (BMC, error) {
		g := guard{o: o, log: log.With("machine", m.Name)}
		if err := g.holds(ctx, "connect"); err != nil {
			return nil, fmt.Errorf("BMC of %s: %w", m.Name, err)
		}
		b, err := dial(ctx, m)
		if err != nil {
			return nil, err
		}
		return guardedBMC{BMC: b, g: g}, nil
	}
}

// guard asks the owner before a BMC call, and logs a refusal.
type guard struct {
	o   Owner
	log *slog.Logger
}

func (g guard) holds(ctx context.Context, call string) error {
	err := g.o.Holds(ctx)
	if err != nil {
		var job string
		for _, f := range store.Fences(ctx) {
			job = f.Key
		}
		g.log.Warn("BMC call not made: this instance may no longer own the job", "call", call, "fence", job, "err", err)
	}
	return err
}

// guardedBMC is a BMC whose changing calls first ask the owner.
type guardedBMC struct {
	BMC
	g guard
}

func (g guardedBMC) PowerCycle(ctx context.Context) error {
	if err := g.g.holds(ctx, "PowerCycle"); err != nil {
		return err
	}
	return g.BMC.PowerCycle(ctx)
}

func (g guardedBMC) SetBootOverride(ctx context.Context, target, uri string, once bool) error {
	if err := g.g.holds(ctx, "SetBootOverride"); err != nil {
		return err
	}
	return g.BMC.SetBootOverride(ctx, target, uri, once)
}

func (g guardedBMC) InsertMedia(ctx context.Context, image string) error {
	if err := g.g.holds(ctx, "InsertMedia"); err != nil {
		return err
	}
	return g.BMC.InsertMedia(ctx, image)
}

func (g guardedBMC) EjectMedia(ctx context.Context) error {
	if err := g.g.holds(ctx, "EjectMedia"); err != nil {
		return err
	}
	return g.BMC.EjectMedia(ctx)
}

func (g guardedBMC) ApplyBIOS(ctx context.Context, attrs map[string]any) error {
	if err := g.g.holds(ctx, "ApplyBIOS"); err != nil {
		return err
	}
	return g.BMC.ApplyBIOS(ctx, attrs)
}

func (g guardedBMC) SetBootMode(ctx context.Context, mode string) error {
	if err := g.g.holds(ctx, "SetBootMode"); err != nil {
		return err
	}
	return g.BMC.SetBootMode(ctx, mode)
}
