package engine

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
	burnin "github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// TestRejudgeRepeatedCheck: a recipe holds nvbandwidth twice (host to
// device at 48 GB/s, device to device at 335 GB/s); the node reports two
// results named nvbandwidth in the recipe's order. Each is judged against
// its own check: a device-to-device pair at 300 GB/s fails though it is
// above the first check's 48 GB/s.
func TestRejudgeRepeatedCheck(t *testing.T) {
	q := func(s string) recipe.Quantity {
		v, err := recipe.ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	r := &recipe.Recipe{Acceptance: recipe.Acceptance{Checks: []recipe.Check{
		{Name: "nvbandwidth", Min: q("48GB/s"), Args: map[string]string{"testcase": "host_to_device_memcpy_ce"}},
		{Name: "gpu-count", Min: recipe.Number(2)},
		{Name: "nvbandwidth", Min: q("335GB/s"), Args: map[string]string{"testcase": "device_to_device_memcpy_read_ce"}},
	}}}
	h2d := &api.Evidence{Tool: "nvbandwidth", Values: []api.Measurement{
		{Subject: "GPU 0 host->device", Value: 55e9, Work: 1}, {Subject: "GPU 1 host->device", Value: 55e9, Work: 1}}}
	d2d := &api.Evidence{Tool: "nvbandwidth", Values: []api.Measurement{
		{Subject: "GPU 0 -> GPU 1", Value: 300e9, Work: 1}, {Subject: "GPU 1 -> GPU 0", Value: 390e9, Work: 1}}}
	got := rejudgeBurnIn(r, burnin.Inventory{GPUs: 2}, []CheckResult{
		{Name: "nvbandwidth", OK: true, Evidence: h2d},
		{Name: "nvbandwidth", OK: true, Evidence: d2d},
	})
	if got[0].Verdict != api.VerdictPassed {
		t.Errorf("host to device at 55 GB/s against 48 GB/s: %s (%s), want passed", got[0].Verdict, got[0].Detail)
	}
	if got[1].Verdict != api.VerdictFailed {
		t.Errorf("device to device with a 300 GB/s pair against 335 GB/s: %s (%s), want failed", got[1].Verdict, got[1].Detail)
	}
	third := rejudgeBurnIn(r, burnin.Inventory{GPUs: 2}, []CheckResult{
		{Name: "nvbandwidth", OK: true, Evidence: h2d}, {Name: "nvbandwidth", OK: true, Evidence: d2d},
		{Name: "nvbandwidth", OK: true, Evidence: d2d}})
	if third[2].Verdict != "" {
		t.Errorf("a third nvbandwidth result the recipe has no check for was judged: %s", third[2].Verdict)
	}
}
