package lab

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/client"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// Result is how one machine's job ended.
type Result struct {
	Machine string
	Job     wire.Job
	Status  wire.ReimageStatus
}

// Restore is the time-to-restore line of a finished job.
func (r Result) Restore() string { return r.Status.RestoreLine() }

// Client is the operator API client of the lab's server, dialling inside
// the lab's namespace with the lab's token: the lab drives ingot as an
// operator does, never through its database.
func (l *Lab) Client() *client.Client {
	if l.client == nil {
		c, err := client.New(client.Config{Server: l.State.APIURL, Token: l.State.Token, HTTP: l.HTTP})
		if err != nil {
			panic(fmt.Sprintf("lab: API URL %q: %v", l.State.APIURL, err)) // the lab writes it itself
		}
		l.client = c
	}
	return l.client
}

// Reimage starts reimage jobs for the named machines (all when none) and
// follows them to their end, printing progress as it changes.
func (l *Lab) Reimage(ctx context.Context, names ...string) ([]Result, error) {
	if len(names) == 0 {
		for _, vm := range l.State.VMs {
			names = append(names, vm.Name)
		}
	}
	return l.ReimageHandoff(ctx, "", names...)
}

// ReimageHandoff is Reimage with the recipe's os.handoff overridden for
// these jobs ("reboot" or "kexec"; "" the recipe's).
func (l *Lab) ReimageHandoff(ctx context.Context, handoff string, names ...string) ([]Result, error) {
	return l.reimage(ctx, wire.ReimageRequest{Machines: names, Reason: "lab", Handoff: handoff})
}

// ReimageWarm is Reimage as a warm reimage: the installed OS kexecs into
// the agent at the server's signed request (no POST at all).
func (l *Lab) ReimageWarm(ctx context.Context, names ...string) ([]Result, error) {
	return l.reimage(ctx, wire.ReimageRequest{Machines: names, Reason: "lab", Warm: true})
}

func (l *Lab) reimage(ctx context.Context, req wire.ReimageRequest) ([]Result, error) {
	res, err := l.Client().Reimage(ctx, req)
	if err != nil {
		return nil, err
	}
	jobs, err := l.started(res)
	if err != nil {
		return nil, err
	}
	return l.Follow(ctx, jobs)
}

// Start starts reimage jobs and returns machine name -> job ID.
func (l *Lab) Start(ctx context.Context, names ...string) (map[string]string, error) {
	res, err := l.Client().Reimage(ctx, wire.ReimageRequest{Machines: names, Reason: "lab"})
	if err != nil {
		return nil, err
	}
	return l.started(res)
}

// started names each started job, or the first refusal.
func (l *Lab) started(res []wire.ReimageResult) (map[string]string, error) {
	jobs := map[string]string{}
	for _, r := range res {
		if r.Error != "" || r.Job == nil {
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
	ended, err := l.Client().Follow(ctx, jobs, time.Second, func(name string, j *wire.Job) {
		st := reimageStatus(j)
		line := fmt.Sprintf("%s: %s", j.Step, j.State)
		if st.Total > 0 && j.Step == wire.StepImage {
			line += fmt.Sprintf(" %d/%d bytes", st.Bytes, st.Total)
		}
		if line != last[name] {
			fmt.Fprintf(l.cfg.Out, "lab: %s: %s\n", name, line)
			last[name] = line
		}
	})
	var out []Result
	for name, j := range ended {
		if j.State != wire.JobRunning {
			out = append(out, Result{Machine: name, Job: *j, Status: reimageStatus(j)})
		}
	}
	return out, err
}

// Job reads one job.
func (l *Lab) Job(ctx context.Context, id string) (*wire.Job, error) { return l.Client().Job(ctx, id) }

// Machine reads one machine.
func (l *Lab) Machine(ctx context.Context, name string) (*machine.Machine, error) {
	return l.Client().Machine(ctx, name)
}

// Events reads a machine's events.
func (l *Lab) Events(ctx context.Context, name string) ([]machine.Event, error) {
	return l.Client().Events(ctx, name, 0, 0)
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

// reimageStatus is a reimage job's progress (zero when it has none yet).
func reimageStatus(j *wire.Job) wire.ReimageStatus {
	if j.Reimage == nil {
		return wire.ReimageStatus{}
	}
	return *j.Reimage
}
