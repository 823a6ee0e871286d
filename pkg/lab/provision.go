package lab

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Result is how one machine's job ended.
type Result struct {
	Machine string
	Job     store.Job
	Status  engine.ReimageStatus
}

// Restore is the time-to-restore line of a finished job.
func (r Result) Restore() string { return engine.FormatPhases(r.Status) }

// Reimage starts reimage jobs for the named machines (all when none) and
// follows them to their end, printing progress as it changes.
func (l *Lab) Reimage(ctx context.Context, names ...string) ([]Result, error) {
	if len(names) == 0 {
		for _, vm := range l.State.VMs {
			names = append(names, vm.Name)
		}
	}
	jobs, err := l.Start(ctx, names...)
	if err != nil {
		return nil, err
	}
	return l.Follow(ctx, jobs)
}

// Start starts reimage jobs and returns machine name -> job ID.
func (l *Lab) Start(ctx context.Context, names ...string) (map[string]string, error) {
	var res []apiserver.ReimageResult
	if _, err := l.API(ctx, "POST", "/api/v1/reimage", apiserver.ReimageRequest{Machines: names, Reason: "lab"}, &res); err != nil {
		return nil, err
	}
	jobs := map[string]string{}
	for _, r := range res {
		if r.Error != "" {
			return nil, fmt.Errorf("reimage %s: %s", r.Machine, r.Error)
		}
		jobs[r.Machine] = r.Job.ID
		fmt.Fprintf(l.cfg.Out, "lab: %s: reimage job %s started\n", r.Machine, r.Job.ID)
	}
	return jobs, nil
}

// Follow polls jobs until each has ended.
func (l *Lab) Follow(ctx context.Context, jobs map[string]string) ([]Result, error) {
	last := map[string]string{}
	var out []Result
	for len(out) < len(jobs) {
		out = out[:0]
		for name, id := range jobs {
			j, err := l.Job(ctx, id)
			if err != nil {
				return nil, err
			}
			st, _ := engine.Status(j)
			line := fmt.Sprintf("%s: %s", j.Step, j.State)
			if st.Total > 0 && j.Step == engine.StepImage {
				line += fmt.Sprintf(" %d/%d bytes", st.Bytes, st.Total)
			}
			if line != last[name] {
				fmt.Fprintf(l.cfg.Out, "lab: %s: %s\n", name, line)
				last[name] = line
			}
			if j.State != store.JobRunning {
				out = append(out, Result{Machine: name, Job: *j, Status: st})
			}
		}
		if len(out) == len(jobs) {
			break
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return out, nil
}

// Job reads one job.
func (l *Lab) Job(ctx context.Context, id string) (*store.Job, error) {
	var j store.Job
	_, err := l.API(ctx, "GET", "/api/v1/jobs/"+id, nil, &j)
	return &j, err
}

// Machine reads one machine.
func (l *Lab) Machine(ctx context.Context, name string) (*machine.Machine, error) {
	var m machine.Machine
	_, err := l.API(ctx, "GET", "/api/v1/machines/"+name, nil, &m)
	return &m, err
}

// Events reads a machine's events.
func (l *Lab) Events(ctx context.Context, name string) ([]machine.Event, error) {
	var evs []machine.Event
	_, err := l.API(ctx, "GET", "/api/v1/machines/"+name+"/events", nil, &evs)
	return evs, err
}

// WaitConsole waits until a VM's serial console shows marker.
func (l *Lab) WaitConsole(ctx context.Context, vm, marker string) error {
	for _, v := range l.State.VMs {
		if v.Name != vm {
			continue
		}
		for {
			b, _ := os.ReadFile(v.Console)
			if strings.Contains(string(b), marker) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("console of %s never showed %q: %w", vm, marker, ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	return fmt.Errorf("no lab VM %s", vm)
}
