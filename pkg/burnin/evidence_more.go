package burnin

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// dcgmEvidence: per GPU how many tests passed on it; every Fail or Warn,
// with DCGM's message, as a fault naming the GPU and the test. JSON when
// the output holds a document, else the table.
func dcgmEvidence(out []byte, _ recipe.Check) api.Evidence {
	ev := api.Evidence{Tool: "dcgmi diag"}
	r, err := ParseDCGM(out)
	if err != nil && jsonStart(out, 0) < 0 {
		r, err = ParseDCGMText(out)
	}
	if err != nil {
		ev.NotRun = err.Error()
		return ev
	}
	passed := map[int]int{}
	var ids []int
	for _, t := range r.Tests {
		for _, e := range t.Entities {
			if e.Group != "GPU" {
				continue
			}
			if _, ok := passed[e.ID]; !ok {
				ids = append(ids, e.ID)
			}
			passed[e.ID] += b2i(e.Status == DCGMPass)
			if e.Status == DCGMFail || e.Status == DCGMWarn {
				ev.Faults = append(ev.Faults, api.Fault{Subject: judge.GPU(e.ID), Detail: dcgmDetail(t, e.Status, e.Warnings)})
			}
		}
		if (t.Status == DCGMFail || t.Status == DCGMWarn) && !slices.ContainsFunc(t.Entities, func(e DCGMEntityResult) bool { return e.Status == t.Status }) {
			ev.Faults = append(ev.Faults, api.Fault{Subject: "all GPUs", Detail: dcgmDetail(t, t.Status, t.Warnings)})
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		ev.Values = append(ev.Values, api.Measurement{Subject: judge.GPU(id), Value: float64(passed[id]), Work: float64(passed[id])})
	}
	return ev
}

func dcgmDetail(t DCGMTest, st DCGMStatus, ws []DCGMWarning) string {
	s := fmt.Sprintf("%s %s", t.Name, st)
	for _, w := range ws {
		s += ": " + w.Message
	}
	return s
}

// stressNGEvidence: per stressor its bogo ops per second; "fail:" lines,
// failed instances, an unsuccessful run and untrustworthy metrics as
// faults; a skipped stressor measured nothing.
func stressNGEvidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := parseStressNG(out)
	ev := api.Evidence{Tool: "stress-ng", NotRun: notRun(err)}
	for _, f := range r.Failures {
		ev.Faults = append(ev.Faults, api.Fault{Subject: "stress-ng", Detail: f})
	}
	seen := map[string]bool{}
	for _, s := range r.Stressors {
		seen[s.Name] = true
		ev.Values = append(ev.Values, api.Measurement{Subject: s.Name, Value: s.OpsPerSec, Work: float64(s.BogoOps)})
		if s.Status == "failed" && len(r.Failures) == 0 {
			ev.Faults = append(ev.Faults, api.Fault{Subject: s.Name, Detail: "failed"})
		}
	}
	if err == nil {
		switch {
		case r.FailedInstances > 0 && len(ev.Faults) == 0:
			ev.Faults = append(ev.Faults, api.Fault{Subject: "stress-ng", Detail: fmt.Sprintf("%d failed instances", r.FailedInstances)})
		case !r.Successful && len(ev.Faults) == 0:
			ev.Faults = append(ev.Faults, api.Fault{Subject: "stress-ng", Detail: "unsuccessful run completed"})
		case r.UntrustworthyInstances > 0:
			ev.Faults = append(ev.Faults, api.Fault{Subject: "stress-ng", Detail: fmt.Sprintf("metrics untrustworthy: %d instances", r.UntrustworthyInstances)})
		}
	}
	return ev
}

// fioEvidence: per disk (one document each) what it read, or wrote; a
// job's I/O error as a fault naming the disk.
func fioEvidence(out []byte, _ recipe.Check) api.Evidence {
	ev := api.Evidence{Tool: "fio"}
	for off := 0; off < len(out); {
		r, end, err := parseFioAt(out, off)
		if err != nil {
			if len(ev.Values) == 0 || !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "no JSON document") {
				ev.NotRun = firstNonEmpty(ev.NotRun, err.Error())
			}
			break
		}
		perDisk := map[string]int{}
		for _, j := range r.Jobs {
			perDisk[firstNonEmpty(j.Filename, j.Name)]++
		}
		for _, j := range r.Jobs {
			fioJob(&ev, j, perDisk[firstNonEmpty(j.Filename, j.Name)] > 1)
		}
		off = end
	}
	return ev
}

// fioIOErrors are the errnos of a failed read that point at the disk: EIO,
// ENXIO, ENODATA, EILSEQ (medium errors), ETIMEDOUT.
var fioIOErrors = []int{5, 6, 61, 84, 110}

// fioJob adds one job's number, named by its disk (and by the job where a
// disk has several).
func fioJob(ev *api.Evidence, j FioJob, named bool) {
	disk := firstNonEmpty(j.Filename, j.Name)
	if named {
		disk += " job " + j.Name
	}
	io := j.Read
	if io.IOBytes == 0 && j.Write.IOBytes > 0 {
		io = j.Write
	}
	switch {
	case j.Error != 0 && slices.Contains(fioIOErrors, j.Error):
		ev.Faults = append(ev.Faults, api.Fault{Subject: disk, Detail: fmt.Sprintf("I/O error (errno %d) reading the disk", j.Error)})
	case j.Error != 0:
		ev.NotRun = firstNonEmpty(ev.NotRun, fmt.Sprintf("fio job %s on %s failed with errno %d", j.Name, disk, j.Error))
	}
	ev.Values = append(ev.Values, api.Measurement{Subject: disk, Value: io.BytesPerSec, Work: float64(io.IOBytes)})
}

// iperf3Evidence: what the receiver got; iperf3's "error" (no peer, a
// refused connection) means it could not run.
func iperf3Evidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := ParseIperf3(out)
	if err != nil {
		return api.Evidence{Tool: "iperf3", NotRun: err.Error()}
	}
	return api.Evidence{Tool: "iperf3", Values: []api.Measurement{{Subject: fmt.Sprintf("received over %d streams", r.Streams),
		Value: r.ReceivedBitsPerSec, Work: float64(r.ReceivedBytes)}}}
}

// ibWriteBWEvidence: the best average over the message sizes run.
func ibWriteBWEvidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := ParseIBWriteBW(out)
	if err != nil {
		return api.Evidence{Tool: "ib_write_bw", NotRun: err.Error()}
	}
	best := slices.MaxFunc(r.Rows, func(a, b IBWriteBWRow) int { return cmp.Compare(a.AvgBitsPerSec, b.AvgBitsPerSec) })
	return api.Evidence{Tool: "ib_write_bw", Values: []api.Measurement{{Subject: fmt.Sprintf("average with %dB messages", best.SizeBytes),
		Value: best.AvgBitsPerSec, Work: float64(best.Iterations)}}}
}

// cudaBandwidthEvidence: per GPU (one run each) its best host-to-device
// and device-to-host bandwidth. A run over several GPUs adds them up and
// names none.
func cudaBandwidthEvidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := ParseBandwidthTest(out)
	ev := api.Evidence{Tool: "bandwidthTest", NotRun: notRun(err)}
	for _, run := range r.Runs {
		if run.Result == "FAIL" {
			ev.NotRun = firstNonEmpty(ev.NotRun, "bandwidthTest on device "+devList(run.Devices)+" printed Result = FAIL")
		}
		best := map[string]float64{}
		for _, t := range run.Transfers {
			best[t.Kind] = max(best[t.Kind], t.BytesPerSec)
		}
		for _, k := range []string{"H2D", "D2H"} {
			v, ok := best[k]
			if !ok {
				continue
			}
			ev.Values = append(ev.Values, api.Measurement{Subject: bwtSubject(run.Devices, k), Value: v, Work: v})
		}
	}
	return ev
}

func bwtSubject(devs []int, kind string) string {
	if len(devs) == 1 && kind == "H2D" {
		return judge.HostToDevice(devs[0])
	}
	if len(devs) == 1 {
		return judge.DeviceToHost(devs[0])
	}
	return fmt.Sprintf("GPUs %s %s (summed over the GPUs)", devList(devs), map[string]string{"H2D": "host->device", "D2H": "device->host"}[kind])
}

// p2pEvidence: every pair of the judged matrix (the diagonal is a GPU's
// own memory, not a pair).
func p2pEvidence(out []byte, c recipe.Check) api.Evidence {
	r, err := ParseP2P(out)
	ev := api.Evidence{Tool: "p2pBandwidthLatencyTest", NotRun: notRun(err)}
	m, ok := r.Matrix(judge.P2PMatrix(c))
	if !ok {
		return ev
	}
	for _, cell := range m.Cells {
		if cell.Row != cell.Col {
			ev.Values = append(ev.Values, api.Measurement{Subject: judge.Pair(cell.Row, cell.Col), Value: cell.Value})
		}
	}
	return ev
}

// cublasEvidence: per GPU its best rate over every run and how many runs
// checked their product; a run whose product differs from the CPU's is a
// fault.
func cublasEvidence(out []byte, _ recipe.Check) api.Evidence {
	r, err := ParseCUBLAS(out)
	ev := api.Evidence{Tool: "matrixMulCUBLAS", NotRun: notRun(err)}
	type gpu struct {
		best          float64
		passed, fails int
		errors        int64
	}
	by := map[int]*gpu{}
	var order []int
	for _, run := range r.Runs {
		g, ok := by[run.Device]
		if !ok {
			g = &gpu{}
			by[run.Device] = g
			order = append(order, run.Device)
		}
		g.best = max(g.best, run.GflopsPerSec*1e9)
		g.passed += b2i(run.Compared == "PASS")
		g.fails += b2i(run.Compared == "FAIL")
		g.errors += run.Errors
	}
	slices.Sort(order)
	for _, d := range order {
		g := by[d]
		ev.Values = append(ev.Values, api.Measurement{Subject: judge.GPU(d), Value: g.best, Work: float64(g.passed)})
		if g.fails > 0 {
			ev.Faults = append(ev.Faults, api.Fault{Subject: judge.GPU(d),
				Detail: fmt.Sprintf("product differs from the CPU's in %d of %d runs (%d wrong elements)", g.fails, g.fails+g.passed, g.errors)})
		}
	}
	return ev
}

// clpeakTests maps args.test to clpeak's section.
var clpeakTests = map[string]string{
	"compute-sp": "Single-precision compute",
	"compute-dp": "Double-precision compute",
	"compute-hp": "Half-precision compute",
}

// clpeakTest is the clpeak section a check judges: args.test, default
// single precision.
func clpeakTest(c recipe.Check) (flag, section string) {
	flag = firstNonEmpty(c.Args["test"], "compute-sp")
	return flag, clpeakTests[flag]
}

// clpeakEvidence: per NVIDIA OpenCL device its best rate in the judged
// test (devices of other platforms, pocl's CPU, are not GPUs).
func clpeakEvidence(out []byte, c recipe.Check) api.Evidence {
	r, err := ParseClpeak(out)
	ev := api.Evidence{Tool: "clpeak", NotRun: notRun(err)}
	_, section := clpeakTest(c)
	nvidia := slices.ContainsFunc(r.Devices, func(d ClpeakDevice) bool { return strings.Contains(d.Platform, "NVIDIA") })
	for _, d := range r.Devices {
		if nvidia && !strings.Contains(d.Platform, "NVIDIA") {
			continue
		}
		m := api.Measurement{Subject: judge.GPU(d.Index)}
		switch t, ok := d.Test(section); {
		case !ok:
			m.Note = "not run"
		case t.Skipped:
			m.Note = "skipped: no support"
		default:
			m.Value = t.Best
		}
		ev.Values = append(ev.Values, m)
	}
	return ev
}

// concat joins the outputs of a tool's runs, a newline between two where
// the first lacks one (the last keeps its end as it was: cut or not).
func concat(outs [][]byte) []byte {
	var b bytes.Buffer
	for i, o := range outs {
		b.Write(o)
		if i < len(outs)-1 && len(o) > 0 && o[len(o)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
