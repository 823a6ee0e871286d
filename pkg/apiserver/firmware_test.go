package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/firmware"
)

// TestWireFirmwareJob: a campaign's job crosses the API with its settings,
// its nodes counted by state and each node's steps; a reimage's firmware
// step travels in its ReimageStatus.
func TestWireFirmwareJob(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	step := firmware.Step{Package: "abc", Targets: []string{"/fw/BMC"}, Want: map[string]string{"/fw/BMC": "1.46.0"}, ApplyTime: "on-reset",
		Phase: firmware.PhaseFailed, Method: "simple-update", Task: "/t/1", Waits: 2, Message: "Flash write error"}
	sp, _ := json.Marshal(engine.FirmwareSpec{Targets: []string{"gpu"}, PerRack: 3, Total: 4, Pause: 30 * time.Second, Windows: []string{"02:00-06:00"}})
	st, _ := json.Marshal(engine.FirmwareStatus{Cancel: "cancelled by x", Nodes: []engine.FirmwareNode{
		{Machine: "m-1", Name: "n1", Rack: "r1", State: engine.NodeFailed, Message: "Flash write error", Steps: []firmware.Step{step}, Started: at},
		{Machine: "m-2", Name: "n2", State: engine.NodeDone}, {Machine: "m-3", Name: "n3", State: engine.NodeWaiting},
	}})
	got := WireJob(&engine.Job{ID: "f-1", Kind: engine.KindFirmware, Spec: sp, Status: st})
	want := &wire.FirmwareStatus{Targets: []string{"gpu"}, PerRack: 3, MaxInFlight: 4, PauseSeconds: 30, Windows: []string{"02:00-06:00"},
		Total: 3, Done: 1, Failed: 1, Waiting: 1, Cancel: "cancelled by x", Nodes: []wire.FirmwareNodeStatus{
			{Machine: "m-1", Name: "n1", Rack: "r1", State: "failed", Message: "Flash write error", Started: at, Steps: []wire.FirmwareStep{{
				Package: "abc", Targets: []string{"/fw/BMC"}, Want: map[string]string{"/fw/BMC": "1.46.0"}, ApplyTime: "on-reset",
				Phase: "failed", Method: "simple-update", Task: "/t/1", Waits: 2, Message: "Flash write error"}}},
			{Machine: "m-2", Name: "n2", State: "done"}, {Machine: "m-3", Name: "n3", State: "waiting"}}}
	if d := cmp.Diff(want, got.Firmware); d != "" {
		t.Errorf("firmware status (-want +got):\n%s", d)
	}
	if c := got.Firmware.Counts(); c != "3 nodes: 1 done, 1 failed, 1 waiting, 0 running" {
		t.Errorf("counts line %q", c)
	}
	rs, _ := json.Marshal(engine.ReimageStatus{Firmware: &engine.FirmwareNode{Machine: "m-1", State: engine.NodeRunning, Steps: []firmware.Step{step}}})
	rj := WireJob(&engine.Job{ID: "j-1", Kind: "reimage", Spec: []byte(`{"machine":"m-1"}`), Status: rs})
	if rj.Reimage == nil || rj.Reimage.Firmware == nil || rj.Reimage.Firmware.State != "running" || len(rj.Reimage.Firmware.Steps) != 1 {
		t.Errorf("reimage with a firmware step: %+v", rj.Reimage)
	}
}
