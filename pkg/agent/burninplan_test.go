package agent

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The burn-in plan holds the node to every GPU it has of the recipe's
// vendors: a ninth NVIDIA GPU the recipe does not count must show in every
// per-GPU result too; the BMC's Intel display controller is no CUDA device.
func TestBurnInPlanGPUs(t *testing.T) {
	task := api.Task{Checks: []recipe.Check{{Name: "gpu-burn"}},
		Expected: recipe.Hardware{GPUs: []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 8}}}}
	nvidia := machine.GPU{Vendor: "NVIDIA", Model: "NVIDIA H100 80GB HBM3"}
	for name, tc := range map[string]struct {
		gpus []machine.GPU
		want int
	}{
		"as the recipe":                        {gpus: repeatGPU(nvidia, 8), want: 8},
		"one missing: the recipe":              {gpus: repeatGPU(nvidia, 7), want: 8},
		"one more: the node":                   {gpus: repeatGPU(nvidia, 9), want: 9},
		"an Intel VGA is no GPU of the recipe": {gpus: append(repeatGPU(nvidia, 8), machine.GPU{Vendor: "Intel", Model: "Intel [8086:0412]"}), want: 8},
	} {
		t.Run(name, func(t *testing.T) {
			p, ok := burnInPlan(task, "/dev/nvme0n1", machine.Inventory{GPUs: tc.gpus})
			if !ok || p.GPUs != tc.want {
				t.Errorf("plan GPUs %d (ok %v), want %d", p.GPUs, ok, tc.want)
			}
		})
	}
}

func repeatGPU(g machine.GPU, n int) []machine.GPU {
	out := make([]machine.GPU, n)
	for i := range out {
		out[i] = g
	}
	return out
}
