package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/store"
)

// runCampaign drives a firmware campaign until every node has ended or
// ctx does (serve stopping: the next Run resumes it from what each node
// persisted). Nodes start as the gate admits them: one update per BMC, the
// campaign's per-rack and total limits, its pause and windows.
func (e *Engine) runCampaign(ctx context.Context, id string) {
	j, err := e.jobs.GetJob(ctx, id)
	if err != nil || j.State != store.JobRunning {
		return
	}
	sp, st, err := Firmware(j)
	if err != nil {
		e.endCampaign(ctx, id, err.Error())
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
	g, _ := firmware.NewGate(lim)
	var nodes []firmware.Node
	for _, n := range st.Nodes {
		if !n.final() {
			nodes = append(nodes, firmware.Node{Name: n.Machine, BMC: n.BMC, Rack: n.Rack, Recipe: n.Recipe})
		}
	}
	stop := func() bool { return e.fw.cancelled(id) }
	results := firmware.Run(ctx, g, nodes, firmware.RunOptions{Retry: e.fw.cfg.Retry, Now: e.now, Stop: stop},
		func(ctx context.Context, n firmware.Node) error { return e.campaignNode(ctx, id, sp, n.Name) })
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

// campaignNode is one node's work in a campaign: its machine and recipe
// as they are now, then applyFirmware, and the node's end persisted.
func (e *Engine) campaignNode(ctx context.Context, jobID string, sp FirmwareSpec, machineID string) error {
	m, err := e.machines.Get(ctx, machineID)
	if err == nil && m.Recipe == "" {
		err = fmt.Errorf("machine %s has no recipe", m.Name)
	}
	var w fwWork
	if err == nil {
		w = fwWork{job: jobID, m: m, rollback: sp.Rollback, stop: func() bool { return e.fw.cancelled(jobID) },
			load: func(ctx context.Context) (FirmwareNode, error) { return e.loadNode(ctx, jobID, machineID) },
			save: func(ctx context.Context, change func(*FirmwareNode)) error {
				return e.saveNode(ctx, jobID, machineID, change)
			}}
		w.r, err = e.recipes(m.Recipe)
	}
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
	return err
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

// saveNode changes one node of a campaign and persists it with the job.
// It writes while the job runs, and also after a cancel ended it: a step
// in flight when the job ended still records how it ended.
func (e *Engine) saveNode(ctx context.Context, jobID, machineID string, change func(*FirmwareNode)) error {
	_, err := e.jobs.UpdateJob(ctx, jobID, func(j *store.Job) error {
		var st FirmwareStatus
		if err := json.Unmarshal(j.Status, &st); err != nil {
			return fmt.Errorf("job %s: decoding the firmware campaign's status: %w", j.ID, err)
		}
		i := slices.IndexFunc(st.Nodes, func(n FirmwareNode) bool { return n.Machine == machineID })
		if i < 0 {
			return fmt.Errorf("job %s has no node %s", jobID, machineID)
		}
		change(&st.Nodes[i])
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
