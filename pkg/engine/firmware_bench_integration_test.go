//go:build integration

package engine_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/store"
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

// BenchmarkFirmwareCampaign200: the engine's firmware campaign (a job, as
// `ingot firmware apply` starts it: store, fleet, engine, the shared BMC
// session pool, packages from a content store at per-job URLs) over 200
// virtual BMCs that answer every request after 0.7 s and run a 30 s
// update, 20 racks of 10, at most 5 updates per rack and 100 in total.
// Each node is planned from its BMC and its BMC firmware brought to the
// pin (SimpleUpdate, the task read after 5 s and then when its progress
// says it ends, host reset, version read back, the node judged on it).
// Reported: the wall time against the limit the concurrency settings allow
// (every node at its floor, 30 s + 7 requests x 0.7 s, the nodes in
// ceil(200/100) waves: the serial time over the parallelism), and the
// requests each BMC saw (its session's logout at the pool's close
// included) against the protocol's minimum of 7.
func BenchmarkFirmwareCampaign200(b *testing.B) {
	nodes := envInt("INGOT_FWBENCH_NODES", 200)
	latency := envDur("INGOT_FWBENCH_LATENCY", 700*time.Millisecond)
	task := envDur("INGOT_FWBENCH_TASK", 30*time.Second)
	racks, perRack, total := 20, envInt("INGOT_FWBENCH_PER_RACK", 5), envInt("INGOT_FWBENCH_TOTAL", 100)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		fleet, err := vbmc.StartFleet(ctx, nodes, vbmc.Config{Root: filepath.Join("..", "..", "testdata", "redfish-mockups", "dmtf-public-rackmount1"),
			Username: fwUser, Password: fwPass, Faults: vbmc.Faults{Latency: latency}, Update: vbmc.Update{TaskTime: task}})
		if err != nil {
			b.Fatal(err)
		}
		h := newFWHarness(b, bmcOnly, bmcImage)
		h.timeout, h.poll, h.waitMax = 10*time.Minute, 5*time.Second, 20*time.Minute
		h.bmcConfig = func(endpoint string) bmc.Config {
			return bmc.Config{Endpoint: endpoint, Username: fwUser, Password: fwPass, ReadTimeout: 10 * latency, RetryWait: time.Second}
		}
		h.start(nil)
		for i, u := range fleet.URLs {
			h.enroll(fmt.Sprintf("n%03d", i), fmt.Sprintf("rack-%02d", i%racks), u)
		}
		start := time.Now()
		j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}, PerRack: perRack, Total: total}, "bench")
		if err != nil {
			b.Fatal(err)
		}
		j, st := h.wait(j.ID)
		wall := time.Since(start)
		h.stop() // the pool logs every session out
		if c := st.Counts(); j.State != store.JobSucceeded || c.Done != nodes {
			b.Errorf("campaign %s: %s", j.State, j.Reason)
		}
		var nodeTime time.Duration
		for _, n := range st.Nodes {
			nodeTime += n.Ended.Sub(n.Started)
		}
		nodeTime /= time.Duration(max(1, len(st.Nodes)))
		var requests int64
		for i, v := range fleet.BMCs {
			if got := v.FirmwareVersion(bmcFW); got != "1.46.0" {
				b.Errorf("BMC %d at %s after the campaign", i, got)
			}
			requests += v.Stats().Requests
		}
		parallel := min(total, racks*perRack, nodes)
		floor := task + minRequests*latency
		limit := time.Duration(math.Ceil(float64(nodes)/float64(parallel))) * floor
		perBMC := float64(requests) / float64(nodes)
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(limit.Seconds(), "limit-s")
		b.ReportMetric(wall.Seconds()/limit.Seconds(), "wall/limit")
		b.ReportMetric(nodeTime.Seconds(), "node-s")
		b.ReportMetric(perBMC, "requests/BMC")
		b.ReportMetric(perBMC/minRequests, "requests/minimum")
		b.Logf("%d BMCs, %s a request, %s update, parallelism %d (%d per rack x %d racks, %d in total): wall %s, limit %s "+
			"(serial %s / %d), ratio %.2f; a node from its start to its end %s on average (floor %s); %.1f requests per BMC, minimum %d, ratio %.2f",
			nodes, latency, task, parallel, perRack, racks, total, wall.Round(time.Second), limit, time.Duration(nodes)*floor,
			parallel, wall.Seconds()/limit.Seconds(), nodeTime.Round(100*time.Millisecond), floor, perBMC, minRequests, perBMC/minRequests)
		fleet.Close()
		cancel()
	}
}
