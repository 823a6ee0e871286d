package telemetry

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
)

// ReportInput is what a power report is made from.
type ReportInput struct {
	Machines []machine.Machine
	// GPUs gives a machine's GPU count (its recipe's); 0: no GPU-hour cost.
	GPUs    func(m machine.Machine) int
	Racks   []rack.Rack
	Buckets func(machineID string) []Bucket // the window's aggregates
	// Summaries, where set, replaces Buckets: the window's daily summaries
	// (windows longer than Retention). A node's median is then the median
	// of its daily medians, its p95 the p95 of its daily p95s, its mean the
	// mean of its days weighted by their readings.
	Summaries func(machineID string) []Summary
	Window    time.Duration
	// Tariff and PUE override every rack's (0: the rack's, else 0 and 1).
	Tariff, PUE float64
	// InefficientFactor flags a node whose watts per GPU exceed its
	// recipe's median by this factor (default 1.15).
	InefficientFactor float64
}

// NodePower is one machine's line of the report.
type NodePower struct {
	Machine, Rack, Recipe string
	GPUs                  int
	Buckets               int // 5-minute spans with a watt reading
	MedianW, P95W, MeanW  float64
	KWhPerDay             float64
	CostPerDay            float64
	CostPerGPUHour        float64 // kWh x PUE x tariff / (GPUs x hours)
	PSUEfficiency         float64 // measured output / input, 0 unknown
	WattsPerGPU           float64
	Inefficient           string // why it is flagged, "" when not
}

// RackPower is one rack's line: what its nodes draw against its budget.
type RackPower struct {
	Rack        string
	Nodes       int
	MedianW     float64 // the sum of its nodes' medians
	P95W        float64 // the sum of its nodes' p95 (conservative)
	BudgetW     float64 // 0: the rack is not in racks.yaml
	HeadroomW   float64 // budget - p95
	KWhPerDay   float64
	CostPerDay  float64
	OverBudget  bool
	PUE, Tariff float64
}

// Report is the power and cost report.
type Report struct {
	Window time.Duration
	Nodes  []NodePower
	Racks  []RackPower
}

// BuildReport computes the report: per node the median and p95 of its
// 5-minute mean watts over the window, energy and cost a day, cost per
// GPU-hour and measured PSU efficiency; per rack the sums against its
// budget. Nodes without a watt reading in the window are listed with zeros.
func BuildReport(in ReportInput) Report {
	if in.InefficientFactor <= 0 {
		in.InefficientFactor = 1.15
	}
	racks := map[string]rack.Rack{}
	for _, r := range in.Racks {
		racks[r.Name] = r
	}
	rep := Report{Window: in.Window}
	byRack := map[string]*RackPower{}
	for _, m := range in.Machines {
		if m.BMC.Endpoint == "" {
			continue
		}
		rk := racks[m.Rack]
		pue, tariff := first(in.PUE, rk.PUE, 1), first(in.Tariff, rk.TariffPerKWh, 0)
		n := NodePower{Machine: m.Name, Rack: m.Rack, Recipe: m.Recipe}
		if in.GPUs != nil {
			n.GPUs = in.GPUs(m)
		}
		var pin, pout float64
		if in.Summaries != nil {
			var meds, p95s []float64
			var sum float64
			for _, d := range in.Summaries(m.ID) {
				if d.Buckets() > 0 {
					meds, p95s = append(meds, d.MedianWatts()), append(p95s, d.P95Watts())
					sum += d.MeanWatts() * float64(d.Buckets())
					n.Buckets += d.Buckets()
				}
				i, o := d.PSUWatts()
				pin, pout = pin+i, pout+o
			}
			if n.Buckets > 0 {
				n.MedianW, n.P95W, n.MeanW = quantile(meds, 0.5), quantile(p95s, 0.95), sum/float64(n.Buckets)
			}
		} else {
			var means []float64
			for _, b := range in.Buckets(m.ID) {
				if w := b.MeanWatts(); w > 0 {
					means = append(means, w)
				}
				i, o := b.PSUWatts()
				pin, pout = pin+i, pout+o
			}
			n.Buckets = len(means)
			if len(means) > 0 {
				n.MedianW, n.P95W, n.MeanW = quantile(means, 0.5), quantile(means, 0.95), mean(means)
			}
		}
		if n.Buckets > 0 {
			n.KWhPerDay = n.MeanW * 24 / 1000
			n.CostPerDay = n.KWhPerDay * pue * tariff
			if n.GPUs > 0 {
				n.CostPerGPUHour = n.MeanW / 1000 * pue * tariff / float64(n.GPUs)
				n.WattsPerGPU = n.MeanW / float64(n.GPUs)
			}
		}
		if pin > 0 {
			n.PSUEfficiency = pout / pin
		}
		rep.Nodes = append(rep.Nodes, n)
		rp := byRack[m.Rack]
		if rp == nil {
			rp = &RackPower{Rack: m.Rack, BudgetW: budget(rk, m.Rack != "" && rk.Name != ""), PUE: pue, Tariff: tariff}
			byRack[m.Rack] = rp
		}
		rp.Nodes++
		rp.MedianW += n.MedianW
		rp.P95W += n.P95W
		rp.KWhPerDay += n.KWhPerDay
		rp.CostPerDay += n.CostPerDay
	}
	flagInefficient(rep.Nodes, in.InefficientFactor)
	for _, rp := range byRack {
		if rp.BudgetW > 0 {
			rp.HeadroomW = rp.BudgetW - rp.P95W
			rp.OverBudget = rp.HeadroomW < 0
		}
		rep.Racks = append(rep.Racks, *rp)
	}
	sort.Slice(rep.Nodes, func(i, j int) bool { return rep.Nodes[i].Machine < rep.Nodes[j].Machine })
	sort.Slice(rep.Racks, func(i, j int) bool { return rep.Racks[i].Rack < rep.Racks[j].Rack })
	return rep
}

// flagInefficient marks nodes whose watts per GPU exceed the median of
// their recipe's nodes by factor.
func flagInefficient(nodes []NodePower, factor float64) {
	by := map[string][]float64{}
	for _, n := range nodes {
		if n.WattsPerGPU > 0 {
			by[n.Recipe] = append(by[n.Recipe], n.WattsPerGPU)
		}
	}
	for i, n := range nodes {
		ws := by[n.Recipe]
		if len(ws) < 3 || n.WattsPerGPU == 0 {
			continue // a median of fewer than three says little
		}
		med := quantile(ws, 0.5)
		if n.WattsPerGPU > med*factor {
			nodes[i].Inefficient = formatPct(n.WattsPerGPU/med-1) + " more watts per GPU than the median of " + n.Recipe
		}
	}
}

func budget(r rack.Rack, known bool) float64 {
	if !known {
		return 0
	}
	return r.BudgetWatts()
}

// quantile is the nearest-rank quantile of vs (not modified).
func quantile(vs []float64, q float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func mean(vs []float64) float64 {
	var t float64
	for _, v := range vs {
		t += v
	}
	return t / float64(len(vs))
}

func first(vs ...float64) float64 {
	for _, v := range vs {
		if v != 0 {
			return v
		}
	}
	return 0
}

func formatPct(f float64) string {
	return strconvF(f*100) + " %"
}

func strconvF(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }
