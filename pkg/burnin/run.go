package burnin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Plan is what the agent writes into the installed system
// (api.BurnInPlanPath) for its first-boot service: the recipe's burn-in
// checks with their thresholds and what the node should have.
type Plan struct {
	Checks    []recipe.Check `json:"checks"`
	BurnIn    recipe.BurnIn  `json:"burn_in"`
	GPUs      int            `json:"gpus,omitempty"`       // GPUs the node has: the recipe's hardware.gpus, or more where the agent found more
	DataDisks []string       `json:"data_disks,omitempty"` // /dev paths fio reads (never writes)
}

// Exec runs a program and returns what it printed (stdout and stderr).
type Exec func(ctx context.Context, name string, args ...string) ([]byte, error)

// Runner runs a Plan's checks with the tools installed on the node and
// judges each against its recipe thresholds (pkg/burnin/judge). A tool
// that is not installed could not run ("dcgmi not found in the installed
// system": Skipped), which the engine fails unless the recipe marks the
// check optional.
type Runner struct {
	LookPath func(string) (string, error) // default exec.LookPath
	Exec     Exec                         // default: os/exec, combined output
	// Every is how often GPUs are sampled (nvidia-smi) while a GPU load
	// runs; default 10 s.
	Every time.Duration
	Logf  func(format string, args ...any) // progress for the console; may be nil
	// StressMem is stress-ng's --vm-bytes (default 75%: most of memory,
	// leaving the OS room); tests set a few MiB.
	StressMem string
	// Pair asks ingot for a fabric test's partner node (nil: the two-node
	// tests are skipped); PairWait bounds the wait for one (default 10m),
	// PairEvery how often it asks (default 5s).
	Pair      Pairer
	PairWait  time.Duration
	PairEvery time.Duration
	// RunLimit overrides runLimit (tests).
	RunLimit func(d time.Duration) time.Duration
	// PeerMem reports whether GPUDirect RDMA is loaded (default: the
	// nvidia_peermem module is in /sys/module).
	PeerMem func() bool
}

// tool runs one check.
type tool struct {
	bin  string
	gpu  bool   // sample GPUs while it runs
	peer string // non-empty: a two-node test (serve, connect); why it cannot run alone
	argv func(c recipe.Check, p Plan) [][]string
	// lasts is how long one run is meant to take (its --timeout or
	// runtime); nil: not known (dcgmi, nccl-tests), bounded only by the
	// burn-in's deadline. A run that takes much longer hung (runLimit).
	lasts func(p Plan) time.Duration
	// evidence reads the output of every run, one after the other.
	evidence func(out []byte, c recipe.Check) api.Evidence
	// parallel: the runs (one per GPU) run at once; repeat: each is run
	// again until the burn-in duration has passed (a short test made a
	// burn).
	parallel, repeat bool
	// serve and connect are a two-node test's two sides.
	serve   func(c recipe.Check, secs string) []string
	connect func(c recipe.Check, secs, addr string) []string
}

var tools = map[string]tool{
	"dcgm-diag":      {bin: "dcgmi", gpu: true, argv: dcgmArgv, evidence: dcgmEvidence},
	"gpu-burn":       {bin: "gpu_burn", gpu: true, argv: gpuBurnArgv, evidence: gpuBurnEvidence, lasts: lastsFor(600 * time.Second)},
	"nccl-allreduce": {bin: "all_reduce_perf", gpu: true, argv: ncclArgv, evidence: ncclEvidence},
	"nvbandwidth":    {bin: "nvbandwidth", gpu: true, argv: nvbwArgv, evidence: nvbandwidthEvidence},
	"cuda-bandwidth": {bin: "bandwidthTest", gpu: true, argv: cudaBandwidthArgv, evidence: cudaBandwidthEvidence},
	"cuda-p2p":       {bin: "p2pBandwidthLatencyTest", gpu: true, argv: p2pArgv, evidence: p2pEvidence},
	"cublas-gemm": {bin: "matrixMulCUBLAS", gpu: true, argv: cublasArgv, evidence: cublasEvidence,
		lasts: lastsFor(600 * time.Second), parallel: true, repeat: true},
	"clpeak":    {bin: "clpeak", gpu: true, argv: clpeakArgv, evidence: clpeakEvidence},
	"stress-ng": {bin: "stress-ng", argv: stressArgv, evidence: stressNGEvidence, lasts: lastsFor(60 * time.Second)},
	"fio":       {bin: "fio", argv: fioArgv, evidence: fioEvidence, lasts: fioLasts},
	"iperf3": {bin: "iperf3", peer: "it needs a partner node, paired by ingot", evidence: iperf3Evidence,
		serve: iperf3Serve, connect: iperf3Connect},
	"ib-write-bw": {bin: "ib_write_bw", peer: "it needs a partner node, paired by ingot", evidence: ibWriteBWEvidence,
		serve: ibServe, connect: ibConnect},
}

// Checks lists the burn-in checks the runner has a tool for.
func Checks() []string {
	var out []string
	for k := range tools {
		out = append(out, k)
	}
	return out
}

// Run runs every check of the plan in order, within the burn-in's deadline,
// and judges each (pkg/burnin/judge) against the plan's GPUs and disks.
func (r *Runner) Run(ctx context.Context, p Plan) []api.CheckResult {
	ctx, cancel := context.WithTimeout(ctx, p.BurnIn.Deadline().D())
	defer cancel()
	out := make([]api.CheckResult, 0, len(p.Checks))
	for _, c := range p.Checks {
		r.logf("burn-in %s: starting", c.Name)
		ev, metrics := r.one(ctx, c, p)
		res := api.CheckResult{Name: c.Name, Metrics: metrics}
		judge.Judge(c, p.BurnIn, ev, p.inventory()).Apply(&res, ev)
		r.logf("burn-in %s: %s value=%g: %s", c.Name, res.Verdict, res.Value, res.Detail)
		out = append(out, res)
	}
	return out
}

// inventory is what the plan says the node has, for the judge.
func (p Plan) inventory() judge.Inventory {
	return judge.Inventory{GPUs: p.GPUs, Disks: p.DataDisks}
}

// one runs check c and returns what it measured, and the other numbers
// of the load (temperature, power, Xids) for the job's record.
func (r *Runner) one(ctx context.Context, c recipe.Check, p Plan) (api.Evidence, map[string]float64) {
	t, ok := tools[c.Name]
	if !ok {
		return api.Evidence{Tool: c.Name, NotRun: fmt.Sprintf("ingot's burn-in has no runner for %q", c.Name)}, nil
	}
	if t.peer != "" && r.Pair == nil {
		return api.Evidence{Tool: t.bin, NotRun: fmt.Sprintf("%s did not run: %s, and this run cannot ask ingot", t.bin, t.peer)}, nil
	}
	path, err := r.lookPath(t.bin)
	if err != nil {
		return api.Evidence{Tool: t.bin, NotRun: "not found in the installed system"}, nil
	}
	if t.peer != "" {
		return r.fabric(ctx, c, p, t, path)
	}
	runs := t.argv(c, p)
	if c.Name == "stress-ng" && r.StressMem != "" {
		runs = withArg(runs, "--vm-bytes", r.StressMem)
	}
	if len(runs) == 0 {
		return api.Evidence{Tool: t.bin, NotRun: "nothing to run on: " + nothingFor(c.Name)}, nil
	}
	var s *sampler
	if t.gpu {
		s = r.startSampler(ctx)
	}
	outs, runErr, hung := r.runAll(ctx, t, p, path, runs)
	ev := Evidence(c, concat(outs))
	switch {
	case hung != nil:
		ev.Faults = append(ev.Faults, api.Fault{Subject: t.bin, Detail: hung.Error() + ": a hang of the tool or of the hardware under it"})
	case ctx.Err() != nil:
		ev.Faults = append(ev.Faults, api.Fault{Subject: t.bin, Detail: fmt.Sprintf("the burn-in deadline (%s) passed while it ran", p.BurnIn.Deadline())})
	case runErr != nil && (ev.NotRun != "" || len(ev.Values) == 0) && !strings.Contains(ev.NotRun, runErr.Error()):
		ev.NotRun = strings.TrimPrefix(ev.NotRun+" ("+runErr.Error()+")", " ")
	}
	var metrics map[string]float64
	if s != nil {
		ev.Load, metrics = r.finishSampler(ctx, s)
	}
	return ev, metrics
}

// withArg sets the value after flag in every run.
func withArg(runs [][]string, flag, value string) [][]string {
	for _, argv := range runs {
		for i := range argv {
			if i > 0 && argv[i-1] == flag {
				argv[i] = value
			}
		}
	}
	return runs
}

// runAll runs every argv of a tool, one after the other or all at once
// (tool.parallel), each repeated for the burn-in duration (tool.repeat).
// It returns each run's output, the first failed exit, and the first run
// that hung.
func (r *Runner) runAll(ctx context.Context, t tool, p Plan, path string, runs [][]string) ([][]byte, error, error) {
	outs := make([][]byte, len(runs))
	errs := make([]error, len(runs))
	one := func(i int) { outs[i], errs[i] = r.repeatRun(ctx, t, p, path, runs[i]) }
	if t.parallel {
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() { defer wg.Done(); one(i) }()
		}
		wg.Wait()
	} else {
		for i := range runs {
			one(i)
		}
	}
	var runErr, hung error
	for i, err := range errs {
		if errors.Is(err, errHung) && hung == nil {
			hung = err
		}
		if err != nil && runErr == nil {
			runErr = fmt.Errorf("%s %s: %w", t.bin, strings.Join(runs[i], " "), err)
		}
	}
	return outs, runErr, hung
}

// repeatRun runs argv once, or, for a repeating tool, again and again
// until the burn-in duration has passed or a run fails.
func (r *Runner) repeatRun(ctx context.Context, t tool, p Plan, path string, argv []string) ([]byte, error) {
	start := time.Now()
	var all [][]byte
	for {
		out, err := r.run(ctx, t, p, path, argv)
		all = append(all, out)
		if err != nil || !t.repeat || ctx.Err() != nil || time.Since(start) >= p.BurnIn.Duration.D() {
			return concat(all), err
		}
	}
}

// errHung marks a run that outlived its limit and was killed.
var errHung = errors.New("hung")

// lastsFor is a tool's run time: the burn-in duration, else fallback.
func lastsFor(fallback time.Duration) func(Plan) time.Duration {
	return func(p Plan) time.Duration {
		if d := p.BurnIn.Duration.D(); d > 0 {
			return d
		}
		return fallback
	}
}

// fioLasts: fio reads for the burn-in duration, at most a minute.
func fioLasts(p Plan) time.Duration { return capped(p.BurnIn, time.Minute).Duration.D() }

// runLimit is how long a run meant to last d may take before it counts as
// hung: twice d and at least two minutes more (a loaded node starts slowly).
func runLimit(d time.Duration) time.Duration { return 2*d + 2*time.Minute }

// run runs one argv of a tool, killed as hung past its runLimit, so a
// tool that never returns fails its own check instead of spending the
// whole burn-in's deadline.
func (r *Runner) run(ctx context.Context, t tool, p Plan, path string, argv []string) ([]byte, error) {
	if t.lasts == nil {
		return r.exec()(ctx, path, argv...)
	}
	d := t.lasts(p)
	limit := r.limit(d)
	out, err := r.runLimited(ctx, path, argv, limit)
	if errors.Is(err, errHung) {
		return out, fmt.Errorf("%w: %s %s did not finish within %s (it runs for %s) and was killed", errHung, t.bin, strings.Join(argv, " "), limit, d)
	}
	return out, err
}

// runLimited runs argv once; past limit it is killed and returns errHung
// (the caller says what the limit was for).
func (r *Runner) runLimited(ctx context.Context, path string, argv []string, limit time.Duration) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, err := r.exec()(rctx, path, argv...)
	if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return out, errHung
	}
	return out, err
}

func nothingFor(name string) string {
	if name == "fio" {
		return "the recipe's hardware has no data disks besides the boot disk"
	}
	return "no arguments"
}

func (r *Runner) lookPath(bin string) (string, error) {
	if r.LookPath != nil {
		return r.LookPath(bin)
	}
	return exec.LookPath(bin)
}

func (r *Runner) exec() Exec {
	if r.Exec != nil {
		return r.Exec
	}
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, name, args...).CombinedOutput()
	}
}

func (r *Runner) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
	}
}
