package firmware_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// meter counts updates in flight per BMC, per rack and in total, and
// keeps the most it saw.
type meter struct {
	mu                sync.Mutex
	bmcs              map[string]int
	racks             map[string]int
	total             int
	maxBMC, maxTotal  int
	maxRack           map[string]int
	flashesStartedPer map[string]int
}

func newMeter() *meter {
	return &meter{bmcs: map[string]int{}, racks: map[string]int{}, maxRack: map[string]int{}, flashesStartedPer: map[string]int{}}
}

func (m *meter) enter(n firmware.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bmcs[n.BMC]++
	m.racks[n.Rack]++
	m.total++
	m.maxBMC = max(m.maxBMC, m.bmcs[n.BMC])
	m.maxRack[n.Rack] = max(m.maxRack[n.Rack], m.racks[n.Rack])
	m.maxTotal = max(m.maxTotal, m.total)
}

func (m *meter) leave(n firmware.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bmcs[n.BMC]--
	m.racks[n.Rack]--
	m.total--
}

// TestCampaignLimits: 20 nodes in 2 racks behind virtual BMCs, each with
// its BMC and BIOS below their pins: the plan of every node is made from
// its BMC, Run drives Apply under the gate, and the limits hold (never two
// updates at one BMC, at most 3 per rack and 4 in total, starts spaced);
// every node ends at its pins and each BMC saw each package started once.
func TestCampaignLimits(t *testing.T) {
	const nodes, perRack, total = 20, 3, 4
	bmcImg := vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, "")
	biosImg := vbmc.FirmwareImage(map[string]string{"BIOS": "P79 v1.46"}, "")
	imgs, shas := newImages(t, true, bmcImg, biosImg)
	pins := recipe.Firmware{BMC: update("1.46.0", shas[0]), BIOS: update("P79 v1.46", shas[1])}

	var ns []firmware.Node
	bmcs := map[string]*vbmc.BMC{}
	for i := range nodes {
		// MaxUpdates 1: the BMC itself refuses (503) a second update while
		// one runs; the test then sees Refused > 0.
		b, url := startBMC(t, "dmtf-public-rackmount1", func(c *vbmc.Config) {
			c.Update = vbmc.Update{TaskTime: 80 * time.Millisecond, MaxUpdates: 1}
		})
		bmcs[url] = b
		ns = append(ns, firmware.Node{Name: fmt.Sprintf("n%02d", i), BMC: url, Rack: fmt.Sprintf("rack-%d", i%2), Recipe: "gpu"})
	}
	g, err := firmware.NewGate(firmware.Limits{PerRack: perRack, Total: total, Pause: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := newMeter()
	results := firmware.Run(ctxT(t), g, ns, firmware.RunOptions{Retry: 20 * time.Millisecond}, func(ctx context.Context, n firmware.Node) error {
		m.enter(n)
		defer m.leave(n)
		return applyNode(ctx, t, n.BMC, imgs, pins)
	})
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("node %s: %v", r.Node.Name, r.Err)
		}
	}
	if m.maxBMC != 1 || m.maxTotal > total || m.maxTotal < 2 || m.maxRack["rack-0"] > perRack || m.maxRack["rack-1"] > perRack {
		t.Errorf("in flight at most: %d per BMC, %v per rack, %d in total; want 1, <= %d, 2..%d", m.maxBMC, m.maxRack, m.maxTotal, perRack, total)
	}
	for url, b := range bmcs {
		st := b.UpdateStats()
		if st.Starts != 2 || st.Refused != 0 || b.FirmwareVersion(bmcTarget) != "1.46.0" ||
			b.FirmwareVersion("/redfish/v1/UpdateService/FirmwareInventory/BIOS") != "P79 v1.46" {
			t.Errorf("BMC %s: stats %+v, versions %s / %s; want 2 starts, none refused, at the pins", url, st,
				b.FirmwareVersion(bmcTarget), b.FirmwareVersion("/redfish/v1/UpdateService/FirmwareInventory/BIOS"))
		}
	}
}

// applyNode is what the engine's firmware job does for one node: plan
// from the BMC, then apply the plan's packages in order.
func applyNode(ctx context.Context, t *testing.T, url string, imgs firmware.Images, pins recipe.Firmware) error {
	c, err := bmc.Dial(ctx, testConfig(url))
	if err != nil {
		return err
	}
	defer c.Close()
	us, err := c.UpdateService(ctx)
	if err != nil {
		return err
	}
	plan := firmware.MakePlan(us.Items, machine.Inventory{}, pins)
	for _, s := range firmware.Steps(plan) {
		if _, err := firmware.Apply(ctx, c, imgs, s, fastOptions, nil); err != nil {
			return err
		}
	}
	return nil
}
