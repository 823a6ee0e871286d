//go:build integration

package firmware_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// envInt and envDur let a developer shrink the benchmark for a quick run
// (INGOT_FWBENCH_NODES=20 ...); `make bench` runs it as specified.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDur(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// minRequests is what the protocol needs to bring one BMC's firmware to a
// pin with SimpleUpdate and a host reset, knowing the target's URI:
// create a session, read the target's version, start the update, read the
// task once it has ended, reset the host, read the version again, delete
// the session.
const minRequests = 7

// BenchmarkFirmwareCampaign200: a campaign over 200 virtual BMCs that
// answer every request after 0.7 s and run a 30 s update, 20 racks of 10,
// at most 5 updates per rack and 100 in total. Each node is planned from
// its BMC and its BMC firmware brought to the pin (SimpleUpdate from a
// loopback image server, task followed every 5 s, host reset, version read
// again). Reported: the wall time against the limit the concurrency
// settings allow (every node at its floor, 30 s + 7 requests x 0.7 s,
// the nodes in ceil(200/100) waves: the serial time over the
// parallelism), and the requests each BMC saw against the protocol's
// minimum of 7.
func BenchmarkFirmwareCampaign200(b *testing.B) {
	nodes := envInt("INGOT_FWBENCH_NODES", 200)
	latency := envDur("INGOT_FWBENCH_LATENCY", 700*time.Millisecond)
	task := envDur("INGOT_FWBENCH_TASK", 30*time.Second)
	racks, perRack, total := 20, envInt("INGOT_FWBENCH_PER_RACK", 5), envInt("INGOT_FWBENCH_TOTAL", 100)
	poll := 5 * time.Second
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		fleet, err := vbmc.StartFleet(ctx, nodes, vbmc.Config{Root: mockupDir(b, "dmtf-public-rackmount1"), Username: testUser,
			Password: testPassword, Faults: vbmc.Faults{Latency: latency}, Update: vbmc.Update{TaskTime: task}})
		if err != nil {
			b.Fatal(err)
		}
		imgs, shas := newImages(b, true, vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, ""))
		pins := recipe.Firmware{BMC: update("1.46.0", shas[0])}
		var ns []firmware.Node
		for i, u := range fleet.URLs {
			ns = append(ns, firmware.Node{Name: fmt.Sprintf("n%03d", i), BMC: u, Rack: fmt.Sprintf("rack-%02d", i%racks)})
		}
		g, err := firmware.NewGate(firmware.Limits{PerRack: perRack, Total: total})
		if err != nil {
			b.Fatal(err)
		}
		o := firmware.Options{Poll: poll, Timeout: 10 * time.Minute}
		start := time.Now()
		results := firmware.Run(ctx, g, ns, firmware.RunOptions{Retry: 100 * time.Millisecond}, func(ctx context.Context, n firmware.Node) error {
			return campaignNode(ctx, n.BMC, latency, imgs, pins, o)
		})
		wall := time.Since(start)
		var requests int64
		for i, r := range results {
			if r.Err != nil {
				b.Errorf("node %s: %v", r.Node.Name, r.Err)
			}
			if v := fleet.BMCs[i].FirmwareVersion(bmcTarget); v != "1.46.0" {
				b.Errorf("node %s at %s after the campaign", r.Node.Name, v)
			}
			requests += fleet.BMCs[i].Stats().Requests
		}
		parallel := min(total, racks*perRack, nodes)
		floor := task + minRequests*latency
		limit := time.Duration(math.Ceil(float64(nodes)/float64(parallel))) * floor
		perBMC := float64(requests) / float64(nodes)
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(limit.Seconds(), "limit-s")
		b.ReportMetric(wall.Seconds()/limit.Seconds(), "wall/limit")
		b.ReportMetric(perBMC, "requests/BMC")
		b.ReportMetric(perBMC/minRequests, "requests/minimum")
		b.Logf("%d BMCs, %s a request, %s update, parallelism %d (%d per rack x %d racks, %d in total): wall %s, limit %s "+
			"(serial %s / %d), ratio %.2f; %.1f requests per BMC, minimum %d, ratio %.2f",
			nodes, latency, task, parallel, perRack, racks, total, wall.Round(time.Second), limit, time.Duration(nodes)*floor,
			parallel, wall.Seconds()/limit.Seconds(), perBMC, minRequests, perBMC/minRequests)
		fleet.Close()
		cancel()
	}
}

// campaignNode plans one node from its BMC and applies the plan, as the
// engine's firmware job will.
func campaignNode(ctx context.Context, url string, latency time.Duration, imgs firmware.Images, pins recipe.Firmware, o firmware.Options) error {
	cfg := bmc.Config{Endpoint: url, Username: testUser, Password: testPassword, ReadTimeout: 10 * latency, RetryWait: time.Second}
	c, err := bmc.Dial(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	us, err := c.UpdateService(ctx)
	if err != nil {
		return err
	}
	o.Service = &us
	for _, s := range firmware.Steps(firmware.MakePlan(us.Items, machine.Inventory{}, pins)) {
		if _, err := firmware.Apply(ctx, c, imgs, s, o, nil); err != nil {
			return err
		}
	}
	return nil
}
