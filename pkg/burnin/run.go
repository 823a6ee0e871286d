package burnin

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Plan is what the agent writes into the installed system
// (api.BurnInPlanPath) for its first-boot service: the recipe's burn-in
// checks with their thresholds and what the node should have.
type Plan struct {
	Checks    []recipe.Check `json:"checks"`
	BurnIn    recipe.BurnIn  `json:"burn_in"`
	GPUs      int            `json:"gpus,omitempty"`       // GPUs the recipe expects (hardware.gpus)
	DataDisks []string       `json:"data_disks,omitempty"` // /dev paths fio reads (never writes)
}

// Exec runs a program and returns what it printed (stdout and stderr).
type Exec func(ctx context.Context, name string, args ...string) ([]byte, error)

// Runner runs a Plan's checks with the tools installed on the node and
// judges each against its recipe thresholds. A tool that is not installed
// is a skipped check ("dcgmi not found in the installed system"), which the
// engine fails unless the recipe marks the check optional.
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
	judge func(out []byte, c recipe.Check, p Plan) api.CheckResult
	// serve and connect are a two-node test's two sides.
	serve   func(c recipe.Check, secs string) []string
	connect func(c recipe.Check, secs, addr string) []string
}

var tools = map[string]tool{
	"dcgm-diag":      {bin: "dcgmi", gpu: true, argv: dcgmArgv, judge: judgeDCGM},
	"gpu-burn":       {bin: "gpu_burn", gpu: true, argv: gpuBurnArgv, judge: judgeGPUBurn, lasts: lastsFor(600 * time.Second)},
	"nccl-allreduce": {bin: "all_reduce_perf", gpu: true, argv: ncclArgv, judge: judgeNCCL},
	"nvbandwidth":    {bin: "nvbandwidth", gpu: true, argv: nvbwArgv, judge: judgeNVBandwidth},
	"stress-ng":      {bin: "stress-ng", argv: stressArgv, judge: judgeStressNG, lasts: lastsFor(60 * time.Second)},
	"fio":            {bin: "fio", argv: fioArgv, judge: judgeFio, lasts: fioLasts},
	"iperf3": {bin: "iperf3", peer: "it needs a partner node, paired by ingot", judge: judgeIperf3,
		serve: iperf3Serve, connect: iperf3Connect},
	"ib-write-bw": {bin: "ib_write_bw", peer: "it needs a partner node, paired by ingot", judge: judgeIBWriteBW,
		serve: ibServe, connect: ibConnect},
}

// Run runs every check of the plan in order, within the burn-in's deadline.
func (r *Runner) Run(ctx context.Context, p Plan) []api.CheckResult {
	ctx, cancel := context.WithTimeout(ctx, p.BurnIn.Deadline().D())
	defer cancel()
	out := make([]api.CheckResult, 0, len(p.Checks))
	for _, c := range p.Checks {
		r.logf("burn-in %s: starting", c.Name)
		res := r.one(ctx, c, p)
		res.Name = c.Name
		r.logf("burn-in %s: ok=%v skipped=%v value=%g: %s", c.Name, res.OK, res.Skipped, res.Value, res.Detail)
		out = append(out, res)
	}
	return out
}

func (r *Runner) one(ctx context.Context, c recipe.Check, p Plan) api.CheckResult {
	t, ok := tools[c.Name]
	if !ok {
		return api.CheckResult{Skipped: true, Detail: fmt.Sprintf("ingot's burn-in has no runner for %q", c.Name)}
	}
	if t.peer != "" && r.Pair == nil {
		return api.CheckResult{Skipped: true, Detail: fmt.Sprintf("%s did not run: %s, and this run cannot ask ingot", t.bin, t.peer)}
	}
	path, err := r.lookPath(t.bin)
	if err != nil {
		return api.CheckResult{Skipped: true, Detail: t.bin + " not found in the installed system"}
	}
	if t.peer != "" {
		return r.fabric(ctx, c, p, t, path)
	}
	runs := t.argv(c, p)
	if c.Name == "stress-ng" && r.StressMem != "" {
		for _, argv := range runs {
			for i := range argv {
				if i > 0 && argv[i-1] == "--vm-bytes" {
					argv[i] = r.StressMem
				}
			}
		}
	}
	if len(runs) == 0 {
		return api.CheckResult{Skipped: true, Detail: t.bin + " has nothing to run on: " + nothingFor(c.Name)}
	}
	var s *sampler
	if t.gpu {
		s = r.startSampler(ctx)
	}
	var outs [][]byte
	var runErr, hung error
	for _, argv := range runs {
		o, err := r.run(ctx, t, p, path, argv)
		outs = append(outs, o)
		if errors.Is(err, errHung) && hung == nil {
			hung = err
		}
		if err != nil && runErr == nil {
			runErr = fmt.Errorf("%s %s: %w", t.bin, strings.Join(argv, " "), err)
		}
	}
	res := api.CheckResult{OK: true}
	for _, o := range outs {
		one := t.judge(o, c, p)
		res = merge(res, one)
	}
	if hung != nil {
		res.OK, res.Detail = false, hung.Error()
	}
	if ctx.Err() != nil {
		res.OK, res.Detail = false, fmt.Sprintf("burn-in deadline (%s) passed: %s", p.BurnIn.Deadline(), res.Detail)
	} else if !res.OK && runErr != nil && !strings.Contains(res.Detail, runErr.Error()) {
		res.Detail += " (" + runErr.Error() + ")"
	}
	if s != nil {
		r.finishSampler(ctx, s, &res, p.BurnIn)
	}
	return res
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
	limit := runLimit(d)
	if r.RunLimit != nil {
		limit = r.RunLimit(d)
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	out, err := r.exec()(rctx, path, argv...)
	if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return out, fmt.Errorf("%w: %s %s did not finish within %s (it runs for %s) and was killed", errHung, t.bin, strings.Join(argv, " "), limit, d)
	}
	return out, err
}

// merge folds the verdict of one run (one disk) into the check's.
func merge(acc, one api.CheckResult) api.CheckResult {
	if acc.Detail == "" {
		acc.Value, acc.Metrics = one.Value, one.Metrics
	} else if one.Value < acc.Value {
		acc.Value = one.Value // the weakest disk sets the check's number
	}
	acc.OK = acc.OK && one.OK
	acc.Detail = strings.TrimPrefix(acc.Detail+"; "+one.Detail, "; ")
	return acc
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

// sampler reads nvidia-smi every Every while a GPU load runs.
type sampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	sum  Summary
	errs []string
	xids int // XID events in the kernel log before the load
}

// nvidiaSMIQuery is the sampling query ParseGPUSamples reads.
var nvidiaSMIQuery = []string{"--query-gpu=index,pci.bus_id,temperature.gpu,power.draw,clocks_throttle_reasons.active", "--format=csv,noheader,nounits"}

func (r *Runner) startSampler(ctx context.Context) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.xids = len(r.xids(ctx).Events)
	every := r.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			r.sampleOnce(ctx, s)
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (r *Runner) sampleOnce(ctx context.Context, s *sampler) {
	out, err := r.exec()(ctx, "nvidia-smi", nvidiaSMIQuery...)
	if err != nil && len(out) == 0 {
		s.mu.Lock()
		s.errs = append(s.errs, err.Error())
		s.mu.Unlock()
		return
	}
	samples, perr := ParseGPUSamples(out)
	s.mu.Lock()
	defer s.mu.Unlock()
	if perr != nil {
		s.errs = append(s.errs, perr.Error())
		return
	}
	s.sum.AddSamples(samples)
}

// xids reads the kernel log's NVIDIA Xid events (none when dmesg cannot
// be read: the sampler then says so).
func (r *Runner) xids(ctx context.Context) XIDLog {
	out, err := r.exec()(ctx, "dmesg")
	if err != nil {
		return XIDLog{}
	}
	log, _ := ParseXIDs(out)
	return log
}

// finishSampler stops sampling and holds the load's numbers against the
// burn-in limits: the hottest GPU against max_gpu_temp_c, the Xid errors
// the load caused against max_xid_errors, a GPU lost from nvidia-smi.
func (r *Runner) finishSampler(ctx context.Context, s *sampler, res *api.CheckResult, b recipe.BurnIn) {
	close(s.stop)
	<-s.done
	log := r.xids(ctx)
	newXIDs := len(log.Events) - s.xids
	if newXIDs < 0 {
		newXIDs = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if res.Metrics == nil {
		res.Metrics = map[string]float64{}
	}
	var maxT, maxW float64
	var bad []string
	for _, g := range s.sum.GPUs() {
		maxT, maxW = max(maxT, g.MaxTempCelsius), max(maxW, g.MaxPowerWatts)
		if b.MaxGPUTempC > 0 && g.MaxTempCelsius > float64(b.MaxGPUTempC) {
			bad = append(bad, fmt.Sprintf("GPU %s reached %g C (max_gpu_temp_c %d)", g.PCI, g.MaxTempCelsius, b.MaxGPUTempC))
		}
		if g.Lost {
			bad = append(bad, fmt.Sprintf("GPU %s fell off nvidia-smi during the load", g.PCI))
		}
	}
	res.Metrics["max_gpu_temp_c"], res.Metrics["max_gpu_power_w"], res.Metrics["xid_errors"] = maxT, maxW, float64(newXIDs)
	res.Metrics["gpus_sampled"] = float64(len(s.sum.GPUs()))
	if newXIDs > b.MaxXidErrors {
		codes := []string{}
		for _, e := range log.Events[len(log.Events)-newXIDs:] {
			codes = append(codes, strconv.Itoa(e.Code)+"@"+e.PCI)
		}
		bad = append(bad, fmt.Sprintf("%d Xid errors during the load (max_xid_errors %d): %s", newXIDs, b.MaxXidErrors, strings.Join(codes, ", ")))
	}
	if len(s.sum.GPUs()) == 0 {
		why := "no nvidia-smi samples"
		if len(s.errs) > 0 {
			why += ": " + s.errs[0]
		}
		bad = append(bad, why+" (temperature and power unmeasured)")
	}
	if len(bad) > 0 {
		res.OK = false
		res.Detail = strings.TrimPrefix(res.Detail+"; "+strings.Join(bad, "; "), "; ")
	}
}
