package firmware

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware/version"
)

// redfishApplyTime is the OperationApplyTime to ask for.
func redfishApplyTime(applyTime string) string {
	if applyTime == bmc.ApplyImmediate {
		return "Immediate"
	}
	return "OnReset"
}

// start (PhasePending): check the package, note the versions before,
// persist Starting, then start. Targets already at their pins need no
// flash. A BMC that refuses the start as busy (503) started nothing: the
// start is tried again after a poll interval.
func (r *run) start(ctx context.Context) (Phase, error) {
	if err := r.checkPackage(ctx); err != nil {
		return "", err
	}
	before, err := r.versions(ctx)
	if err != nil {
		return "", err
	}
	if r.s.Before == nil {
		r.s.Before = before
	}
	if r.atPins(before) {
		r.s.Message = "already at the pins: nothing flashed"
		return PhaseDone, nil
	}
	req, err := r.request(ctx)
	if err != nil {
		return "", err
	}
	r.s.Phase, r.s.Started = PhaseStarting, r.o.Now()
	if err := r.persist(ctx); err != nil {
		return "", err
	}
	for {
		st, err := r.b.StartUpdate(ctx, r.us, req)
		switch {
		case err == nil:
			return r.started(st), nil
		case bmc.IsKind(err, bmc.KindUnreachable) || bmc.IsKind(err, bmc.KindTimeout):
			// The answer was lost: the start may have reached the BMC.
			r.s.Message = "the answer to the start was lost (" + err.Error() + "): looking for its task"
			return PhaseStarting, nil
		case !bmc.IsKind(err, bmc.KindBusy):
			return "", err
		}
		r.s.Waits++
		if werr := r.wait(ctx, "starting the update (the BMC is busy)", err); werr != nil {
			return "", werr
		}
	}
}

// request is the UpdateRequest for the step: the package's URL for
// SimpleUpdate where the images have one, and the package for a push.
func (r *run) request(ctx context.Context) (bmc.UpdateRequest, error) {
	url, err := r.imgs.URL(ctx, r.s.Package)
	if err != nil {
		return bmc.UpdateRequest{}, fmt.Errorf("the URL of package %s: %w", short(r.s.Package), err)
	}
	sha := r.s.Package
	return bmc.UpdateRequest{ImageURI: url, ImageName: sha[:min(12, len(sha))] + ".bin", Targets: slices.Clone(r.s.Targets),
		ApplyTime: redfishApplyTime(r.s.ApplyTime), Method: r.o.Method,
		Image: func() (io.ReadCloser, error) { return r.imgs.Open(ctx, sha) }}, nil
}

// started records what the BMC answered to the start.
func (r *run) started(st bmc.UpdateStart) Phase {
	r.s.Method = st.Method
	r.s.Task = st.Task
	if r.s.Task == "" {
		r.s.Task = st.Monitor
	}
	if r.s.Task == "" {
		return PhaseReset // done at once: no task to follow
	}
	return PhaseRunning
}

// resumeStart (PhaseStarting, after a restart of ingot): the start may
// have reached the BMC. A task the BMC lists that began at or after the
// start (less a minute of clock skew) and runs an update is adopted;
// versions already changed mean it ran; only with neither is it started
// again (the start never landed).
func (r *run) resumeStart(ctx context.Context) (Phase, error) {
	var tasks []bmc.Task
	err := r.withBMC(ctx, "listing tasks", func() (err error) {
		tasks, err = r.b.Tasks(ctx)
		return err
	})
	if err != nil && !bmc.IsKind(err, bmc.KindNotFound) {
		return "", err
	}
	if t, ok := r.ours(tasks); ok {
		r.s.Task = t.URI
		r.s.Message = "resumed: adopted task " + t.URI + ", started before the restart"
		return PhaseRunning, nil
	}
	have, err := r.versions(ctx)
	if err != nil {
		return "", err
	}
	if !maps.Equal(have, r.s.Before) {
		r.s.Message = "resumed: the versions changed since the start: the update ran"
		return PhaseReset, nil
	}
	r.s.Started = r.o.Now()
	return PhasePending, nil
}

// ours finds the task a start made, newest first: one whose payload names
// the package (SimpleUpdate's ImageURI carries its sha256), else one that
// began no earlier than a minute before the start and runs an update. A
// task without a start time and without the package is never taken.
func (r *run) ours(tasks []bmc.Task) (bmc.Task, bool) {
	for i := len(tasks) - 1; i >= 0; i-- {
		t := tasks[i]
		p := strings.ToLower(t.Payload)
		if strings.Contains(p, r.s.Package) {
			return t, true
		}
		recent := !t.StartTime.IsZero() && !t.StartTime.Before(r.s.Started.Add(-time.Minute))
		if recent && (p == "" || strings.Contains(p, "update") || strings.Contains(p, "upload")) {
			return t, true
		}
	}
	return bmc.Task{}, false
}

// follow (PhaseRunning): read the task until it ends. A BMC away is
// waited for; a task the BMC no longer knows (it restarted and forgot it)
// goes on to the reset, and the versions decide.
func (r *run) follow(ctx context.Context) (Phase, error) {
	for {
		var t bmc.Task
		err := r.withBMC(ctx, "following task "+r.s.Task, func() (err error) {
			t, err = r.b.Task(ctx, r.s.Task)
			return err
		})
		switch {
		case bmc.IsKind(err, bmc.KindNotFound):
			r.s.Message = "the BMC no longer knows task " + r.s.Task + " (it restarted): the versions decide"
			return PhaseReset, nil
		case err != nil:
			return "", err
		case t.Failed():
			return "", fmt.Errorf("the BMC's task %s ended %s: %s", t.URI, t.State, orNone(t.Message()))
		case t.Done():
			return PhaseReset, nil
		}
		if err := r.wait(ctx, fmt.Sprintf("task %s (%s, %d%%)", r.s.Task, t.State, t.Percent), nil); err != nil {
			return "", err
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no message"
	}
	return s
}

// reset (PhaseReset): the host reset the apply time needs, once. A crash
// between the reset and the save that records it resets the host twice
// on resume; it never flashes twice.
func (r *run) reset(ctx context.Context) (Phase, error) {
	if r.s.ApplyTime == bmc.ApplyImmediate || r.s.ResetSent {
		return PhaseVerify, nil
	}
	err := r.withBMC(ctx, "resetting the host ("+r.s.ApplyTime+")", func() error {
		return r.b.ResetForFirmware(ctx, r.s.ApplyTime)
	})
	if err != nil {
		return "", err
	}
	r.s.ResetSent = true
	return PhaseVerify, nil
}

// verify (PhaseVerify): read the versions until every target is at its
// pin (a BIOS may show its new version only after POST); the deadline
// passing with a target elsewhere fails the step with what it reads.
func (r *run) verify(ctx context.Context) (Phase, error) {
	for {
		have, err := r.versions(ctx)
		if err != nil {
			return "", err
		}
		if r.atPins(have) {
			if err := r.checkAfter(); err != nil {
				return "", err
			}
			return PhaseDone, nil
		}
		if werr := r.wait(ctx, "the versions after the update", nil); werr != nil {
			return "", fmt.Errorf("version unchanged after the update: %s (%w)", r.offPins(have), werr)
		}
	}
}

// offPins describes the targets not at their pins.
func (r *run) offPins(have map[string]string) string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(r.s.Want)) {
		if want := r.s.Want[t]; !version.Equal(have[t], want) {
			out = append(out, fmt.Sprintf("%s reads %q (was %q), want %q", t, have[t], r.s.Before[t], want))
		}
	}
	return strings.Join(out, "; ")
}

// checkAfter compares the BMC's SHA-256 measurement of a single target
// with the package, where the BMC reports one.
func (r *run) checkAfter() error {
	if len(r.s.Targets) != 1 {
		return nil
	}
	for _, it := range r.us.Items {
		if it.URI == r.s.Targets[0] && it.SHA256 != "" && it.SHA256 != r.s.Package {
			return fmt.Errorf("%s reads the pinned version but the BMC measures its image as sha256 %s, not the package's %s",
				it.URI, it.SHA256, r.s.Package)
		}
	}
	return nil
}
