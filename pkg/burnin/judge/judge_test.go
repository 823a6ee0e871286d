package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

func q(t *testing.T, s string) recipe.Quantity {
	t.Helper()
	v, err := recipe.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// perGPUValues is gpu-burn's evidence for n GPUs at rate flop/s each.
func perGPUValues(n int, rate float64) []api.Measurement {
	var out []api.Measurement
	for i := range n {
		out = append(out, api.Measurement{Subject: GPU(i), Value: rate, Work: 100})
	}
	return out
}

func sampled(n int) *api.LoadEvidence {
	l := &api.LoadEvidence{}
	for i := range n {
		l.GPUs = append(l.GPUs, api.GPULoad{PCI: "0000:1" + string(rune('0'+i)) + ":00", Index: i, Samples: 3, MaxTempC: 70})
	}
	return l
}

// TestJudge: the order of the rules and what each reason names.
func TestJudge(t *testing.T) {
	burn := recipe.Check{Name: "gpu-burn", Min: q(t, "45Tflop/s")}
	eight := Inventory{GPUs: 8}
	tests := map[string]struct {
		check   recipe.Check
		burnIn  recipe.BurnIn
		ev      api.Evidence
		inv     Inventory
		verdict api.Verdict
		reason  string
		value   float64
	}{
		"every GPU over the floor": {check: burn, ev: api.Evidence{Values: perGPUValues(8, 51e12), Load: sampled(8)}, inv: eight,
			verdict: api.VerdictPassed, reason: "gpu-burn: 8 GPUs, slowest GPU 0 at 51Tflop/s", value: 51e12},
		"a fault wins over could-not-run": {check: burn, ev: api.Evidence{NotRun: "output ends early", Faults: []api.Fault{{Subject: "GPU 3", Detail: "FAULTY, 12 errors"}}},
			inv: eight, verdict: api.VerdictFailed, reason: "gpu-burn: GPU 3: FAULTY, 12 errors"},
		"could-not-run wins over missing evidence": {check: burn, ev: api.Evidence{NotRun: "not found in the installed system"}, inv: eight,
			verdict: api.VerdictCouldNotRun, reason: "gpu-burn: not found in the installed system"},
		"an Xid during the load is the hardware": {check: burn, ev: api.Evidence{Values: perGPUValues(8, 51e12), NotRun: "stopped",
			Load: &api.LoadEvidence{GPUs: sampled(8).GPUs, Xids: []api.Xid{{PCI: "0000:3a:00", Code: 79, Text: "GPU has fallen off the bus."}}}},
			inv: eight, verdict: api.VerdictFailed, reason: "1 Xid errors during the load (max_xid_errors 0): Xid 79 on 0000:3a:00 (GPU has fallen off the bus.)"},
		"Xids within max_xid_errors": {check: burn, burnIn: recipe.BurnIn{MaxXidErrors: 1},
			ev:  api.Evidence{Values: perGPUValues(8, 51e12), Load: &api.LoadEvidence{GPUs: sampled(8).GPUs, Xids: []api.Xid{{PCI: "0000:3a:00", Code: 13}}}},
			inv: eight, verdict: api.VerdictPassed},
		"too hot": {check: burn, burnIn: recipe.BurnIn{MaxGPUTempC: 65}, ev: api.Evidence{Values: perGPUValues(8, 51e12), Load: sampled(8)}, inv: eight,
			verdict: api.VerdictFailed, reason: "GPU 0000:10:00 reached 70 C (max_gpu_temp_c 65)"},
		"an unreadable kernel log fails the Xid gate": {check: burn,
			ev:  api.Evidence{Values: perGPUValues(8, 51e12), Load: &api.LoadEvidence{GPUs: sampled(8).GPUs, Problems: []string{"after the load: the kernel log could not be read (dmesg: exit status 1): Xid errors unknown"}}},
			inv: eight, verdict: api.VerdictFailed, reason: "gpu-burn: after the load: the kernel log could not be read"},
		"no samples": {check: burn, ev: api.Evidence{Values: perGPUValues(8, 51e12), Load: &api.LoadEvidence{}}, inv: eight,
			verdict: api.VerdictFailed, reason: "no nvidia-smi samples during the load"},
		"a GPU the sampler never saw": {check: burn, ev: api.Evidence{Values: perGPUValues(8, 51e12), Load: sampled(7)}, inv: eight,
			verdict: api.VerdictFailed, reason: "nvidia-smi never sampled GPU 7 during the load (the node has 8 GPUs)"},
		"a GPU missing from the results": {check: burn, ev: api.Evidence{Values: perGPUValues(7, 51e12)}, inv: eight,
			verdict: api.VerdictFailed, reason: "gpu-burn: no result for GPU 7 (the node has 8 GPUs)"},
		"0 iterations fails without min": {check: recipe.Check{Name: "gpu-burn"},
			ev: api.Evidence{Values: append(perGPUValues(7, 51e12), api.Measurement{Subject: GPU(7), Value: 51e12})}, inv: eight,
			verdict: api.VerdictFailed, reason: "gpu-burn: measured nothing for GPU 7 (0 iterations)"},
		"no evidence at all": {check: recipe.Check{Name: "gpu-burn"}, inv: Inventory{}, verdict: api.VerdictFailed,
			reason: "gpu-burn: the tool printed no measurement"},
		"each GPU on its own: the slowest named": {check: burn,
			ev:  api.Evidence{Values: append(perGPUValues(6, 51e12), api.Measurement{Subject: GPU(6), Value: 40e12, Work: 9}, api.Measurement{Subject: GPU(7), Value: 38e12, Work: 9})},
			inv: eight, verdict: api.VerdictFailed, value: 38e12,
			reason: "gpu-burn: 2 of 8 GPUs under the minimum, want at least 45Tflop/s (slowest first: GPU 7 at 38Tflop/s; GPU 6 at 40Tflop/s)"},
		"nccl is judged at args.size": {check: recipe.Check{Name: "nccl-allreduce", Min: q(t, "460GB/s"), Args: map[string]string{"size": "16GiB"}},
			ev:  api.Evidence{GPUs: 8, Values: []api.Measurement{{Subject: "8GiB", Size: 8 << 30, Value: 470e9}, {Subject: "16GiB", Size: 16 << 30, Value: 455e9}}},
			inv: eight, verdict: api.VerdictFailed, value: 455e9, reason: "all_reduce_perf: 16GiB at 455GB/s, want at least 460GB/s"},
		"nccl printed inf": {check: recipe.Check{Name: "nccl-allreduce"},
			ev:  api.Evidence{GPUs: 8, Values: []api.Measurement{{Subject: "8GiB", Size: 8 << 30, Note: "inf inf"}}},
			inv: eight, verdict: api.VerdictFailed, reason: "measured nothing for 8GiB (printed inf inf)"},
		"pairs need two GPUs": {check: recipe.Check{Name: "cuda-p2p"}, inv: Inventory{GPUs: 1}, verdict: api.VerdictFailed,
			reason: "p2pBandwidthLatencyTest unidirectional: needs at least 2 GPUs; the node has 1"},
		"nvbandwidth names its testcase": {check: recipe.Check{Name: "nvbandwidth", Args: map[string]string{"testcase": "host_to_device_memcpy_ce"}},
			ev:  api.Evidence{Values: []api.Measurement{{Subject: HostToDevice(0), Value: 55e9}}},
			inv: Inventory{GPUs: 2}, verdict: api.VerdictFailed, reason: "nvbandwidth host_to_device_memcpy_ce: no result for GPU 1 host->device"},
		"a check ingot cannot judge": {check: recipe.Check{Name: "gpu-burnin"}, verdict: api.VerdictCouldNotRun, reason: "ingot has no judge for this check"},
		"fio disk parts": {check: recipe.Check{Name: "fio"},
			ev:  api.Evidence{Values: []api.Measurement{{Subject: "/dev/nvme1n1 job randread", Value: 1e9, Work: 1e10}}},
			inv: Inventory{Disks: []string{"/dev/nvme1n1"}}, verdict: api.VerdictPassed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Judge(tc.check, tc.burnIn, tc.ev, tc.inv)
			if got.Verdict != tc.verdict || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("got %s %q, want %s saying %q", got.Verdict, got.Reason, tc.verdict, tc.reason)
			}
			if tc.value != 0 && got.Value != tc.value {
				t.Errorf("value %g, want %g", got.Value, tc.value)
			}
		})
	}
}

// TestApply: the judgement fills the API's result, verdict kind and flags
// in step, with the evidence.
func TestApply(t *testing.T) {
	for _, v := range []api.Verdict{api.VerdictPassed, api.VerdictFailed, api.VerdictCouldNotRun} {
		var res api.CheckResult
		Result{Verdict: v, Value: 3, Reason: "r"}.Apply(&res, api.Evidence{Tool: "x"})
		if res.Verdict != v || res.OK != (v == api.VerdictPassed) || res.Skipped != (v == api.VerdictCouldNotRun) ||
			res.Value != 3 || res.Detail != "r" || res.Evidence == nil || res.Evidence.Tool != "x" {
			t.Errorf("%s: %+v", v, res)
		}
	}
}

// TestRulesCoverTheRegistry: every burn-in check of the recipe registry
// has a rule, and no rule names a check the registry lacks.
func TestRulesCoverTheRegistry(t *testing.T) {
	var burnIn []string
	for _, s := range recipe.Checks() {
		if s.Stage == recipe.StageBurnIn {
			burnIn = append(burnIn, s.Name)
		}
	}
	got := Checks()
	slices.Sort(burnIn)
	slices.Sort(got)
	if !slices.Equal(burnIn, got) {
		t.Errorf("rules %v, registry's burn-in checks %v", got, burnIn)
	}
}

func TestInventoryOf(t *testing.T) {
	hw := recipe.Hardware{GPUs: []recipe.GPUSpec{{Model: "H100", Count: 8}}}
	if got := InventoryOf(machine.Inventory{GPUs: make([]machine.GPU, 7)}, hw, []string{"/dev/nvme1n1"}); got.GPUs != 8 || len(got.Disks) != 1 {
		t.Errorf("one GPU lost: %+v, want the recipe's 8", got)
	}
	if got := InventoryOf(machine.Inventory{GPUs: make([]machine.GPU, 9)}, hw, nil); got.GPUs != 9 {
		t.Errorf("one GPU more: %+v, want the node's 9", got)
	}
}

func TestShow(t *testing.T) {
	for _, c := range []struct {
		v    float64
		u    recipe.Unit
		want string
	}{{45.68e12, recipe.UnitFlops, "45.68Tflop/s"}, {372.1e9, recipe.UnitBytesPerSecond, "372.1GB/s"}, {392.5e9, recipe.UnitBitsPerSecond, "392.5Gbps"}, {3, recipe.UnitNone, "3"}} {
		if got := Show(c.v, c.u); got != c.want {
			t.Errorf("Show(%g, %s) = %q, want %q", c.v, c.u, got, c.want)
		}
	}
}
