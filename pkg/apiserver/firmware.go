package apiserver

import (
	"net/http"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/firmware"
)

// getFirmwarePlan answers GET /api/v1/firmware/plan?target=A&target=B:
// each machine's plan (recipes stand for their machines), read from its
// BMC now. It changes nothing, so read-only tokens may ask.
func (s *Server) getFirmwarePlan(w http.ResponseWriter, r *http.Request, _ principal) error {
	targets := r.URL.Query()["target"]
	if len(targets) == 0 {
		return errorf(http.StatusBadRequest, "firmware plan: expected ?target=RECIPE or ?target=MACHINE, repeatable")
	}
	plans, err := s.engine.FirmwarePlan(r.Context(), targets)
	if err != nil {
		return err
	}
	out := make([]wire.FirmwarePlan, 0, len(plans))
	for _, p := range plans {
		wp := wire.FirmwarePlan{Machine: p.Machine, Name: p.Name, Recipe: p.Recipe, Error: p.Error, Entries: wireEntries(p.Plan.Entries)}
		for _, pk := range p.Plan.Packages {
			wp.Packages = append(wp.Packages, wire.FirmwarePackage{SHA256: pk.SHA256, ApplyTime: pk.ApplyTime, Targets: pk.Targets, Want: pk.Want})
		}
		out = append(out, wp)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// postFirmwareApply starts a firmware campaign (POST /api/v1/firmware/apply).
func (s *Server) postFirmwareApply(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.FirmwareApplyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	sp := engine.FirmwareSpec{Targets: req.Targets, Rollback: req.Rollback, PerRack: req.PerRack, Total: req.Total,
		Windows: req.Windows, Reason: req.Reason}
	if req.Pause != "" {
		d, err := time.ParseDuration(req.Pause)
		if err != nil || d < 0 {
			return errorf(http.StatusBadRequest, "pause %q: expected a duration such as 30s or 2m", req.Pause)
		}
		sp.Pause = d
	}
	j, err := s.engine.StartFirmware(r.Context(), sp, actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, WireJob(j))
	return nil
}

func wireEntries(es []firmware.Entry) []wire.FirmwareEntry {
	var out []wire.FirmwareEntry
	for _, e := range es {
		out = append(out, wire.FirmwareEntry{Component: e.Component, Class: e.Class, Model: e.Model, Target: e.Target, Source: e.Source,
			Found: e.Version, Updateable: e.Updateable, Pin: e.Key, Pinned: e.Pinned, Action: string(e.Action), Package: e.Package,
			ApplyTime: e.ApplyTime, Reason: e.Reason})
	}
	return out
}

func wireFirmware(j *engine.Job) *wire.FirmwareStatus {
	sp, st, err := engine.Firmware(j)
	if err != nil {
		return nil
	}
	c := st.Counts()
	out := &wire.FirmwareStatus{Targets: sp.Targets, Rollback: sp.Rollback, PerRack: sp.PerRack, MaxInFlight: sp.Total,
		PauseSeconds: sp.Pause.Seconds(), Windows: sp.Windows, Total: c.Total, Done: c.Done, Failed: c.Failed, Waiting: c.Waiting,
		Running: c.Running, Cancelled: c.Cancelled, Cancel: st.Cancel, Nodes: []wire.FirmwareNodeStatus{}}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, wireFirmwareNode(n))
	}
	return out
}

func wireFirmwareNode(n engine.FirmwareNode) wire.FirmwareNodeStatus {
	out := wire.FirmwareNodeStatus{Machine: n.Machine, Name: n.Name, Rack: n.Rack, BMC: n.BMC, State: n.State, Message: n.Message,
		Plan: wireEntries(n.Plan), Started: n.Started, Ended: n.Ended}
	for _, s := range n.Steps {
		out.Steps = append(out.Steps, wire.FirmwareStep{Package: s.Package, Targets: s.Targets, Want: s.Want, Before: s.Before,
			ApplyTime: s.ApplyTime, Phase: string(s.Phase), Method: s.Method, Task: s.Task, Started: s.Started, Waits: s.Waits, Message: s.Message})
	}
	return out
}
