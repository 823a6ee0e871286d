package burnin

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The command lines ingot runs each tool with, and how each output is held
// against the recipe's thresholds. Values are in the check's canonical unit
// (recipe.Quantity): flop/s, bytes/s, bits/s.

// show prints a measured value for people, in the largest unit it
// reaches, to 4 significant digits: 45.68Tflop/s, 372.1GB/s, 392.5Gbps.
func show(v float64, u recipe.Unit) string {
	units := map[recipe.Unit][]string{
		recipe.UnitFlops:          {"flop/s", "Kflop/s", "Mflop/s", "Gflop/s", "Tflop/s", "Pflop/s"},
		recipe.UnitBytesPerSecond: {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"},
		recipe.UnitBitsPerSecond:  {"bps", "Kbps", "Mbps", "Gbps", "Tbps"},
	}[u]
	if len(units) == 0 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	i := 0
	for i < len(units)-1 && v >= 1000 {
		v /= 1000
		i++
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + units[i]
}

func seconds(b recipe.BurnIn, fallback int) string {
	s := int(b.Duration.D().Seconds())
	if s <= 0 {
		s = fallback
	}
	return strconv.Itoa(s)
}

func dcgmArgv(c recipe.Check, _ Plan) [][]string {
	level := c.Args["level"]
	if level == "" {
		level = "3"
	}
	return [][]string{{"diag", "-r", level, "-j"}}
}

func judgeDCGM(out []byte, _ recipe.Check, _ Plan) api.CheckResult {
	r, err := ParseDCGM(out)
	if err != nil {
		if r2, err2 := ParseDCGMText(out); err2 == nil {
			r, err = r2, nil
		}
	}
	if err != nil {
		return api.CheckResult{Detail: err.Error()}
	}
	var bad []string
	for _, t := range r.Tests {
		if t.Status == DCGMFail || t.Status == DCGMWarn {
			bad = append(bad, fmt.Sprintf("%s %s", t.Name, t.Status))
		}
	}
	if r.Passed() {
		return api.CheckResult{OK: true, Value: float64(len(r.Tests)), Detail: fmt.Sprintf("dcgmi diag: %d tests passed (DCGM %s)", len(r.Tests), r.Version)}
	}
	return api.CheckResult{Value: float64(len(r.Tests)), Detail: fmt.Sprintf("dcgmi diag failed: %s; GPUs %v", strings.Join(bad, ", "), r.FailedGPUs())}
}

// gpuBurnArgv runs gpu-burn in its default FP32 mode (the Gflop/s its
// threshold is written in) for the burn-in duration.
func gpuBurnArgv(_ recipe.Check, p Plan) [][]string {
	return [][]string{{seconds(p.BurnIn, 600)}}
}

// judgeGPUBurn: every GPU OK (gpu-burn exits 0 either way), as many GPUs
// as the recipe has, each at least min flop/s at its best.
func judgeGPUBurn(out []byte, c recipe.Check, p Plan) api.CheckResult {
	r, err := ParseGPUBurn(out)
	if err != nil {
		return api.CheckResult{Detail: err.Error()}
	}
	var bad []string
	lowest := -1.0
	for _, g := range r.GPUs {
		rate := g.MaxGflopsPerSec * 1e9
		if lowest < 0 || rate < lowest {
			lowest = rate
		}
		switch {
		case !g.OK:
			bad = append(bad, fmt.Sprintf("GPU %d FAULTY (%d errors)", g.Index, g.MaxErrors))
		case g.Died:
			bad = append(bad, fmt.Sprintf("GPU %d died", g.Index))
		case !c.Min.IsZero() && rate < c.Min.Value:
			bad = append(bad, fmt.Sprintf("GPU %d %s, want at least %s", g.Index, show(rate, recipe.UnitFlops), c.Min))
		}
	}
	if p.GPUs > 0 && len(r.GPUs) < p.GPUs {
		bad = append(bad, fmt.Sprintf("gpu-burn tested %d GPUs, the recipe has %d", len(r.GPUs), p.GPUs))
	}
	res := api.CheckResult{Value: max(lowest, 0), Metrics: map[string]float64{"gpus": float64(len(r.GPUs))}}
	if len(bad) > 0 {
		res.Detail = "gpu-burn: " + strings.Join(bad, "; ")
		return res
	}
	res.OK, res.Detail = true, fmt.Sprintf("gpu-burn: %d GPUs OK, slowest %s", len(r.GPUs), show(res.Value, recipe.UnitFlops))
	return res
}

func ncclArgv(c recipe.Check, p Plan) [][]string {
	size := c.Args["size"]
	if size == "" {
		size = "8GiB"
	}
	end := "8G"
	if s, err := recipe.ParseSize(size); err == nil {
		end = strconv.FormatInt(s.Bytes(), 10)
	}
	gpus := p.GPUs
	if gpus <= 0 {
		gpus = 1
	}
	return [][]string{{"-b", "1G", "-e", end, "-f", "2", "-g", strconv.Itoa(gpus)}}
}

// judgeNCCL: no wrong values, and the best bus bandwidth at messages of
// 1 GiB or more is at least min.
func judgeNCCL(out []byte, c recipe.Check, _ Plan) api.CheckResult {
	r, err := ParseNCCL(out)
	if err != nil {
		return api.CheckResult{Detail: err.Error()}
	}
	bw := r.MaxBusBW(1 << 30)
	res := api.CheckResult{Value: bw, Metrics: map[string]float64{"avg_bus_bw_bytes_per_s": r.AvgBusBWBytesPerSec}}
	q := show(bw, recipe.UnitBytesPerSecond)
	switch {
	case bw == 0:
		res.Detail = "all_reduce_perf: no message of 1 GiB or more was measured"
	case r.OutOfBounds > 0 || !r.Passed():
		res.Detail = fmt.Sprintf("all_reduce_perf: %d wrong values (data corruption)", r.OutOfBounds)
	case !c.Min.IsZero() && bw < c.Min.Value:
		res.Detail = fmt.Sprintf("all_reduce_perf: bus bandwidth %s at >= 1 GiB, want at least %s", q, c.Min)
	default:
		res.OK, res.Detail = true, fmt.Sprintf("all_reduce_perf: bus bandwidth %s at >= 1 GiB", q)
	}
	return res
}

func nvbwTestcase(c recipe.Check) string {
	if t := c.Args["testcase"]; t != "" {
		return t
	}
	return "device_to_device_memcpy_read_ce"
}

func nvbwArgv(c recipe.Check, _ Plan) [][]string {
	return [][]string{{"-t", nvbwTestcase(c)}}
}

func judgeNVBandwidth(out []byte, c recipe.Check, _ Plan) api.CheckResult {
	r, err := ParseNVBandwidth(out)
	if err != nil {
		return api.CheckResult{Detail: err.Error()}
	}
	tc := nvbwTestcase(c)
	m, ok := r.Matrix(tc)
	if !ok {
		return api.CheckResult{Detail: fmt.Sprintf("nvbandwidth: no result for testcase %s", tc)}
	}
	q := show(m.SumBytesPerSec, recipe.UnitBytesPerSecond)
	res := api.CheckResult{Value: m.SumBytesPerSec}
	if !c.Min.IsZero() && m.SumBytesPerSec < c.Min.Value {
		res.Detail = fmt.Sprintf("nvbandwidth %s: SUM %s, want at least %s", tc, q, c.Min)
		return res
	}
	res.OK, res.Detail = true, fmt.Sprintf("nvbandwidth %s: SUM %s", tc, q)
	return res
}

func stressArgv(_ recipe.Check, p Plan) [][]string {
	return [][]string{{"--cpu", "0", "--vm", "2", "--vm-bytes", "75%", "--timeout", seconds(p.BurnIn, 60) + "s", "--metrics-brief"}}
}

func judgeStressNG(out []byte, _ recipe.Check, _ Plan) api.CheckResult {
	r, err := ParseStressNG(out)
	if err != nil {
		return api.CheckResult{Detail: err.Error()}
	}
	var names []string
	for _, s := range r.Stressors {
		names = append(names, fmt.Sprintf("%s %.0f bogo ops/s", s.Name, s.OpsPerSec))
	}
	res := api.CheckResult{Value: float64(len(r.Stressors)), Detail: "stress-ng: " + strings.Join(names, ", ")}
	if !r.Passed() {
		res.Detail = fmt.Sprintf("stress-ng failed: %d failed instances, failures %q; %s", r.FailedInstances, r.Failures, strings.Join(names, ", "))
		return res
	}
	res.OK = true
	return res
}

// fioArgv reads each data disk sequentially with direct I/O for the
// burn-in duration, at most a minute a disk: --readonly keeps fio from
// writing even by mistake.
func fioArgv(_ recipe.Check, p Plan) [][]string {
	b := p.BurnIn
	if b.Duration.D() <= 0 || b.Duration.D() > time.Minute {
		b.Duration = recipe.Duration(time.Minute)
	}
	var runs [][]string
	for _, d := range p.DataDisks {
		runs = append(runs, []string{"--name=ingot-burn-in", "--filename=" + d, "--readonly", "--rw=read", "--bs=1M",
			"--direct=1", "--ioengine=libaio", "--iodepth=32", "--runtime=" + seconds(b, 60), "--time_based", "--output-format=json"})
	}
	return runs
}

func judgeFio(out []byte, c recipe.Check, _ Plan) api.CheckResult {
	r, err := ParseFio(out)
	if err != nil {
		return api.CheckResult{Detail: err.Error()}
	}
	if !r.Passed() {
		return api.CheckResult{Detail: "fio: a job failed"}
	}
	j := r.Jobs[0]
	io, dir := j.Read, "read"
	if io.IOBytes == 0 && j.Write.IOBytes > 0 {
		io, dir = j.Write, "write"
	}
	q := show(io.BytesPerSec, recipe.UnitBytesPerSecond)
	res := api.CheckResult{Value: io.BytesPerSec, Metrics: map[string]float64{"iops": io.IOPS}}
	if !c.Min.IsZero() && io.BytesPerSec < c.Min.Value {
		res.Detail = fmt.Sprintf("fio %s: %s %s, want at least %s", j.Name, dir, q, c.Min)
		return res
	}
	res.OK, res.Detail = true, fmt.Sprintf("fio %s: %s %s", j.Name, dir, q)
	return res
}
