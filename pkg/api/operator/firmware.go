package operator

import (
	"fmt"
	"time"
)

// FirmwarePlan is one machine's firmware plan (GET /api/v1/firmware/plan):
// every component instance the BMC lists (eight GPUs are eight entries),
// plus what the in-band inventory knows of a class the BMC lists none of,
// with found and pinned version and the action a campaign would take.
type FirmwarePlan struct {
	Machine  string            `json:"machine"`
	Name     string            `json:"name"`
	Recipe   string            `json:"recipe,omitempty"`
	Entries  []FirmwareEntry   `json:"entries,omitempty"`
	Packages []FirmwarePackage `json:"packages,omitempty"`
	// Error says why the machine could not be planned (no recipe, its BMC
	// did not answer).
	Error string `json:"error,omitempty"`
}

// FirmwareEntry is one component instance of a plan.
type FirmwareEntry struct {
	Component  string `json:"component"`
	Class      string `json:"class"` // bios, bmc, gpu, nic, other
	Model      string `json:"model,omitempty"`
	Target     string `json:"target,omitempty"` // its FirmwareInventory URI; "" when only the in-band inventory knows it
	Source     string `json:"source"`           // redfish or inband
	Found      string `json:"found"`
	Updateable bool   `json:"updateable"`
	Pin        string `json:"pin,omitempty"` // the recipe's pin key: bios, bmc, gpu, nic, other.NAME
	Pinned     string `json:"pinned,omitempty"`
	// Action: none, update, downgrade, blocked-downgrade, blocked-unordered,
	// blocked-not-updateable, blocked-no-target, block, warn, missing,
	// unpinned.
	Action    string `json:"action"`
	Package   string `json:"package,omitempty"`
	ApplyTime string `json:"apply_time,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// FirmwarePackage is one package a plan applies: every target it brings.
type FirmwarePackage struct {
	SHA256    string            `json:"sha256"`
	ApplyTime string            `json:"apply_time"`
	Targets   []string          `json:"targets"`
	Want      map[string]string `json:"want"` // target -> pinned version
}

// FirmwareApplyRequest is the body of POST /api/v1/firmware/apply: a
// campaign over recipes (every machine of each) and machines.
type FirmwareApplyRequest struct {
	Targets []string `json:"targets"`
	// Rollback restores the previous image of a component whose update
	// failed, where the BMC keeps one.
	Rollback bool `json:"rollback,omitempty"`
	// PerRack and Total bound the updates in flight (0: no limit); there
	// is never more than one at a BMC.
	PerRack int `json:"per_rack,omitempty"`
	Total   int `json:"total,omitempty"`
	// Pause is the least time between two starts ("30s").
	Pause string `json:"pause,omitempty"`
	// Windows are maintenance windows ("racks=r1 days=sat 22:00-04:00
	// tz=Europe/Berlin"): a node a window names by rack or recipe starts
	// only inside one.
	Windows []string `json:"windows,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// FirmwareStatus is a firmware campaign's progress (Job.Firmware): its
// settings, its nodes counted by state, and each node's steps.
type FirmwareStatus struct {
	Targets      []string `json:"targets"`
	Rollback     bool     `json:"rollback,omitempty"`
	PerRack      int      `json:"per_rack,omitempty"`
	MaxInFlight  int      `json:"max_in_flight,omitempty"` // the request's total limit
	PauseSeconds float64  `json:"pause_seconds,omitempty"`
	Windows      []string `json:"windows,omitempty"`
	// Total nodes, and how many are done (at their pins), failed, waiting
	// (not started: limits or windows), running, cancelled.
	Total     int `json:"total"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Waiting   int `json:"waiting"`
	Running   int `json:"running"`
	Cancelled int `json:"cancelled"`
	// Cancel says who asked the campaign to stop, and why.
	Cancel string               `json:"cancel,omitempty"`
	Nodes  []FirmwareNodeStatus `json:"nodes"`
}

// Counts renders the campaign's totals: "20 nodes: 12 done, 1 failed, 5
// waiting, 2 running".
func (s FirmwareStatus) Counts() string {
	out := fmt.Sprintf("%d nodes: %d done, %d failed, %d waiting, %d running", s.Total, s.Done, s.Failed, s.Waiting, s.Running)
	if s.Cancelled > 0 {
		out += fmt.Sprintf(", %d cancelled", s.Cancelled)
	}
	return out
}

// FirmwareNodeStatus is one machine's firmware work: in a campaign, or a
// reimage's firmware step (ReimageStatus.Firmware).
type FirmwareNodeStatus struct {
	Machine string `json:"machine"`
	Name    string `json:"name"`
	Rack    string `json:"rack,omitempty"`
	BMC     string `json:"bmc,omitempty"`
	// State: waiting, running, done, failed, cancelled.
	State   string          `json:"state"`
	Message string          `json:"message,omitempty"`
	Plan    []FirmwareEntry `json:"plan,omitempty"` // the entries that flash or block
	Steps   []FirmwareStep  `json:"steps,omitempty"`
	Started time.Time       `json:"started,omitzero"`
	Ended   time.Time       `json:"ended,omitzero"`
}

// FirmwareStep is one package applied to a node.
type FirmwareStep struct {
	Package   string            `json:"package"`
	Targets   []string          `json:"targets,omitempty"`
	Want      map[string]string `json:"want"`
	Before    map[string]string `json:"before,omitempty"`
	ApplyTime string            `json:"apply_time"`
	// Phase: pending, starting, running, reset, verify, done, failed,
	// rolled-back.
	Phase   string    `json:"phase"`
	Method  string    `json:"method,omitempty"` // simple-update, multipart-push, http-push
	Task    string    `json:"task,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Waits counts the times the BMC was away (restarting) and was waited for.
	Waits   int    `json:"waits,omitempty"`
	Message string `json:"message,omitempty"`
}
