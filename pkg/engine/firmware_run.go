package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/store"
)

// runCampaign drives a firmware campaign until every node has ended or
// ctx does (serve stopping: the next Run resumes it from what each node
// persisted). Nodes are planned ahead of their turns (planCampaign: reads,
// which take no update slot) and start as the gate admits them: one update
// per BMC, the campaign's per-rack and total limits, its pause and windows.
func (e *Engine) runCampaign(ctx context.Context, id string) {
	sp, st, err := e.campaign(ctx, id)
	if err != nil {
		return
	}
	lim, err := sp.limits()
	if err != nil {
		e.endCampaign(ctx, id, err.Error())
		return
	}
	if st.Cancel != "" {
		e.fw.setCancelled(id, true)
	}
	plans := e.planCampaign(ctx, id, sp, st.Nodes)
	g, _ := firmware.NewGate(lim)
	var nodes []firmware.Node
	for _, n := range st.Nodes {
		if !n.final() {
			nodes = append(nodes, firmware.Node{Name: n.Machine, BMC: n.BMC, Rack: n.Rack, Recipe: n.Recipe})
		}
	}
	stop := func() bool { return e.fw.cancelled(id) }
	results := firmware.Run(ctx, g, nodes, firmware.RunOptions{Retry: e.fw.cfg.Retry, Now: e.now, Stop: stop},
		func(ctx context.Context, n firmware.Node) error { return e.campaignNode(ctx, id, sp, n.Name, plans) })
	if ctx.Err() != nil {
		return
	}
	for _, r := range results {
		if errors.Is(r.Err, firmware.ErrStopped) {
			_ = e.saveNode(ctx, id, r.Node.Name, func(n *FirmwareNode) {
				n.State, n.Message, n.Ended = NodeCancelled, "the campaign was cancelled before this node started", e.now()
			})
		}
	}
	e.endCampaign(ctx, id, "")
}

// campaign reads a running campaign; an error (and the job ended failed
// when it cannot be decoded) when it is not one.
func (e *Engine) campaign(ctx context.Context, id string) (FirmwareSpec, FirmwareStatus, error) {
	j, err := e.jobs.GetJob(ctx, id)
	if err != nil {
		return FirmwareSpec{}, FirmwareStatus{}, err
	}
	if j.State != store.JobRunning {
		return FirmwareSpec{}, FirmwareStatus{}, fmt.Errorf("firmware campaign %s is %s: %w", id, j.State, ErrEnded)
	}
	sp, st, err := Firmware(j)
	if err != nil {
		e.endCampaign(ctx, id, err.Error())
	}
	return sp, st, err
}

// readPlans plans a campaign's nodes, each once: the planner in the
// background, a few BMCs at a time, ahead of the nodes' turns (so the plan
// of the whole campaign shows early, a node whose pins its BMC cannot
// carry out fails before anything is flashed, and a node's turn starts at
// its update), or a node whose turn comes first, itself. Both ask get; the
// second waits for the first's read.
type readPlans struct {
	e   *Engine
	job string
	sp  FirmwareSpec
	mu  sync.Mutex
	m   map[string]*nodePlan // the nodes not planned when the campaign (re)started
}

type nodePlan struct {
	once sync.Once
	svc  *bmc.UpdateService
	err  error
	at   time.Time
}

// planFresh is how old a node's plan may be for its update to start from
// it without reading the versions again (a node held back longer, by its
// limits or its windows, reads them again when it starts).
const planFresh = 5 * time.Minute

// get plans a node unless it is (being) planned, and returns the
// inventory it was planned from while fresh (nil when stale, or when an
// earlier process planned it), or why it could not be planned (the node
// has then ended failed).
func (p *readPlans) get(ctx context.Context, id string) (*bmc.UpdateService, error) {
	p.mu.Lock()
	np := p.m[id]
	p.mu.Unlock()
	if np == nil {
		return nil, nil
	}
	np.once.Do(func() { np.svc, np.err = p.plan(ctx, id); np.at = p.e.now() })
	if np.err != nil || p.e.now().Sub(np.at) >= planFresh {
		return nil, np.err
	}
	return np.svc, nil
}

// plan plans one node; a failure ends it.
func (p *readPlans) plan(ctx context.Context, id string) (*bmc.UpdateService, error) {
	w, err := p.e.campaignWork(ctx, p.job, p.sp, id)
	var b FirmwareBMC
	if err == nil {
		b, err = p.e.fw.cfg.Dial(ctx, w.m)
	}
	var svc *bmc.UpdateService
	if err == nil {
		svc, _, err = p.e.planFirmware(ctx, w, b)
	}
	if err != nil && ctx.Err() == nil {
		p.e.endNode(ctx, p.job, id, err)
	}
	return svc, err
}

// planCampaign starts the background planner over the nodes not planned
// yet and returns at once.
func (e *Engine) planCampaign(ctx context.Context, id string, sp FirmwareSpec, nodes []FirmwareNode) *readPlans {
	p := &readPlans{e: e, job: id, sp: sp, m: map[string]*nodePlan{}}
	var todo []string
	for _, n := range nodes {
		if !n.final() && !n.Planned {
			todo = append(todo, n.Machine)
			p.m[n.Machine] = &nodePlan{}
		}
	}
	go func() {
		sem := make(chan struct{}, planParallel)
		for _, m := range todo {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() { defer func() { <-sem }(); _, _ = p.get(ctx, m) }()
		}
	}()
	return p
}

// campaignWork is one node's work in a campaign, its machine and recipe as
// they are now.
func (e *Engine) campaignWork(ctx context.Context, jobID string, sp FirmwareSpec, machineID string) (fwWork, error) {
	m, err := e.machines.Get(ctx, machineID)
	if err != nil {
		return fwWork{}, err
	}
	if m.Recipe == "" {
		return fwWork{}, fmt.Errorf("machine %s has no recipe", m.Name)
	}
	w := fwWork{job: jobID, m: m, rollback: sp.Rollback, stop: func() bool { return e.fw.cancelled(jobID) },
		load: func(ctx context.Context) (FirmwareNode, error) { return e.loadNode(ctx, jobID, machineID) },
		save: func(ctx context.Context, change func(*FirmwareNode)) error {
			return e.saveNode(ctx, jobID, machineID, change)
		}}
	w.r, err = e.recipes(m.Recipe)
	return w, err
}

// campaignNode is one node's turn in a campaign: its plan (made now
// unless the planner made it; a failed plan has ended the node), then its
// update from that plan, and its end.
func (e *Engine) campaignNode(ctx context.Context, jobID string, sp FirmwareSpec, machineID string, plans *readPlans) error {
	n, err := e.loadNode(ctx, jobID, machineID)
	if err != nil || n.final() {
		return err
	}
	svc, err := plans.get(ctx, machineID)
	if err != nil {
		return err
	}
	w, err := e.campaignWork(ctx, jobID, sp, machineID)
	w.svc = svc
	if err == nil {
		err = e.saveNode(ctx, jobID, machineID, func(n *FirmwareNode) {
			if n.Started.IsZero() {
				n.Started = e.now()
			}
			n.State = NodeRunning
		})
	}
	if err == nil {
		err = e.applyFirmware(ctx, w)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e.endNode(ctx, jobID, machineID, err)
	return err
}

// endNode persists how a node ended (err nil: done) and tells the machine.
func (e *Engine) endNode(ctx context.Context, jobID, machineID string, err error) {
	state, msg := NodeDone, "every package applied and read back as pinned"
	switch {
	case errors.Is(err, errFirmwareCancelled):
		state, msg = NodeCancelled, "the campaign was cancelled: "+err.Error()
	case err != nil:
		state, msg = NodeFailed, err.Error()
	}
	if serr := e.saveNode(ctx, jobID, machineID, func(n *FirmwareNode) { n.State, n.Message, n.Ended = state, msg, e.now() }); serr != nil {
		e.log.Warn("saving a firmware node's end", "job", jobID, "machine", machineID, "err", serr)
	}
	e.event(ctx, machineID, "firmware."+state, msg, map[string]string{"job": jobID})
}

// loadNode reads one node of a campaign.
func (e *Engine) loadNode(ctx context.Context, jobID, machineID string) (FirmwareNode, error) {
	j, err := e.jobs.GetJob(ctx, jobID)
	if err != nil {
		return FirmwareNode{}, err
	}
	_, st, err := Firmware(j)
	if err != nil {
		return FirmwareNode{}, err
	}
	i := slices.IndexFunc(st.Nodes, func(n FirmwareNode) bool { return n.Machine == machineID })
	if i < 0 {
		return FirmwareNode{}, fmt.Errorf("job %s has no node %s", jobID, machineID)
	}
	return st.Nodes[i], nil
}

// saveNode changes one node of a campaign and persists it with the job,
// returning once it is written. It writes while the job runs, and also
// after a cancel ended it: a step in flight when the job ended still
// records how it ended. Changes of many nodes share writes: the job holds
// every node, so a change waits for the write in progress and the next
// one carries every change that came meanwhile (a campaign of 200 nodes
// saves a step for each of 100 in flight in a few writes, not a hundred).
func (e *Engine) saveNode(ctx context.Context, jobID, machineID string, change func(*FirmwareNode)) error {
	done := make(chan error, 1)
	w := &e.fw.writes
	w.mu.Lock()
	if w.pending == nil {
		w.pending, w.writing = map[string][]nodeChange{}, map[string]bool{}
	}
	w.pending[jobID] = append(w.pending[jobID], nodeChange{machineID, change, done})
	lead := !w.writing[jobID]
	w.writing[jobID] = true
	w.mu.Unlock()
	for lead {
		w.mu.Lock()
		batch := w.pending[jobID]
		delete(w.pending, jobID)
		if len(batch) == 0 {
			delete(w.writing, jobID)
			lead = false
		}
		w.mu.Unlock()
		if len(batch) > 0 {
			err := e.writeNodes(ctx, jobID, batch)
			for _, c := range batch {
				c.done <- err
			}
		}
	}
	return <-done
}

// nodeWrites are the node changes waiting for a campaign's next write.
type nodeWrites struct {
	mu      sync.Mutex
	pending map[string][]nodeChange // job ID -> changes not yet written
	writing map[string]bool         // job IDs a caller writes for now
}

type nodeChange struct {
	machine string
	change  func(*FirmwareNode)
	done    chan error
}

// writeNodes applies changes to a campaign's nodes in one write.
func (e *Engine) writeNodes(ctx context.Context, jobID string, changes []nodeChange) error {
	_, err := e.jobs.UpdateJob(ctx, jobID, func(j *store.Job) error {
		var st FirmwareStatus
		if err := json.Unmarshal(j.Status, &st); err != nil {
			return fmt.Errorf("job %s: decoding the firmware campaign's status: %w", j.ID, err)
		}
		for _, c := range changes {
			i := slices.IndexFunc(st.Nodes, func(n FirmwareNode) bool { return n.Machine == c.machine })
			if i < 0 {
				return fmt.Errorf("job %s has no node %s", jobID, c.machine)
			}
			c.change(&st.Nodes[i])
		}
		b, err := json.Marshal(st)
		j.Status, j.Updated = b, e.now()
		return err
	})
	return err
}

// endCampaign ends a campaign once no node runs: cancelled when a cancel
// was asked for, failed when a node failed (or reason says the campaign
// could not run), else succeeded; the reason counts the nodes.
func (e *Engine) endCampaign(ctx context.Context, id, reason string) {
	var final store.JobState
	j, err := e.jobs.UpdateJob(ctx, id, func(j *store.Job) error {
		if j.State != store.JobRunning {
			return fmt.Errorf("firmware campaign %s is %s: %w", j.ID, j.State, ErrEnded)
		}
		var st FirmwareStatus
		_ = json.Unmarshal(j.Status, &st)
		c := st.Counts()
		final = store.JobSucceeded
		switch {
		case reason != "":
			final = store.JobFailed
		case st.Cancel != "":
			final, reason = store.JobCancelled, st.Cancel+"; "
		case c.Failed > 0:
			final = store.JobFailed
		}
		reason += fmt.Sprintf("%d of %d nodes at their pins, %d failed, %d cancelled, %d not started", c.Done, c.Total, c.Failed, c.Cancelled, c.Waiting+c.Running)
		j.State, j.Reason, j.Step, j.Updated = final, reason, "done", e.now()
		return nil
	})
	e.fw.setCancelled(id, false)
	if err != nil {
		e.log.Warn("ending firmware campaign", "job", id, "err", err)
		return
	}
	e.log.Info("firmware campaign ended", "job", id, "state", final, "reason", j.Reason)
	e.notify(id)
}

// cancelFirmware asks a campaign to stop: no node or package starts any
// more; what is in flight finishes (never mid-flash), then the job ends
// cancelled. The job is returned still running, at step cancelling.
func (e *Engine) cancelFirmware(ctx context.Context, id, msg string) (*store.Job, error) {
	j, err := e.jobs.UpdateJob(ctx, id, func(j *store.Job) error {
		if j.State != store.JobRunning {
			return fmt.Errorf("cancelling job %s: %w: it is %s, not running", id, ErrEnded, j.State)
		}
		var st FirmwareStatus
		if err := json.Unmarshal(j.Status, &st); err != nil {
			return err
		}
		if st.Cancel == "" {
			st.Cancel = msg
		}
		b, err := json.Marshal(st)
		j.Status, j.Step, j.Updated = b, stepCancelling, e.now()
		return err
	})
	if err != nil {
		return nil, err
	}
	e.fw.setCancelled(id, true)
	for _, m := range j.Machines {
		e.event(ctx, m, "firmware.cancel", msg+": no further package starts; an update in flight finishes", map[string]string{"job": id})
	}
	return j, nil
}
