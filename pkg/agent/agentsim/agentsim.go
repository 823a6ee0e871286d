// Package agentsim simulates machines for tests that drive ingot
// in-process (serve.Build): for every running reimage job of a machine it
// simulates, it plays the in-RAM agent when the machine network-boots
// (the job at step boot) and the installed OS when it boots from its disk
// (step firstboot), once per job, attempt and step, over the real agent
// API (HTTP, machine credentials). What each machine reports is its
// Node's; the zero Node is a small healthy machine.
//
// It is test support: nothing in ingot's binaries imports it.
package agentsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// Jobs lists jobs by state: *engine.Engine.
type Jobs interface {
	Jobs(ctx context.Context, state engine.JobState) ([]engine.Job, error)
}

// Machines finds a machine: *fleet.Service.
type Machines interface {
	Get(ctx context.Context, idOrName string) (*machine.Machine, error)
}

// BootIssuer gives a booting machine its boot credential, as the iPXE
// script render does: *apiserver.Server.
type BootIssuer interface {
	IssueBootCredential(ctx context.Context, m *machine.Machine, mac string, from netip.Addr) (string, error)
}

// Config builds a Sim.
type Config struct {
	URL      string       // the API's base URL (https://127.0.0.1:8443)
	Client   *http.Client // nil: http.DefaultClient
	Jobs     Jobs
	Machines Machines
	Boot     BootIssuer
	// Node says how a machine behaves; false: the machine is not
	// simulated (its jobs are left alone). nil: every machine is, as the
	// zero Node.
	Node func(machineID string) (*Node, bool)
	// Errorf receives every refused call (t.Errorf); nil: Node.Logf only.
	Errorf func(format string, args ...any)
	// Poll is how often running jobs are listed (default 10 ms).
	Poll time.Duration
}

// Node is one simulated machine. Every field has a default.
type Node struct {
	// MAC is the boot MAC (default: the machine's first).
	MAC string
	// Inventory is what the agent reports (default Minimal()).
	Inventory func(task api.Task) machine.Inventory
	// Checks are the agent-stage results (default: pkg/agent/checks run
	// on the inventory, as the real agent does).
	Checks func(task api.Task, inv machine.Inventory) []api.CheckResult
	// Image are the progress reports of the image write, sent Delay
	// apart (default ImageProgress of the task's image in one report).
	Image func(task api.Task) []api.Progress
	Delay time.Duration
	// Done is the agent's last report (default: ok after the checks,
	// the task's image written to /dev/sda, the task's handoff).
	Done func(task api.Task) api.Done
	// InstalledOS is what the installed OS does at its first boot
	// (default: reports a kernel with the job's first-boot secret).
	InstalledOS func(ctx context.Context, b Boot)
	// Logf receives what the simulation did (default: nothing).
	Logf func(format string, args ...any)
}

// Boot is what the installed OS has at its first boot: the task its agent
// was given (with the first-boot secret), the agent's credential, and a
// way to call the API.
type Boot struct {
	Job        string
	Machine    string
	Task       api.Task
	AgentToken string
	Call       func(ctx context.Context, tok, method, path string, in, out any) (int, error)
}

// Sim is the simulation; Run it.
type Sim struct {
	cfg    Config
	mu     sync.Mutex
	played map[string]bool     // job/attempt/step
	agents map[string]agentRun // machine ID -> what its last agent got
}

type agentRun struct {
	task  api.Task
	token string
}

// New builds a Sim.
func New(cfg Config) *Sim {
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	if cfg.Node == nil {
		cfg.Node = func(string) (*Node, bool) { return &Node{}, true }
	}
	return &Sim{cfg: cfg, played: map[string]bool{}, agents: map[string]agentRun{}}
}

// Run plays until ctx ends.
func (s *Sim) Run(ctx context.Context) {
	for ctx.Err() == nil {
		jobs, _ := s.cfg.Jobs.Jobs(ctx, engine.JobRunning)
		for _, j := range jobs {
			if j.Kind != "reimage" || len(j.Machines) != 1 || (j.Step != engine.StepBoot && j.Step != engine.StepFirstBoot) {
				continue
			}
			n, ok := s.cfg.Node(j.Machines[0])
			if !ok {
				continue
			}
			if n == nil {
				n = &Node{}
			}
			key := fmt.Sprintf("%s/%d/%s", j.ID, j.Attempt, j.Step)
			s.mu.Lock()
			seen := s.played[key]
			s.played[key] = true
			s.mu.Unlock()
			switch {
			case seen:
			case j.Step == engine.StepBoot:
				go s.agent(ctx, n, j.Machines[0])
			default:
				go s.installedOS(ctx, n, j.ID, j.Machines[0])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.Poll):
		}
	}
}

// Call makes one API request; tok "" sends no Authorization header. It
// returns the HTTP status and, for a status of 300 or more, an error with
// the server's message.
func (s *Sim) Call(ctx context.Context, tok, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.cfg.URL+path, body)
	if err != nil {
		return 0, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

func (n *Node) logf(format string, args ...any) {
	if n.Logf != nil {
		n.Logf(format, args...)
	}
}

// fail records a refused call.
func (s *Sim) fail(n *Node, format string, args ...any) {
	n.logf(format, args...)
	if s.cfg.Errorf != nil {
		s.cfg.Errorf(format, args...)
	}
}
