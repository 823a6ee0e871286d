package telemetry

import (
	"math"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
)

func bucketsOf(watts ...float64) []Bucket {
	var out []Bucket
	for i, w := range watts {
		out = append(out, Bucket{start: t0.Add(time.Duration(i) * BucketSize).Unix(), n: 1, nw: 1, sumW: float32(w), maxW: float32(w),
			npw: 1, psuIn: float32(w / 0.94), psuOut: float32(w)})
	}
	return out
}

// The report's numbers, checked against hand computation.
func TestReportByHand(t *testing.T) {
	a := make([]float64, 0, 12)
	for range 10 {
		a = append(a, 5000)
	}
	a = append(a, 6000, 6000)
	bs := map[string][]Bucket{"m-a": bucketsOf(a...), "m-b": bucketsOf(3000, 3000, 3000)}
	rep := BuildReport(ReportInput{
		Machines: []machine.Machine{
			{ID: "m-a", Name: "a", Rack: "r12", Recipe: "h100", BMC: machine.BMC{Endpoint: "x"}},
			{ID: "m-b", Name: "b", Rack: "r12", Recipe: "h100", BMC: machine.BMC{Endpoint: "y"}},
			{ID: "m-c", Name: "c", Rack: "r12"}, // no BMC: not in the report
		},
		GPUs:    func(machine.Machine) int { return 8 },
		Racks:   []rack.Rack{{Name: "r12", FeedVolts: 415, Phases: 3, BreakerAmps: 32, StartupMarginWatts: 2000, PUE: 1.3, TariffPerKWh: 0.21}},
		Buckets: func(id string) []Bucket { return bs[id] },
		Window:  24 * time.Hour,
	})
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %.5f, want %.5f", what, got, want)
		}
	}
	if len(rep.Nodes) != 2 || len(rep.Racks) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	n := rep.Nodes[0]
	// Median: the 6th of 12 sorted (5000); p95: the 12th (6000); mean
	// 62000/12 = 5166.667 W; 124 kWh a day; x 1.3 x 0.21 = 33.852 a day;
	// per GPU-hour 5.166667 kW x 1.3 x 0.21 / 8 = 0.176313.
	near("median", n.MedianW, 5000)
	near("p95", n.P95W, 6000)
	near("kWh/day", n.KWhPerDay, 124)
	near("cost/day", n.CostPerDay, 33.852)
	near("cost per GPU-hour", n.CostPerGPUHour, 0.176313)
	near("PSU efficiency", n.PSUEfficiency, 0.94)
	r := rep.Racks[0]
	// Budget 415 x 32 x 1.7320508 x 0.8 - 2000 = 16400.9; p95 sum 6000 +
	// 3000 = 9000; headroom 7400.9.
	near("rack budget", r.BudgetW, 16400.94)
	near("rack p95", r.P95W, 9000)
	near("rack headroom", r.HeadroomW, 7400.94)
	if r.OverBudget {
		t.Error("rack over budget")
	}
	// An override of tariff and PUE applies to every node.
	rep = BuildReport(ReportInput{Machines: []machine.Machine{{ID: "m-b", Name: "b", BMC: machine.BMC{Endpoint: "y"}}},
		Buckets: func(id string) []Bucket { return bs[id] }, Tariff: 0.5, PUE: 1.5})
	near("override cost/day", rep.Nodes[0].CostPerDay, 3000*24/1000.0*1.5*0.5)
}

// A node drawing more per GPU than its recipe's median by the factor is
// flagged.
func TestReportFlagsInefficient(t *testing.T) {
	bs := map[string][]Bucket{"1": bucketsOf(4000), "2": bucketsOf(4100), "3": bucketsOf(4050), "4": bucketsOf(5000)}
	var ms []machine.Machine
	for _, id := range []string{"1", "2", "3", "4"} {
		ms = append(ms, machine.Machine{ID: id, Name: "n" + id, Recipe: "h100", BMC: machine.BMC{Endpoint: id}})
	}
	rep := BuildReport(ReportInput{Machines: ms, GPUs: func(machine.Machine) int { return 8 }, Buckets: func(id string) []Bucket { return bs[id] }})
	for _, n := range rep.Nodes {
		if (n.Inefficient != "") != (n.Machine == "n4") {
			t.Errorf("%s: inefficient %q", n.Machine, n.Inefficient)
		}
	}
}

// Peak over a job's span and the load limits it is judged by.
func TestPeakUnderLoad(t *testing.T) {
	a := NewAggregator()
	for i, c := range []struct{ w, inlet, gpu float64 }{{2000, 24, 50}, {9800, 31, 84}, {10100, 36, 80}, {3000, 40, 40}} {
		a.Add(Sample{Machine: "m", Up: true, Time: t0.Add(time.Duration(i) * BucketSize), Watts: c.w, InletC: c.inlet, GPUMaxC: c.gpu})
	}
	w, inlet, gpu, n := a.Peak("m", t0.Add(BucketSize+time.Minute), t0.Add(2*BucketSize+time.Minute))
	if n != 2 || w != 10100 || inlet != 36 || gpu != 84 {
		t.Errorf("peak: %v W %v °C %v °C over %d buckets", w, inlet, gpu, n)
	}
	l := Limits{LoadWatts: 10200, WattsMarginPct: 10, InletMaxC: 35, GPUMaxC: 87}
	if got := UnderLoad(l, w, inlet, gpu); got != "inlet 36.0 °C, above 35 °C" {
		t.Errorf("UnderLoad = %q", got)
	}
	if got := UnderLoad(l, 11300, 30, 90); got != "11300 W, above load_watts 10200 + 10%, GPU 90.0 °C, above 87 °C" {
		t.Errorf("UnderLoad = %q", got)
	}
}
