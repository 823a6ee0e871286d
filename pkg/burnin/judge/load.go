package judge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// loadFaults are the hardware verdicts of the sampling around a GPU load:
// Xids over max_xid_errors, a GPU lost from nvidia-smi, a GPU over
// max_gpu_temp_c.
func loadFaults(l *api.LoadEvidence, b recipe.BurnIn) []string {
	var bad []string
	if len(l.Xids) > b.MaxXidErrors {
		var codes []string
		for _, x := range l.Xids {
			codes = append(codes, strings.TrimSuffix(fmt.Sprintf("Xid %d on %s (%s)", x.Code, x.PCI, x.Text), " ()"))
		}
		bad = append(bad, fmt.Sprintf("%d Xid errors during the load (max_xid_errors %d): %s", len(l.Xids), b.MaxXidErrors, list(codes, 8)))
	}
	for _, g := range l.GPUs {
		if g.Lost {
			bad = append(bad, fmt.Sprintf("GPU %s fell off nvidia-smi during the load", g.PCI))
		}
		if b.MaxGPUTempC > 0 && g.MaxTempC > float64(b.MaxGPUTempC) {
			bad = append(bad, fmt.Sprintf("GPU %s reached %g C (max_gpu_temp_c %d)", g.PCI, g.MaxTempC, b.MaxGPUTempC))
		}
	}
	return bad
}

// loadGaps is missing sampling evidence: what could not be read, no
// samples, GPUs the sampler never saw.
func loadGaps(l *api.LoadEvidence, inv Inventory) []string {
	if l == nil {
		return nil
	}
	why := slices.Clone(l.Problems)
	seen := map[int]bool{}
	for _, g := range l.GPUs {
		if g.Samples > 0 {
			seen[g.Index] = true
		}
	}
	if len(seen) == 0 {
		return append(why, "no nvidia-smi samples during the load (temperature and power unmeasured)")
	}
	var missing []string
	for i := range inv.GPUs {
		if !seen[i] {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		why = append(why, fmt.Sprintf("nvidia-smi never sampled GPU %s during the load (the node has %d GPUs)", strings.Join(missing, ", "), inv.GPUs))
	}
	return why
}
