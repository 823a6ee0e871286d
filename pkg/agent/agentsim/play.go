package agentsim

import (
	"context"
	"net/netip"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent/checks"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// loopback is where every simulated machine calls from (serve's
// first-use binding ties it to the machine at its first call).
var loopback = netip.MustParseAddr("127.0.0.1")

// agent does what ingot-agent does after the network boot, in its order:
// exchange the boot credential the iPXE script carried, task, inventory,
// image progress, the agent-stage checks, done. A refused call ends it as
// the real agent ends: a done with ok false (whose own refusal it
// ignores).
func (s *Sim) agent(ctx context.Context, n *Node, machineID string) {
	m, err := s.cfg.Machines.Get(ctx, machineID)
	if err != nil {
		s.fail(n, "agent on %s: %v", machineID, err)
		return
	}
	mac := n.MAC
	if mac == "" && len(m.MACs) > 0 {
		mac = m.MACs[0]
	}
	boot, err := s.cfg.Boot.IssueBootCredential(ctx, m, mac, loopback)
	if err != nil {
		s.fail(n, "agent on %s: boot credential: %v", m.Name, err)
		return
	}
	var x api.Exchange
	if _, err := s.Call(ctx, boot, "POST", api.PathExchange, struct{}{}, &x); err != nil {
		s.fail(n, "agent on %s: %v", m.Name, err)
		return
	}
	var task api.Task
	if _, err := s.Call(ctx, x.Token, "GET", api.PathTask, nil, &task); err != nil {
		s.fail(n, "agent on %s: %v", m.Name, err)
		return
	}
	s.mu.Lock()
	s.agents[machineID] = agentRun{task: task, token: x.Token}
	s.mu.Unlock()
	n.logf("agent: task %s %s image %s hostname %q, %d checks", task.Mode, task.Recipe, task.Image.SHA256, task.Hostname, len(task.Checks))
	if err := s.report(ctx, n, x.Token, task); err != nil {
		s.fail(n, "agent on %s: %v", m.Name, err)
		_, derr := s.Call(ctx, x.Token, "POST", api.PathDone, api.Done{Step: api.StepChecks, Reason: err.Error()}, nil)
		n.logf("agent: done ok=false: %v", derr)
		return
	}
	n.logf("agent: done")
}

// report sends the inventory, the image's progress, the checks and done.
func (s *Sim) report(ctx context.Context, n *Node, tok string, task api.Task) error {
	inv := Minimal()
	if n.Inventory != nil {
		inv = n.Inventory(task)
	}
	if _, err := s.Call(ctx, tok, "POST", api.PathInventory, inv, nil); err != nil {
		return err
	}
	image := ImageProgress(max(task.Image.Size, 1<<20), 1)
	if n.Image != nil {
		image = n.Image(task)
	}
	for i, p := range image {
		if i > 0 && n.Delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(n.Delay):
			}
		}
		if _, err := s.Call(ctx, tok, "POST", api.PathProgress, p, nil); err != nil {
			return err
		}
	}
	results := checks.Run(inv, task.Checks, task.Expected)
	if n.Checks != nil {
		results = n.Checks(task, inv)
	}
	if _, err := s.Call(ctx, tok, "POST", api.PathChecks, results, nil); err != nil {
		return err
	}
	done := api.Done{Step: api.StepChecks, OK: true, Disk: "/dev/sda", ImageSHA256: task.Image.SHA256, Handoff: task.Handoff}
	if n.Done != nil {
		done = n.Done(task)
	}
	_, err := s.Call(ctx, tok, "POST", api.PathDone, done, nil)
	return err
}

// installedOS plays the first boot of the installed system.
func (s *Sim) installedOS(ctx context.Context, n *Node, jobID, machineID string) {
	s.mu.Lock()
	run := s.agents[machineID]
	s.mu.Unlock()
	b := Boot{Job: jobID, Machine: machineID, Task: run.task, AgentToken: run.token, Call: s.Call}
	if n.InstalledOS != nil {
		n.InstalledOS(ctx, b)
		return
	}
	fb := api.FirstBoot{Software: machine.Software{Kernel: "6.1.0", Hostname: run.task.Hostname, Drivers: map[string]string{}}}
	if _, err := s.Call(ctx, run.task.FirstBootSecret, "POST", api.PathFirstboot, fb, nil); err != nil {
		s.fail(n, "first boot of %s: %v", machineID, err)
		return
	}
	n.logf("first boot: reported")
}

// ImageProgress splits writing an image of total bytes into n progress
// reports of equal size, the last at total.
func ImageProgress(total int64, n int) []api.Progress {
	n = max(n, 1)
	out := make([]api.Progress, 0, n)
	for i := 1; i <= n; i++ {
		b := total * int64(i) / int64(n)
		out = append(out, api.Progress{Step: api.StepImage, Bytes: b, Total: total, Written: b})
	}
	return out
}

// Minimal is the zero Node's inventory: one CPU and 2 GiB of a QEMU
// machine (recipes judge memory-size on it: the server runs the check
// again on the inventory the agent reported).
func Minimal() machine.Inventory {
	return machine.Inventory{Source: "agent", CPUs: []machine.CPU{{Model: "QEMU"}}, DIMMs: []machine.DIMM{{SizeMiB: 2048}}}
}
