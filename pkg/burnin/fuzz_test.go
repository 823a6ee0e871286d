package burnin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Every fuzz target: the parser never panics; an error is a *ParseError
// naming the tool and a line inside the input; a result is self-consistent
// and survives encoding/json (no NaN or Inf). Seeds are the fixtures.

func seed(f *testing.F, dirs ...string) {
	for _, d := range dirs {
		for _, b := range fixtures(f, d) {
			f.Add(b)
		}
	}
}

// jsonable fails t when v cannot be marshalled, as with NaN or Inf.
func jsonable(t *testing.T, v any) {
	t.Helper()
	if _, err := json.Marshal(v); err != nil {
		t.Fatalf("result does not encode: %v", err)
	}
}

func FuzzParseGPUBurn(f *testing.F) {
	seed(f, "gpuburn")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseGPUBurn(data)
		if err != nil {
			checkFuzzErr(t, toolGPUBurn, data, err)
			return
		}
		for i, g := range r.GPUs {
			if g.Index != i || g.MaxGflopsPerSec < g.LastGflopsPerSec || g.MaxTempCelsius < g.TempCelsius {
				t.Fatalf("inconsistent GPU %d: %+v", i, g)
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseDCGM(f *testing.F) {
	seed(f, "dcgm")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseDCGM(data)
		if err != nil {
			checkFuzzErr(t, toolDCGM, data, err)
			return
		}
		dcgmConsistent(t, r)
	})
}

func FuzzParseDCGMText(f *testing.F) {
	seed(f, "dcgm")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseDCGMText(data)
		if err != nil {
			checkFuzzErr(t, toolDCGM, data, err)
			return
		}
		dcgmConsistent(t, r)
	})
}

func dcgmConsistent(t *testing.T, r DCGMResult) {
	t.Helper()
	if len(r.Tests) == 0 {
		t.Fatal("no error and no tests")
	}
	for _, tc := range r.Tests {
		for _, e := range append([]DCGMEntityResult{{Status: tc.Status}}, tc.Entities...) {
			if e.Status.rank() < 0 {
				t.Fatalf("test %q: status %q", tc.Name, e.Status)
			}
		}
	}
	if r.Passed() && len(r.FailedGPUs()) != 0 {
		t.Fatal("passed with failed GPUs")
	}
	jsonable(t, r)
}

func FuzzParseNCCL(f *testing.F) {
	seed(f, "nccl")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseNCCL(data)
		if err != nil {
			checkFuzzErr(t, toolNCCL, data, err)
			return
		}
		if len(r.Rows) == 0 {
			t.Fatal("no error and no rows")
		}
		best := r.MaxBusBW(0)
		for _, row := range r.Rows {
			if row.OutOfPlace.BusBWBytesPerSec > best || row.InPlace.BusBWBytesPerSec > best {
				t.Fatalf("MaxBusBW %v below a row: %+v", best, row)
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseNVBandwidth(f *testing.F) {
	seed(f, "nvbandwidth")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseNVBandwidth(data)
		if err != nil {
			checkFuzzErr(t, toolNVBandwidth, data, err)
			return
		}
		for _, m := range r.Matrices {
			for _, c := range m.Cells {
				if c.Row < 0 || c.Row >= m.Rows || c.Col < 0 || c.Col >= m.Cols {
					t.Fatalf("cell %+v outside %dx%d", c, m.Rows, m.Cols)
				}
			}
			if _, ok := r.Matrix(m.Name); !ok || !strings.HasPrefix(m.Name, m.Testcase) {
				t.Fatalf("matrix %q of %q", m.Name, m.Testcase)
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseStressNG(f *testing.F) {
	seed(f, "stressng")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseStressNG(data)
		if err != nil {
			checkFuzzErr(t, toolStressNG, data, err)
			return
		}
		if r.Passed() && (!r.Successful || r.FailedInstances != 0) {
			t.Fatalf("inconsistent verdict: %+v", r)
		}
		jsonable(t, r)
	})
}

func FuzzParseStressNGYAML(f *testing.F) {
	seed(f, "stressng")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseStressNGYAML(data)
		if err != nil {
			checkFuzzErr(t, toolStressNG, data, err)
			return
		}
		if len(r.Stressors) == 0 {
			t.Fatal("no error and no stressors")
		}
		jsonable(t, r)
	})
}

func FuzzParseFio(f *testing.F) {
	seed(f, "fio")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseFio(data)
		if err != nil {
			checkFuzzErr(t, toolFio, data, err)
			return
		}
		if len(r.Jobs) == 0 {
			t.Fatal("no error and no jobs")
		}
		jsonable(t, r)
	})
}

func FuzzParseIperf3(f *testing.F) {
	seed(f, "iperf3")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseIperf3(data)
		if err != nil {
			checkFuzzErr(t, toolIperf3, data, err)
			return
		}
		jsonable(t, r)
	})
}

func FuzzParseIBWriteBW(f *testing.F) {
	seed(f, "ibwritebw")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseIBWriteBW(data)
		if err != nil {
			checkFuzzErr(t, toolIBWriteBW, data, err)
			return
		}
		for _, row := range r.Rows {
			if row.AvgBitsPerSec < 0 || row.AvgBitsPerSec > r.MaxAvgBitsPerSec() {
				t.Fatalf("row %+v vs max %v", row, r.MaxAvgBitsPerSec())
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseGPUSamples(f *testing.F) {
	seed(f, "samples")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseGPUSamples(data)
		if err != nil {
			checkFuzzErr(t, toolNvidiaSMI, data, err)
			return
		}
		n := 0
		for _, s := range r.ByGPU() {
			n += len(s)
		}
		if n != len(r.Samples) {
			t.Fatalf("ByGPU holds %d of %d samples", n, len(r.Samples))
		}
		var s Summary
		s.AddSamples(r)
		jsonable(t, s.GPUs())
	})
}

func FuzzParseXIDs(f *testing.F) {
	seed(f, "xid")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseXIDs(data)
		if err != nil {
			checkFuzzErr(t, toolXID, data, err)
			return
		}
		lines := len(splitLines(data))
		for _, ev := range r.Events {
			if ev.Line < 1 || ev.Line > lines || ev.Code < 0 {
				t.Fatalf("bad event %+v", ev)
			}
		}
		var s Summary
		s.AddXIDs(r)
		if total := sumXIDs(s.GPUs()); total != len(r.Events) {
			t.Fatalf("summary counts %d of %d Xids", total, len(r.Events))
		}
	})
}

func sumXIDs(g []GPUSummary) int {
	n := 0
	for _, v := range g {
		n += v.XIDs
	}
	return n
}

func FuzzParseBandwidthTest(f *testing.F) {
	seed(f, "bandwidthtest")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseBandwidthTest(data)
		if err != nil {
			checkFuzzErr(t, toolBandwidthTest, data, err)
		}
		for _, run := range r.Runs {
			for _, x := range run.Transfers {
				if x.BytesPerSec < 0 || x.SizeBytes < 0 {
					t.Fatalf("transfer %+v", x)
				}
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseP2P(f *testing.F) {
	seed(f, "p2p")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseP2P(data)
		if err != nil {
			checkFuzzErr(t, toolP2P, data, err)
		}
		for _, m := range r.Matrices {
			if len(m.Cells) != m.N*m.N {
				t.Fatalf("matrix %q: %d cells for %dx%d", m.Kind, len(m.Cells), m.N, m.N)
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseCUBLAS(f *testing.F) {
	seed(f, "cublas")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseCUBLAS(data)
		if err != nil {
			checkFuzzErr(t, toolCUBLAS, data, err)
			return
		}
		for _, run := range r.Runs {
			if run.Compared != "PASS" && run.Compared != "FAIL" {
				t.Fatalf("a complete run without its check: %+v", run)
			}
		}
		jsonable(t, r)
	})
}

func FuzzParseClpeak(f *testing.F) {
	seed(f, "clpeak")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseClpeak(data)
		if err != nil {
			checkFuzzErr(t, toolClpeak, data, err)
			return
		}
		for _, d := range r.Devices {
			for _, x := range d.Tests {
				if x.Best < 0 {
					t.Fatalf("test %+v", x)
				}
			}
		}
		jsonable(t, r)
	})
}

// FuzzJudgeOutput: every check's reader and the judge on any output: no
// panic, a known verdict, a reason, bounded evidence that encodes.
func FuzzJudgeOutput(f *testing.F) {
	seed(f, "nccl", "gpuburn", "nvbandwidth", "dcgm", "fio", "iperf3", "ibwritebw", "stressng", "bandwidthtest", "p2p", "cublas", "clpeak")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range Checks() {
			ev, res := JudgeOutput(recipe.Check{Name: name}, recipe.BurnIn{}, data, judge.Inventory{GPUs: 2, Disks: []string{"/dev/nvme1n1"}})
			switch res.Verdict {
			case api.VerdictPassed, api.VerdictFailed, api.VerdictCouldNotRun:
			default:
				t.Fatalf("%s: verdict %q", name, res.Verdict)
			}
			if res.Reason == "" || len(ev.Values) > maxValues || len(ev.Faults) > maxFaults {
				t.Fatalf("%s: %+v, %d values, %d faults", name, res, len(ev.Values), len(ev.Faults))
			}
			jsonable(t, ev)
			jsonable(t, res)
		}
	})
}
