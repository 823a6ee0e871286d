package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolGPUBurn = "gpu-burn"

var (
	// One entry of each progress segment, anchored at the segment's start;
	// what follows the last entry (stderr glued to the "\r" line) is not read.
	gbProcRe   = regexp.MustCompile(`^\s*(-?\d+) \(([^ ()]+) Gflop/s\)\s*(?:-\s*)?`)
	gbErrRe    = regexp.MustCompile(`^\s*(-?\d+)(?:\s+\((WARNING|DIED)!\))?\s*(?:-\s*)?`)
	gbTempRe   = regexp.MustCompile(`^\s*(?:(-?\d+) C|--)\s*(?:-\s*)?`)
	gbPowerRe  = regexp.MustCompile(`^\s*(?:(\d+) W|--)\s*(?:-\s*)?`)
	gbTestedRe = regexp.MustCompile(`^Tested (\d+) GPUs:$`)
	gbGPURe    = regexp.MustCompile(`^GPU (\d+): (.*)$`)
)

// GPUBurnResult is a finished gpu-burn run.
type GPUBurnResult struct {
	GPUs        []GPUBurnGPU // by index, as listed under "Tested N GPUs:"
	Doubles     bool         // "using DOUBLES" (-d): Gflop/s are FP64 GEMM rates
	TensorCores bool         // "using Tensor Cores" (-tc): Gflop/s are tensor-core GEMM rates
}

// GPUBurnGPU is one GPU of a gpu-burn run. The rates are GEMM throughput in
// Gflop/s (1e9 floating point operations per second) as gpu-burn prints them:
// FP32 by default, FP64 with -d, tensor-core with -tc; compare only like with
// like. Errors, temperatures and power come from the progress lines.
type GPUBurnGPU struct {
	Index int
	OK    bool // "OK" (true) or "FAULTY" in the final block
	Died  bool // a progress line marked it "(DIED!)" or reported -1 processed
	// Iterations is the last "proc'd" count: GEMMs completed. 0 means the GPU
	// never reported work, which gpu-burn still calls OK.
	Iterations int64
	// LastGflopsPerSec is the rate on the last progress line; it can be a
	// short, noisy window. MaxGflopsPerSec is the best rate seen, the figure
	// to hold against a per-model floor.
	LastGflopsPerSec float64
	MaxGflopsPerSec  float64
	// MaxErrors is the largest error count on any progress line. gpu-burn
	// resets its counters after each "Summary at:" line, so this is a lower
	// bound of the total; any non-zero value makes the GPU FAULTY.
	MaxErrors int64
	// OverflowedErrors is the most negative error count printed: gpu-burn
	// keeps the count in a C int, which wraps past 2^31-1 errors. 0 when no
	// count was negative. A negative count is errors, never none.
	OverflowedErrors int64 `json:",omitempty"`
	TempCelsius      int   // last temperature printed; 0 when never printed ("--")
	MaxTempCelsius   int
	MaxPowerWatts    int // 0 when never printed (gpu-burn before 2023 prints no power)
}

// Passed reports whether every GPU is OK, alive and did work.
func (r GPUBurnResult) Passed() bool {
	for _, g := range r.GPUs {
		if !g.OK || g.Died || g.Iterations <= 0 {
			return false
		}
	}
	return len(r.GPUs) > 0
}

// gbParser holds the state of one ParseGPUBurn call.
type gbParser struct {
	res      GPUBurnResult
	progress []GPUBurnGPU // per index, from progress lines
	tested   int          // N of "Tested N GPUs:", -1 before it
}

// ParseGPUBurn parses the combined stdout and stderr of gpu-burn. gpu-burn
// always exits 0, so the verdict comes from the final "Tested N GPUs:"
// block; without it the run did not finish and the error wraps
// ErrIncomplete.
func ParseGPUBurn(data []byte) (GPUBurnResult, error) {
	res, err := parseGPUBurn(data)
	if err != nil {
		return GPUBurnResult{}, cutLastLine(data, err)
	}
	return res, nil
}

// parseGPUBurn returns, with an error, what the progress lines showed: a
// run that died before its verdict still shows which GPU died or erred.
func parseGPUBurn(data []byte) (GPUBurnResult, error) {
	p := gbParser{tested: -1}
	for i, line := range splitLines(data) {
		// Progress lines overwrite each other with "\r" on one terminal line.
		for _, rec := range strings.Split(line, "\r") {
			if err := p.record(i+1, strings.TrimSpace(rec)); err != nil {
				return p.partial(), err
			}
		}
	}
	res, err := p.finish()
	if err != nil {
		return p.partial(), err
	}
	return res, nil
}

// partial is what the progress lines say of each GPU, without gpu-burn's
// verdict: OK where it neither died nor counted an error.
func (p *gbParser) partial() GPUBurnResult {
	res := GPUBurnResult{Doubles: p.res.Doubles, TensorCores: p.res.TensorCores}
	for i, g := range p.progress {
		g.Index, g.OK = i, !g.Died && g.MaxErrors == 0 && g.OverflowedErrors == 0
		res.GPUs = append(res.GPUs, g)
	}
	return res
}

func (p *gbParser) record(n int, rec string) error {
	switch {
	case strings.Contains(rec, "proc'd:"):
		return p.progressLine(n, rec)
	case strings.HasPrefix(rec, "Initialized device"):
		p.res.Doubles = p.res.Doubles || strings.Contains(rec, "using DOUBLES")
		p.res.TensorCores = p.res.TensorCores || strings.Contains(rec, "using Tensor Cores")
	case gbTestedRe.MatchString(rec):
		if p.tested >= 0 {
			return lineErr(toolGPUBurn, n, rec, "a second \"Tested N GPUs:\" block")
		}
		v, err := strconv.Atoi(gbTestedRe.FindStringSubmatch(rec)[1])
		if err != nil {
			return lineErr(toolGPUBurn, n, rec, "GPU count out of range")
		}
		p.tested = v
	case p.tested >= 0 && gbGPURe.MatchString(rec):
		return p.verdict(n, rec)
	}
	return nil
}

// verdict parses "GPU i: OK" or "GPU i: FAULTY" under "Tested N GPUs:".
func (p *gbParser) verdict(n int, rec string) error {
	m := gbGPURe.FindStringSubmatch(rec)
	idx, err := strconv.Atoi(m[1])
	if err != nil || idx != len(p.res.GPUs) || idx >= p.tested {
		return lineErr(toolGPUBurn, n, rec, "expected GPU %d of %d", len(p.res.GPUs), p.tested)
	}
	if m[2] != "OK" && m[2] != "FAULTY" {
		return lineErr(toolGPUBurn, n, rec, "expected OK or FAULTY")
	}
	p.res.GPUs = append(p.res.GPUs, GPUBurnGPU{Index: idx, OK: m[2] == "OK"})
	return nil
}

// progressLine parses "12.3%  proc'd: A (X Gflop/s) - ...  errors: E - ...
// temps: T C - ...  power: W W - ...". Each segment holds one entry per
// GPU; text after the last entry is not gpu-burn's and is skipped.
func (p *gbParser) progressLine(n int, rec string) error {
	proc, errs, temps, power := gbSegments(rec)
	procs := gbEntries(gbProcRe, proc, -1)
	if len(procs) == 0 {
		return lineErr(toolGPUBurn, n, rec, "expected \"N (X Gflop/s)\" after proc'd:")
	}
	errMs := gbEntries(gbErrRe, errs, len(procs))
	tempMs := gbEntries(gbTempRe, temps, len(procs))
	powMs := gbEntries(gbPowerRe, power, len(procs))
	if len(errMs) != len(procs) || len(tempMs) != len(procs) || (power != "" && len(powMs) != len(procs)) {
		return lineErr(toolGPUBurn, n, rec, "expected %d entries each for errors, temps and power", len(procs))
	}
	if len(p.progress) != 0 && len(p.progress) != len(procs) {
		return lineErr(toolGPUBurn, n, rec, "GPU count changed from %d to %d", len(p.progress), len(procs))
	}
	if len(p.progress) == 0 {
		p.progress = make([]GPUBurnGPU, len(procs))
	}
	for i := range procs {
		if err := p.progress[i].update(procs[i], errMs[i], tempMs[i]); err != nil {
			return lineErr(toolGPUBurn, n, rec, "GPU %d: %v", i, err)
		}
		if len(powMs) > 0 {
			p.progress[i].MaxPowerWatts = max(p.progress[i].MaxPowerWatts, atoiOr0(powMs[i][1]))
		}
	}
	return nil
}

// gbEntries reads up to n entries (n < 0: all) of re from the start of
// seg, each right after the previous one.
func gbEntries(re *regexp.Regexp, seg string, n int) [][]string {
	var out [][]string
	for n < 0 || len(out) < n {
		m := re.FindStringSubmatch(seg)
		if m == nil || m[0] == "" {
			break
		}
		out = append(out, m)
		seg = seg[len(m[0]):]
	}
	return out
}

// gbSegments cuts a progress line at its labels.
func gbSegments(rec string) (proc, errs, temps, power string) {
	rest := rec[strings.Index(rec, "proc'd:")+len("proc'd:"):]
	proc, rest, _ = strings.Cut(rest, "errors:")
	errs, rest, _ = strings.Cut(rest, "temps:")
	temps, power, _ = strings.Cut(rest, "power:")
	return proc, errs, temps, power
}

// update folds one progress entry (proc'd, errors, temps) into g.
func (g *GPUBurnGPU) update(proc, errM, tempM []string) error {
	iters, err := strconv.ParseInt(proc[1], 10, 64)
	if err != nil {
		return err
	}
	errCount, err := strconv.ParseInt(errM[1], 10, 64)
	if err != nil {
		return err
	}
	g.Iterations = iters
	g.Died = g.Died || iters < 0 || errM[2] == "DIED"
	if errCount < 0 {
		g.OverflowedErrors = min(g.OverflowedErrors, errCount)
	}
	g.MaxErrors = max(g.MaxErrors, errCount)
	// An interval of zero length prints "inf"; keep such rates out.
	if rate, err := parseFinite(proc[2]); err == nil {
		g.LastGflopsPerSec = rate
		g.MaxGflopsPerSec = max(g.MaxGflopsPerSec, rate)
	}
	if tempM[1] != "" {
		g.TempCelsius = atoiOr0(tempM[1])
		g.MaxTempCelsius = max(g.MaxTempCelsius, g.TempCelsius)
	}
	return nil
}

func (p *gbParser) finish() (GPUBurnResult, error) {
	if p.tested < 0 {
		return GPUBurnResult{}, incomplete(toolGPUBurn, "no \"Tested N GPUs:\" block")
	}
	if len(p.res.GPUs) != p.tested {
		return GPUBurnResult{}, incomplete(toolGPUBurn, "\"Tested %d GPUs:\" lists %d", p.tested, len(p.res.GPUs))
	}
	if len(p.progress) != 0 && len(p.progress) != p.tested {
		return GPUBurnResult{}, &ParseError{Tool: toolGPUBurn, Msg: "progress lines cover a different number of GPUs than the final block"}
	}
	for i, g := range p.progress {
		g.Index, g.OK = i, p.res.GPUs[i].OK
		p.res.GPUs[i] = g
	}
	return p.res, nil
}

// atoiOr0 parses a decimal the regexps already checked, saturating to 0.
func atoiOr0(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return v
}
