package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Firmware jobs bring machines' firmware to their recipes' pins over
// Redfish: a campaign (kind firmware: ingot firmware apply) drives many
// machines under limits, and a reimage of a recipe with firmware.apply
// before-image runs the same per-machine work as its first step. Both are
// thin loops over pkg/firmware: MakePlan, Steps, the resumable Apply
// (persisted after every move, so a restarted ingot never flashes twice),
// the Gate and Run.

// KindFirmware is a firmware campaign's job kind.
const KindFirmware = "firmware"

// StepFirmware is a firmware campaign's step while it runs, and the first
// step of a reimage whose recipe applies firmware before the image.
const StepFirmware = "firmware"

// stepCancelling is a campaign's step once a cancel was asked for: what
// is in flight finishes, nothing more starts.
const stepCancelling = "cancelling"

// FirmwareBMC is what firmware jobs need of a machine's BMC: the calls of
// pkg/firmware's per-node procedure, and a read of the firmware inventory
// alone (*bmc.Client has them all).
type FirmwareBMC interface {
	firmware.BMC
	// FirmwareItems reads the FirmwareInventory (no ActionInfo).
	FirmwareItems(ctx context.Context) ([]bmc.FirmwareItem, error)
}

// FirmwareConfig sets up firmware jobs.
type FirmwareConfig struct {
	// Dial reaches a machine's BMC for firmware work (serve: the pooled
	// session, *bmc.Client); nil: firmware jobs are refused.
	Dial func(ctx context.Context, m *machine.Machine) (FirmwareBMC, error)
	// Images gives a job's packages: from the content store, each at an
	// unguessable URL of the job on a listener the BMC network reaches
	// (serve: --firmware-url), valid while the job runs.
	Images func(jobID string) firmware.Images
	// Timeout bounds each package's step (default 30m); Poll is the time
	// between task and version reads (default 5s).
	Timeout, Poll time.Duration
	// Retry is how often a campaign asks again about nodes its limits
	// hold back (default 1s).
	Retry time.Duration
}

// fwState is the engine's firmware bookkeeping in memory: one update per
// BMC across every job, and the campaigns asked to stop.
type fwState struct {
	cfg    FirmwareConfig
	mu     sync.Mutex
	busy   map[string]chan struct{} // BMC endpoint -> closed when its update ends
	cancel map[string]bool          // campaign job IDs asked to stop
	writes nodeWrites               // campaign node changes waiting for a write
}

func newFWState(cfg FirmwareConfig) *fwState {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Second
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	return &fwState{cfg: cfg, busy: map[string]chan struct{}{}, cancel: map[string]bool{}}
}

// lockBMC waits until no other job updates the BMC at endpoint, then
// holds it until release: at most one update per BMC, whichever jobs ask.
func (f *fwState) lockBMC(ctx context.Context, endpoint string) (release func(), err error) {
	for {
		f.mu.Lock()
		ch, held := f.busy[endpoint]
		if !held {
			ch = make(chan struct{})
			f.busy[endpoint] = ch
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.busy, endpoint)
				f.mu.Unlock()
				close(ch)
			}, nil
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (f *fwState) cancelled(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancel[id]
}

func (f *fwState) setCancelled(id string, v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v {
		f.cancel[id] = true
	} else {
		delete(f.cancel, id)
	}
}

// FirmwareSpec is a firmware campaign's input.
type FirmwareSpec struct {
	// Targets are what the operator named: recipes (every machine of the
	// recipe) or machines; the job's Machines are what they resolved to.
	Targets []string `json:"targets"`
	// Rollback restores the previous image of a component whose update
	// failed, where the BMC keeps one.
	Rollback bool `json:"rollback,omitempty"`
	// PerRack and Total bound the updates in flight (0: no limit); at most
	// one per BMC always. Pause is the least time between two starts.
	PerRack int           `json:"per_rack,omitempty"`
	Total   int           `json:"total,omitempty"`
	Pause   time.Duration `json:"pause,omitempty"`
	// Windows are maintenance windows (firmware.ParseWindow): a node a
	// window names by rack or recipe starts only inside one.
	Windows []string `json:"windows,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	Actor   string   `json:"actor,omitempty"`
}

// limits are the spec's campaign limits.
func (sp FirmwareSpec) limits() (firmware.Limits, error) {
	l := firmware.Limits{PerRack: sp.PerRack, Total: sp.Total, Pause: sp.Pause}
	for _, s := range sp.Windows {
		w, err := firmware.ParseWindow(s)
		if err != nil {
			return l, err
		}
		l.Windows = append(l.Windows, w)
	}
	_, err := firmware.NewGate(l)
	return l, err
}

// Node states of a firmware job.
const (
	NodeWaiting   = "waiting"   // not started: its limits or windows hold it back
	NodeRunning   = "running"   // planned and being updated
	NodeDone      = "done"      // every package applied and read back as pinned
	NodeFailed    = "failed"    // Message says why, in the BMC's words where it gave some
	NodeCancelled = "cancelled" // the campaign was cancelled before its next package
)

// FirmwareStatus is a firmware campaign's progress, persisted with its job.
type FirmwareStatus struct {
	Nodes []FirmwareNode `json:"nodes"`
	// Cancel says who asked the campaign to stop, and why: no further
	// node or package starts; what is in flight finishes.
	Cancel string `json:"cancel,omitempty"`
}

// FirmwareNode is one machine's firmware work: its plan (the entries that
// flash or block), its steps (one per package, as Apply persists them)
// and where it stands.
type FirmwareNode struct {
	Machine string           `json:"machine"` // machine ID
	Name    string           `json:"name"`
	Rack    string           `json:"rack,omitempty"`
	Recipe  string           `json:"recipe,omitempty"`
	BMC     string           `json:"bmc,omitempty"` // its BMC's endpoint
	State   string           `json:"state"`
	Planned bool             `json:"planned,omitempty"`
	Plan    []firmware.Entry `json:"plan,omitempty"`
	Steps   []firmware.Step  `json:"steps,omitempty"`
	Message string           `json:"message,omitempty"`
	Started time.Time        `json:"started,omitzero"`
	Ended   time.Time        `json:"ended,omitzero"`
}

func (n FirmwareNode) final() bool {
	return n.State == NodeDone || n.State == NodeFailed || n.State == NodeCancelled
}

// FirmwareCounts are a campaign's totals.
type FirmwareCounts struct {
	Total, Done, Failed, Waiting, Running, Cancelled int
}

// Counts sums the nodes by state.
func (st FirmwareStatus) Counts() FirmwareCounts {
	c := FirmwareCounts{Total: len(st.Nodes)}
	for _, n := range st.Nodes {
		switch n.State {
		case NodeDone:
			c.Done++
		case NodeFailed:
			c.Failed++
		case NodeRunning:
			c.Running++
		case NodeCancelled:
			c.Cancelled++
		default:
			c.Waiting++
		}
	}
	return c
}

// Firmware decodes a firmware campaign's input and progress.
func Firmware(j *Job) (FirmwareSpec, FirmwareStatus, error) {
	var (
		sp FirmwareSpec
		st FirmwareStatus
	)
	if err := json.Unmarshal(j.Spec, &sp); err != nil {
		return sp, st, fmt.Errorf("job %s: decoding the firmware campaign's spec: %w", j.ID, err)
	}
	if len(j.Status) > 0 {
		if err := json.Unmarshal(j.Status, &st); err != nil {
			return sp, st, fmt.Errorf("job %s: decoding the firmware campaign's status: %w", j.ID, err)
		}
	}
	return sp, st, nil
}

// errNoFirmware: this engine was built without firmware jobs.
var errNoFirmware = errors.New("this server runs no firmware jobs (no BMC dialer for firmware, or no way to serve packages)")

// StartFirmware checks a campaign (its limits and windows, every machine
// it names: a recipe, a BMC, no other job) and starts it; Run drives it
// and resumes it after a restart.
func (e *Engine) StartFirmware(ctx context.Context, sp FirmwareSpec, actor string) (*store.Job, error) {
	if e.fw.cfg.Dial == nil || e.fw.cfg.Images == nil {
		return nil, fmt.Errorf("%w: firmware apply: %v", ErrPreflight, errNoFirmware)
	}
	if _, err := sp.limits(); err != nil {
		return nil, fmt.Errorf("%w: firmware apply: %v", ErrPreflight, err)
	}
	ms, err := e.firmwareMachines(ctx, sp.Targets)
	if err != nil {
		return nil, fmt.Errorf("%w: firmware apply: %v", ErrPreflight, err)
	}
	var problems []string
	st := FirmwareStatus{}
	for _, m := range ms {
		if p := e.firmwareProblem(ctx, &m); p != "" {
			problems = append(problems, p)
			continue
		}
		st.Nodes = append(st.Nodes, FirmwareNode{Machine: m.ID, Name: m.Name, Rack: m.Rack, Recipe: m.Recipe, BMC: m.BMC.Endpoint, State: NodeWaiting})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: firmware apply: %s", ErrPreflight, strings.Join(problems, "; "))
	}
	sp.Actor = actor
	spec, _ := json.Marshal(sp)
	status, _ := json.Marshal(st)
	j := &store.Job{ID: newID("f-"), Kind: KindFirmware, State: store.JobRunning, Step: StepFirmware, Spec: spec, Status: status,
		Created: e.now(), Updated: e.now()}
	for _, n := range st.Nodes {
		j.Machines = append(j.Machines, n.Machine)
	}
	if err := e.jobs.CreateJob(ctx, j); err != nil {
		return nil, fmt.Errorf("creating the firmware campaign: %w", err)
	}
	for _, n := range st.Nodes {
		e.eventBy(ctx, n.Machine, actor, "firmware.queued", "in firmware campaign "+j.ID+": waiting for its turn", map[string]string{"job": j.ID})
	}
	e.log.Info("firmware campaign started", "job", j.ID, "machines", len(st.Nodes), "actor", actor)
	e.kick <- j.ID
	return j, nil
}

// firmwareMachines resolves what an operator named: a recipe stands for
// every machine that uses it, anything else is a machine. Each machine
// once, in the order named.
func (e *Engine) firmwareMachines(ctx context.Context, targets []string) ([]machine.Machine, error) {
	if len(targets) == 0 {
		return nil, errors.New("expected recipes or machines")
	}
	var out []machine.Machine
	seen := map[string]bool{}
	add := func(m machine.Machine) {
		if !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	for _, t := range targets {
		if r, err := e.recipes(t); err == nil && r != nil {
			ms, err := e.machines.List(ctx, store.MachineFilter{Recipe: t})
			if err != nil {
				return nil, err
			}
			if len(ms) == 0 {
				return nil, fmt.Errorf("no machine uses recipe %s", t)
			}
			slices.SortFunc(ms, func(a, b machine.Machine) int { return strings.Compare(a.Name, b.Name) })
			for _, m := range ms {
				add(m)
			}
			continue
		}
		m, err := e.machines.Get(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("%s is neither a recipe nor a machine: %w", t, err)
		}
		add(*m)
	}
	return out, nil
}

// firmwareProblem says why m cannot join a firmware job ("" when it can).
func (e *Engine) firmwareProblem(ctx context.Context, m *machine.Machine) string {
	switch {
	case m.Recipe == "":
		return "machine " + m.Name + " has no recipe: its pins say what to flash"
	case m.BMC.Endpoint == "":
		return "machine " + m.Name + " has no BMC endpoint"
	}
	if _, err := e.recipes(m.Recipe); err != nil {
		return fmt.Sprintf("machine %s: recipe %s: %v", m.Name, m.Recipe, err)
	}
	if j, _ := e.activeJob(ctx, m.ID); j != nil {
		return fmt.Sprintf("machine %s is in job %s (step %s)", m.Name, j.ID, j.Step)
	}
	if j := e.firmwareJobOf(ctx, m.ID); j != nil {
		return fmt.Sprintf("machine %s is in firmware campaign %s", m.Name, j.ID)
	}
	return ""
}

// firmwareJobOf returns the running firmware campaign that holds a
// machine, if any.
func (e *Engine) firmwareJobOf(ctx context.Context, machineID string) *store.Job {
	jobs, err := e.jobs.ListJobs(ctx, store.JobRunning)
	if err != nil {
		return nil
	}
	for i := range jobs {
		if jobs[i].Kind == KindFirmware && slices.Contains(jobs[i].Machines, machineID) {
			return &jobs[i]
		}
	}
	return nil
}
