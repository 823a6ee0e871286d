package firmware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware/version"
)

// BMC is what the per-node procedure needs of a BMC; *bmc.Client has it.
// Every call takes a context that bounds it alone. Calls may fail while
// the BMC restarts (connection refused or reset, 503, timeouts): Apply
// waits those out; a client that lost its session logs in again itself.
type BMC interface {
	UpdateService(ctx context.Context) (bmc.UpdateService, error)
	// StartUpdate starts one update and MUST NOT retry once the request
	// may have reached the BMC (a second start flashes twice).
	StartUpdate(ctx context.Context, us bmc.UpdateService, req bmc.UpdateRequest) (bmc.UpdateStart, error)
	// FirmwareItem reads one FirmwareInventory entry (its version now).
	FirmwareItem(ctx context.Context, uri string) (bmc.FirmwareItem, error)
	Task(ctx context.Context, uri string) (bmc.Task, error)
	Tasks(ctx context.Context) ([]bmc.Task, error)
	ResetForFirmware(ctx context.Context, applyTime string) error
	Rollback(ctx context.Context, us bmc.UpdateService, target string) (bmc.UpdateStart, error)
}

var _ BMC = (*bmc.Client)(nil)

// Images gives the procedure a package by its sha256.
type Images interface {
	// URL is where the BMC can fetch the package (SimpleUpdate's
	// ImageURI): an unguessable per-job URL on a listener the BMC network
	// reaches. "" when there is none: the package is pushed.
	URL(ctx context.Context, sha string) (string, error)
	// Open reads the package (for the checksum and for a push).
	Open(ctx context.Context, sha string) (io.ReadCloser, error)
}

// Phase is where a Step stands.
type Phase string

// The phases, in order. Done, Failed and RolledBack are final.
const (
	PhasePending    Phase = "pending"     // nothing sent: starting again is safe
	PhaseStarting   Phase = "starting"    // the start is being sent: it may or may not have reached the BMC
	PhaseRunning    Phase = "running"     // the BMC runs the update (Task); follow it, never start again
	PhaseReset      Phase = "reset"       // the task ended; the host reset the apply time needs comes next
	PhaseVerify     Phase = "verify"      // read the versions until they are the pins
	PhaseDone       Phase = "done"        // every target reads as pinned
	PhaseFailed     Phase = "failed"      // Message says why, in the BMC's words where it gave some
	PhaseRolledBack Phase = "rolled-back" // failed, and the previous image was restored
)

// Final reports a phase that ends the step.
func (p Phase) Final() bool { return p == PhaseDone || p == PhaseFailed || p == PhaseRolledBack }

// Step is one package applied to one node, persisted by the caller after
// every change (Saver) so that a restarted ingot resumes it where it
// stood: from Starting by looking for the task the start may have made,
// from Running by following the task, never by starting again.
type Step struct {
	Package   string            `json:"package"`
	Targets   []string          `json:"targets,omitempty"`
	Want      map[string]string `json:"want"`             // target -> pinned version
	ApplyTime string            `json:"apply_time"`       // immediate, on-reset, ac-cycle
	Before    map[string]string `json:"before,omitempty"` // versions when the step began
	Phase     Phase             `json:"phase"`
	Method    string            `json:"method,omitempty"` // simple-update, multipart-push, http-push
	Task      string            `json:"task,omitempty"`   // the task (or its monitor) to follow
	Started   time.Time         `json:"started,omitzero"` // when the start was sent
	ResetSent bool              `json:"reset_sent,omitempty"`
	Waits     int               `json:"waits,omitempty"` // times the BMC was away (a restart) and was waited for
	Message   string            `json:"message,omitempty"`
}

// Steps makes the steps of a plan, one per package, in the plan's order
// (the BMC's own firmware first).
func Steps(p Plan) []Step {
	var out []Step
	for _, pk := range p.Packages {
		out = append(out, Step{Package: pk.SHA256, Targets: slices.Clone(pk.Targets), Want: maps.Clone(pk.Want),
			ApplyTime: pk.ApplyTime, Phase: PhasePending})
	}
	return out
}

// Saver persists a step; Apply calls it after every change and before
// every action that cannot be taken back. An error stops Apply.
type Saver func(ctx context.Context, s Step) error

// Options tune Apply. Zero fields take the defaults noted.
type Options struct {
	Timeout  time.Duration // the whole step, from (re)entry; default 30m
	Poll     time.Duration // between task and version reads; default 5s
	Rollback bool          // on failure, restore the previous image where the BMC keeps one
	Method   string        // force a start method (bmc.MethodSimpleUpdate ...); "" picks
	// Service is the UpdateService the plan was just made from: Apply
	// does not read the whole inventory again before the start. nil: read.
	Service *bmc.UpdateService
	Now     func() time.Time
	Sleep   func(ctx context.Context, d time.Duration) error
	Logger  *slog.Logger
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrTimeout is the step's deadline passing.
var ErrTimeout = errors.New("firmware step timed out")

// run is one Apply in progress.
type run struct {
	b        BMC
	imgs     Images
	o        Options
	save     Saver
	s        Step
	deadline time.Time
	us       bmc.UpdateService
}

// Apply carries a step forward to a final phase: checks the package's
// sha256, starts the update the way the BMC offers, follows its task,
// resets the host as the apply time needs, waits for a BMC that restarts
// (never counting that as failure or as done), and reads the versions
// again until every target is at its pin. It returns the final step; the
// error is nil for PhaseDone. A canceled ctx returns the step where it
// stands (not final): call Apply with it again to resume.
func Apply(ctx context.Context, b BMC, imgs Images, s Step, o Options, save Saver) (Step, error) {
	o.defaults()
	r := &run{b: b, imgs: imgs, o: o, save: save, s: s, deadline: o.Now().Add(o.Timeout)}
	if o.Service != nil && s.Phase == PhasePending {
		r.us = *o.Service
		r.s.Before = map[string]string{}
		for _, it := range r.us.Items {
			if _, ok := s.Want[it.URI]; ok {
				r.s.Before[it.URI] = it.Version
			}
		}
	}
	if r.s.Phase == "" {
		r.s.Phase = PhasePending
	}
	for !r.s.Phase.Final() {
		if err := ctx.Err(); err != nil {
			return r.s, err
		}
		next, err := r.step(ctx)
		if err != nil && ctx.Err() != nil {
			return r.s, ctx.Err()
		}
		if err != nil {
			r.fail(ctx, err)
		} else {
			r.s.Phase = next
		}
		if err := r.persist(ctx); err != nil {
			return r.s, err
		}
	}
	if r.s.Phase != PhaseDone {
		return r.s, fmt.Errorf("firmware %s: %s", short(r.s.Package), r.s.Message)
	}
	return r.s, nil
}

func (r *run) persist(ctx context.Context) error {
	if r.save == nil {
		return nil
	}
	if err := r.save(ctx, r.s); err != nil {
		return fmt.Errorf("saving firmware step %s (%s): %w", short(r.s.Package), r.s.Phase, err)
	}
	return nil
}

// step runs the current phase and returns the next.
func (r *run) step(ctx context.Context) (Phase, error) {
	r.o.Logger.Debug("firmware step", "package", short(r.s.Package), "step", string(r.s.Phase))
	switch r.s.Phase {
	case PhasePending:
		return r.start(ctx)
	case PhaseStarting:
		return r.resumeStart(ctx)
	case PhaseRunning:
		return r.follow(ctx)
	case PhaseReset:
		return r.reset(ctx)
	case PhaseVerify:
		return r.verify(ctx)
	}
	return "", fmt.Errorf("unknown phase %q", r.s.Phase)
}

// fail ends the step with err's message, restoring the previous image
// when asked to and the BMC can.
func (r *run) fail(ctx context.Context, err error) {
	r.s.Phase, r.s.Message = PhaseFailed, err.Error()
	if !r.o.Rollback || r.s.Started.IsZero() {
		return
	}
	var undone []string
	for _, t := range r.s.Targets {
		if _, rerr := r.b.Rollback(ctx, r.us, t); rerr != nil {
			r.s.Message += "; rollback of " + t + ": " + rerr.Error()
			return
		}
		undone = append(undone, t)
	}
	r.s.Phase = PhaseRolledBack
	r.s.Message += "; rolled back " + strings.Join(undone, ", ")
}

// away reports an error of a BMC that is restarting or busy: waited for,
// never a failure by itself.
func away(err error) bool {
	for _, k := range []bmc.Kind{bmc.KindUnreachable, bmc.KindTimeout, bmc.KindBusy, bmc.KindServer} {
		if bmc.IsKind(err, k) {
			return true
		}
	}
	return false
}

// wait sleeps one poll interval, or fails when the deadline has passed.
func (r *run) wait(ctx context.Context, what string, last error) error {
	if !r.o.Now().Before(r.deadline) {
		if last != nil {
			return fmt.Errorf("%w after %s: %s (last: %v)", ErrTimeout, r.o.Timeout, what, last)
		}
		return fmt.Errorf("%w after %s: %s", ErrTimeout, r.o.Timeout, what)
	}
	return r.o.Sleep(ctx, r.o.Poll)
}

// withBMC calls fn until it succeeds, fails for good, or the deadline
// passes; a BMC away (restarting) is waited for and counted.
func (r *run) withBMC(ctx context.Context, what string, fn func() error) error {
	for {
		err := fn()
		if err == nil || !away(err) {
			return err
		}
		r.s.Waits++
		r.o.Logger.Info("BMC away; waiting", "package", short(r.s.Package), "step", string(r.s.Phase), "err", err)
		if werr := r.wait(ctx, what, err); werr != nil {
			return werr
		}
	}
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// checkPackage verifies the package's content against its sha256.
func (r *run) checkPackage(ctx context.Context) error {
	rc, err := r.imgs.Open(ctx, r.s.Package)
	if err != nil {
		return fmt.Errorf("opening package %s: %w", short(r.s.Package), err)
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		return fmt.Errorf("reading package %s: %w", short(r.s.Package), err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != r.s.Package {
		return fmt.Errorf("package %s: its content has sha256 %s: refusing to flash it", r.s.Package, got)
	}
	return nil
}

// versions reads the targets' versions now: the whole UpdateService the
// first time (StartUpdate needs it), then each target alone.
func (r *run) versions(ctx context.Context) (map[string]string, error) {
	if r.us.URI != "" {
		return r.targetVersions(ctx)
	}
	var us bmc.UpdateService
	err := r.withBMC(ctx, "reading the firmware inventory", func() (err error) {
		us, err = r.b.UpdateService(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	r.us = us
	out := map[string]string{}
	for _, it := range us.Items {
		if _, ok := r.s.Want[it.URI]; ok {
			out[it.URI] = it.Version
		}
	}
	return out, nil
}

// targetVersions reads each target's entry (and keeps what it says, for
// checkAfter).
func (r *run) targetVersions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range slices.Sorted(maps.Keys(r.s.Want)) {
		var it bmc.FirmwareItem
		err := r.withBMC(ctx, "reading firmware "+t, func() (err error) {
			it, err = r.b.FirmwareItem(ctx, t)
			return err
		})
		if err != nil {
			return nil, err
		}
		out[t] = it.Version
		for i := range r.us.Items {
			if r.us.Items[i].URI == t {
				r.us.Items[i].Version, r.us.Items[i].SHA256 = it.Version, it.SHA256
			}
		}
	}
	return out, nil
}

// atPins reports whether every target reads as pinned.
func (r *run) atPins(have map[string]string) bool {
	for t, want := range r.s.Want {
		if !version.Equal(have[t], want) {
			return false
		}
	}
	return true
}
