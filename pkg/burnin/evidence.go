package burnin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The evidence readers: a tool's output in, what it measured out
// (api.Evidence), ready for judge.Judge. Each keeps the tool's own failure
// lines (#wrong, FAULTY, a miscompare) as Faults, apart from "the tool
// could not run" (NotRun), and names every value by judge's subjects.

// Limits on one Evidence, so a report stays small (the agent API takes
// 256 KiB a request): an 8-GPU pair matrix is 56 values.
const (
	maxValues = 1024
	maxFaults = 64
)

// Evidence reads the output of check c's tool (every run of it, one after
// the other) into evidence. A check ingot has no reader for could not run.
func Evidence(c recipe.Check, out []byte) api.Evidence {
	t, ok := tools[c.Name]
	if !ok || t.evidence == nil {
		return api.Evidence{Tool: c.Name, NotRun: fmt.Sprintf("ingot has no reader for %q's output", c.Name)}
	}
	ev := t.evidence(out, c)
	if ev.Tool == "" {
		ev.Tool = t.bin
	}
	return bounded(ev)
}

// JudgeOutput reads out as check c's tool output and judges it against
// the recipe: what `ingot burnin judge` and the first-boot runner do.
func JudgeOutput(c recipe.Check, b recipe.BurnIn, out []byte, inv judge.Inventory) (api.Evidence, judge.Result) {
	ev := Evidence(c, out)
	return ev, judge.Judge(c, b, ev, inv)
}

func bounded(ev api.Evidence) api.Evidence {
	if n := len(ev.Values) - maxValues; n > 0 {
		ev.Values, ev.More = ev.Values[:maxValues], ev.More+n
	}
	if n := len(ev.Faults) - maxFaults; n > 0 {
		ev.Faults, ev.More = ev.Faults[:maxFaults], ev.More+n
	}
	return ev
}

// notRun is the NotRun text of a parse error: what stopped the tool.
func notRun(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// miscompare turns a parse error that is a hardware verdict into a fault.
func miscompare(ev *api.Evidence, subject string, err error) {
	var pe *ParseError
	if errors.As(err, &pe) && errors.Is(err, ErrMiscompare) {
		ev.Faults = append(ev.Faults, api.Fault{Subject: subject, Detail: strings.TrimPrefix(pe.Msg+": "+pe.Text, ": ")})
	}
}

// gpuBurnEvidence: per GPU its best rate and its iterations; a FAULTY GPU
// with its error count (overflowed counts shown as such), a dead worker.
func gpuBurnEvidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := parseGPUBurn(out)
	ev := api.Evidence{Tool: "gpu-burn", NotRun: notRun(err)}
	for _, g := range r.GPUs {
		s := judge.GPU(g.Index)
		ev.Values = append(ev.Values, api.Measurement{Subject: s, Value: g.MaxGflopsPerSec * 1e9, Work: float64(max(g.Iterations, 0))})
		if f := gpuBurnFault(g, err == nil); f != "" {
			ev.Faults = append(ev.Faults, api.Fault{Subject: s, Detail: f})
		}
	}
	return ev
}

// gpuBurnFault says what is wrong with one GPU of a run, "" if nothing.
// verdict: g.OK is gpu-burn's own final verdict.
func gpuBurnFault(g GPUBurnGPU, verdict bool) string {
	var why []string
	switch {
	case verdict && !g.OK:
		why = append(why, "FAULTY")
	case g.MaxErrors > 0 || g.OverflowedErrors < 0:
		why = append(why, "computed wrong results")
	}
	switch {
	case g.OverflowedErrors < 0:
		why = append(why, fmt.Sprintf("error count overflowed: printed %d, more than 2^31-1 errors", g.OverflowedErrors))
	case g.MaxErrors > 0:
		why = append(why, fmt.Sprintf("%d errors", g.MaxErrors))
	}
	if g.Died {
		why = append(why, "its worker died (the GPU stopped computing)")
	}
	if len(why) == 0 {
		return ""
	}
	if why[0] == "FAULTY" && len(why) == 1 {
		return "FAULTY (errors in an earlier interval)"
	}
	return strings.Join(why, ", ")
}

// ncclEvidence: per message size its best bus bandwidth; #wrong values,
// out of bounds values and NCCL_TESTS_MIN_BW as faults.
func ncclEvidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := parseNCCL(out)
	ev := api.Evidence{Tool: "all_reduce_perf", GPUs: r.Ranks, NotRun: notRun(err)}
	for _, row := range r.Rows {
		size := recipe.Size(row.SizeBytes).String()
		m := api.Measurement{Subject: size, Size: row.SizeBytes, Value: max(row.OutOfPlace.BusBWBytesPerSec, row.InPlace.BusBWBytesPerSec)}
		if m.Value == 0 {
			m.Note = strings.TrimSpace(row.OutOfPlace.NotANumber + " " + row.InPlace.NotANumber)
		}
		ev.Values = append(ev.Values, m)
		for _, h := range []struct {
			name string
			m    NCCLMeasure
		}{{"out-of-place", row.OutOfPlace}, {"in-place", row.InPlace}} {
			switch {
			case h.m.WrongNegative:
				ev.Faults = append(ev.Faults, api.Fault{Subject: "all_reduce " + size, Detail: fmt.Sprintf("wrong values, the count overflowed (printed %d) (%s)", h.m.Wrong, h.name)})
			case h.m.Wrong > 0:
				ev.Faults = append(ev.Faults, api.Fault{Subject: "all_reduce " + size, Detail: fmt.Sprintf("%d wrong values (%s)", h.m.Wrong, h.name)})
			}
		}
	}
	switch {
	case r.OutOfBounds < 0:
		ev.Faults = append(ev.Faults, api.Fault{Subject: "all sizes", Detail: fmt.Sprintf("out of bounds values, the count overflowed (printed %d): data corruption", r.OutOfBounds)})
	case r.OutOfBounds > 0:
		ev.Faults = append(ev.Faults, api.Fault{Subject: "all sizes", Detail: fmt.Sprintf("%d out of bounds values (data corruption)", r.OutOfBounds)})
	}
	if r.BelowMinBW {
		ev.Faults = append(ev.Faults, api.Fault{Subject: "average", Detail: "bus bandwidth under NCCL_TESTS_MIN_BW (nccl-tests printed FAILED)"})
	}
	return ev
}

// nvbandwidthEvidence: every cell of the judged testcase's matrix, named
// by judge's subjects; a data-pattern miscompare as a fault.
func nvbandwidthEvidence(out []byte, c recipe.Check) api.Evidence {
	r, err := parseNVBandwidth(out)
	tc := nvbwTestcase(c)
	ev := api.Evidence{Tool: "nvbandwidth"}
	for _, m := range r.Miscompares {
		ev.Faults = append(ev.Faults, api.Fault{Subject: firstNonEmpty(m.Testcase, "nvbandwidth"), Detail: "data-pattern check failed (the copy delivered wrong bytes): " + m.Text})
	}
	if errors.Is(err, ErrMiscompare) && len(r.Miscompares) == 0 {
		miscompare(&ev, tc, err)
	}
	if !errors.Is(err, ErrMiscompare) {
		ev.NotRun = notRun(err)
	}
	m, ok := nvbPick(r, tc)
	switch {
	case !ok && containsString(r.Waived, tc):
		ev.NotRun = firstNonEmpty(ev.NotRun, "nvbandwidth waived testcase "+tc+" (not applicable on this node)")
	case ok:
		ev.Values = nvbCells(m)
	}
	return ev
}

// nvbPick is the testcase's matrix: the only one, else the one named as
// the testcase, else its "_total".
func nvbPick(r NVBandwidthResult, tc string) (NVBandwidthMatrix, bool) {
	var of []NVBandwidthMatrix
	for _, m := range r.Matrices {
		if m.Testcase == tc {
			of = append(of, m)
		}
	}
	for _, m := range of {
		if len(of) == 1 || m.Name == tc || m.Name == tc+"_total" {
			return m, true
		}
	}
	return NVBandwidthMatrix{}, false
}

// nvbCells names each cell by the matrix's description: "CPU(row) ->
// GPU(column)" is host to device, "<-" device to host, GPU to GPU a pair
// (the arrow's direction: data goes from the column for "<-").
func nvbCells(m NVBandwidthMatrix) []api.Measurement {
	d := m.Description
	cpuRow, back := strings.Contains(d, "CPU(row)"), strings.Contains(d, "(row) <- ")
	var out []api.Measurement
	for _, c := range m.Cells {
		var s string
		switch {
		case cpuRow && back:
			s = judge.DeviceToHost(c.Col)
		case cpuRow:
			s = judge.HostToDevice(c.Col)
		case back:
			s = judge.Pair(c.Col, c.Row)
		default:
			s = judge.Pair(c.Row, c.Col)
		}
		v := api.Measurement{Subject: s, Value: c.BytesPerSec, Latency: m.Latency}
		if m.Latency {
			v.Value = c.LatencySec
		}
		out = append(out, v)
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
