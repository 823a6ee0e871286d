package burnin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// fakeNode answers the runner's programs with fixture outputs, as the
// node's installed tools would. dmesg returns before the first call and
// after for the rest, so a load can "cause" Xid errors.
type fakeNode struct {
	t       *testing.T
	missing map[string]bool
	out     map[string]string // program -> fixture path under testdata
	after   string            // dmesg fixture once a load ran
	mu      sync.Mutex
	calls   []string
	dmesgs  int
}

func (f *fakeNode) lookPath(bin string) (string, error) {
	if f.missing[bin] {
		return "", errors.New("not found")
	}
	return "/usr/bin/" + bin, nil
}

func (f *fakeNode) exec(_ context.Context, name string, args ...string) ([]byte, error) {
	bin := name[strings.LastIndex(name, "/")+1:]
	f.mu.Lock()
	f.calls = append(f.calls, bin+" "+strings.Join(args, " "))
	fx := f.out[bin]
	if bin == "dmesg" {
		f.dmesgs++
		if f.dmesgs > 1 && f.after != "" {
			fx = f.after
		}
	}
	f.mu.Unlock()
	if fx == "" {
		return nil, errors.New(bin + ": no fixture")
	}
	return fixture(f.t, fx), nil
}

func passingNode(t *testing.T) *fakeNode {
	return &fakeNode{t: t, missing: map[string]bool{}, out: map[string]string{
		"dcgmi": "dcgm/pass_v4.json", "gpu_burn": "gpuburn/pass.txt", "all_reduce_perf": "nccl/pass.txt",
		"nvbandwidth": "nvbandwidth/pass.txt", "stress-ng": "stressng/pass.txt", "fio": "fio/pass.json",
		"nvidia-smi": "samples/pass.txt", "dmesg": "xid/pass.txt",
	}}
}

func mustQ(t *testing.T, s string) recipe.Quantity {
	q, err := recipe.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestRunnerVerdicts(t *testing.T) {
	plan := func(t *testing.T) Plan {
		return Plan{GPUs: 2, DataDisks: []string{"/dev/nvme1n1"}, BurnIn: recipe.BurnIn{Duration: recipe.Duration(time.Minute), MaxGPUTempC: 87},
			Checks: []recipe.Check{
				{Name: "dcgm-diag", Args: map[string]string{"level": "3"}},
				{Name: "gpu-burn", Min: mustQ(t, "200Tflop/s")},
				{Name: "nccl-allreduce", Min: mustQ(t, "400GB/s")},
				{Name: "nvbandwidth", Min: mustQ(t, "380GB/s")}, // per cell: every ordered GPU pair
				{Name: "stress-ng"},
				{Name: "fio", Min: mustQ(t, "100MB/s")}, // per disk and job: the randread job reads 104.7MB/s
				{Name: "iperf3", Min: mustQ(t, "375Gbps")},
			}}
	}
	cases := map[string]struct {
		edit func(*fakeNode, *Plan)
		want map[string]string // check -> "ok", "skipped: TEXT" or "fail: TEXT"
	}{
		"every tool passes": {func(*fakeNode, *Plan) {}, map[string]string{
			"dcgm-diag": "ok", "gpu-burn": "ok", "nccl-allreduce": "ok", "nvbandwidth": "ok", "stress-ng": "ok", "fio": "ok",
			"iperf3": "skipped: needs a partner node"}},
		"a tool missing did not run": {func(f *fakeNode, _ *Plan) { f.missing["dcgmi"] = true }, map[string]string{
			"dcgm-diag": "skipped: dcgmi: not found in the installed system"}},
		"a FAULTY gpu-burn line fails": {func(f *fakeNode, _ *Plan) { f.out["gpu_burn"] = "gpuburn/fail.txt" }, map[string]string{
			"gpu-burn": "fail: FAULTY"}},
		"bus bandwidth under threshold": {func(_ *fakeNode, p *Plan) { p.Checks[2].Min = mustQ(t, "460GB/s") }, map[string]string{
			"nccl-allreduce": "fail: want at least 460GB/s"}},
		"fewer GPUs than the recipe": {func(_ *fakeNode, p *Plan) { p.GPUs = 8 }, map[string]string{
			"gpu-burn": "fail: no result for GPU 2; GPU 3; GPU 4; GPU 5; GPU 6; GPU 7 (the node has 8 GPUs)"}},
		"too hot under load": {func(f *fakeNode, p *Plan) { p.BurnIn.MaxGPUTempC = 60 }, map[string]string{
			"gpu-burn": "fail: (max_gpu_temp_c 60)"}},
		"xid errors during the load": {func(f *fakeNode, _ *Plan) { f.after = "xid/fail.txt" }, map[string]string{
			"dcgm-diag": "fail: Xid errors during the load"}},
		"dcgm failure": {func(f *fakeNode, _ *Plan) { f.out["dcgmi"] = "dcgm/fail_v4.json" }, map[string]string{
			"dcgm-diag": "fail: GPU 2: diagnostic Warn: GPU 2 clocks were throttled"}},
		"truncated output could not run, naming the tool": {func(f *fakeNode, _ *Plan) { f.out["all_reduce_perf"] = "nccl/truncated.txt" }, map[string]string{
			"nccl-allreduce": "skipped: nccl: no \"Out of bounds values\" and \"Avg bus bandwidth\" summary: output ends early"}},
		"no data disks": {func(_ *fakeNode, p *Plan) { p.DataDisks = nil }, map[string]string{
			"fio": "skipped: no data disks"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f, p := passingNode(t), plan(t)
			c.edit(f, &p)
			r := Runner{LookPath: f.lookPath, Exec: f.exec, Every: time.Hour}
			got := map[string]api.CheckResult{}
			for _, res := range r.Run(context.Background(), p) {
				got[res.Name] = res
			}
			for check, want := range c.want {
				res, ok := got[check]
				if !ok {
					t.Fatalf("no result for %s", check)
				}
				kind, text, _ := strings.Cut(want, ": ")
				switch {
				case kind == "ok" && (!res.OK || res.Skipped):
					t.Errorf("%s: %+v, want ok", check, res)
				case kind == "skipped" && (!res.Skipped || res.OK || !strings.Contains(res.Detail, text)):
					t.Errorf("%s: %+v, want skipped saying %q", check, res, text)
				case kind == "fail" && (res.OK || res.Skipped || !strings.Contains(res.Detail, text)):
					t.Errorf("%s: %+v, want a failure saying %q", check, res, text)
				}
			}
		})
	}
}

// The numbers are kept, in the check's unit, with the load's temperatures
// and power.
func TestRunnerKeepsNumbers(t *testing.T) {
	f := passingNode(t)
	r := Runner{LookPath: f.lookPath, Exec: f.exec, Every: time.Hour}
	res := r.Run(context.Background(), Plan{GPUs: 2, BurnIn: recipe.BurnIn{Duration: recipe.Duration(90 * time.Second)},
		Checks: []recipe.Check{{Name: "gpu-burn"}, {Name: "nccl-allreduce"}}})
	burn, nccl := res[0], res[1]
	if burn.Value < 280e12 || burn.Value > 300e12 {
		t.Errorf("gpu-burn value %g flop/s, want the slowest GPU's best rate (~289 Tflop/s)", burn.Value)
	}
	if nccl.Value < 427e9 || nccl.Value > 428e9 {
		t.Errorf("nccl value %g bytes/s, want the best bus bandwidth at >= 1 GiB (427.61 GB/s)", nccl.Value)
	}
	if burn.Metrics["max_gpu_temp_c"] <= 0 || burn.Metrics["max_gpu_power_w"] <= 0 {
		t.Errorf("gpu-burn metrics %v: want the sampled temperature and power", burn.Metrics)
	}
	var sawBurn bool
	for _, c := range f.calls {
		if c == "gpu_burn 90" {
			sawBurn = true
		}
	}
	if !sawBurn {
		t.Errorf("calls %q: want gpu_burn run for the burn-in duration (90 s)", f.calls)
	}
}

// Two-node tests: the engine pairs; the first to ask listens, the second
// connects (retrying until its partner listens); no partner in time is a
// skipped check.
func TestRunnerFabric(t *testing.T) {
	q := func(s string) recipe.Quantity { return mustQ(t, s) }
	plan := Plan{BurnIn: recipe.BurnIn{Duration: recipe.Duration(30 * time.Second)},
		Checks: []recipe.Check{{Name: "iperf3", Min: q("1Gbps")}}}
	cases := map[string]struct {
		answers   []api.Peer // what ingot answers, in turn (the last repeats)
		failFirst int        // the first runs fail (the partner is not listening yet)
		refused   string     // fixture the failing runs print, exiting 0 (iperf3 3.12 -J); "": exit 1
		want      string     // "ok: ARGV-PART", "skipped: TEXT", "fail: TEXT"
	}{
		"first: waits, then listens": {answers: []api.Peer{{Role: "wait"}, {Role: "server", Address: "10.40.0.12"}}, want: "ok: -s -1 -J"},
		"second: connects, retrying": {answers: []api.Peer{{Role: "client", Address: "10.40.0.11"}}, failFirst: 2, want: "ok: -c 10.40.0.11 -J -t 30 -P 4"},
		"second: retries past iperf3 3.12's exit 0 on a refused connection": {answers: []api.Peer{{Role: "client", Address: "10.40.0.11"}},
			failFirst: 2, refused: "iperf3/refused_exit0.json", want: "ok: -c 10.40.0.11 -J -t 30 -P 4"},
		"no partner in time": {answers: []api.Peer{{Role: "wait"}}, want: "skipped: no other node of the recipe reached burn-in"},
		"below threshold":    {answers: []api.Peer{{Role: "client", Address: "10.40.0.11"}}, want: "fail: want at least 1Tbps"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := passingNode(t)
			f.out["iperf3"] = "iperf3/pass.json"
			var mu sync.Mutex
			asked, ran := 0, 0
			r := Runner{LookPath: f.lookPath, PairWait: 50 * time.Millisecond, PairEvery: 5 * time.Millisecond,
				Pair: func(_ context.Context, check, _ string) (api.Peer, error) {
					mu.Lock()
					defer mu.Unlock()
					a := c.answers[min(asked, len(c.answers)-1)]
					asked++
					return a, nil
				},
				Exec: func(ctx context.Context, name string, args ...string) ([]byte, error) {
					mu.Lock()
					ran++
					n := ran
					mu.Unlock()
					if n <= c.failFirst && c.refused != "" {
						return os.ReadFile(filepath.Join("testdata", c.refused))
					}
					if n <= c.failFirst {
						return []byte("iperf3: error - unable to connect to server"), errors.New("exit status 1")
					}
					return f.exec(ctx, name, args...)
				}}
			p := plan
			if strings.HasSuffix(c.want, "1Tbps") {
				p.Checks = []recipe.Check{{Name: "iperf3", Min: q("1Tbps")}}
			}
			res := r.Run(context.Background(), p)[0]
			kind, text, _ := strings.Cut(c.want, ": ")
			switch {
			case kind == "ok" && (!res.OK || !strings.Contains(strings.Join(f.calls, "|"), "iperf3 "+text)):
				t.Errorf("%+v (calls %q), want ok running iperf3 %s", res, f.calls, text)
			case kind == "skipped" && (!res.Skipped || !strings.Contains(res.Detail, text)):
				t.Errorf("%+v, want skipped saying %q", res, text)
			case kind == "fail" && (res.OK || res.Skipped || !strings.Contains(res.Detail, text)):
				t.Errorf("%+v, want a failure saying %q", res, text)
			}
		})
	}
}

// A fabric run that could not finish is run once more by both ends: a
// stall of either node (here the client's, past iperf 3.12's 40 s grace:
// real outputs in testdata/iperf3/*_peer_*.json) ends both runs. A second
// failure is the check's (not run: a required check fails the job); a
// server nobody connected to, or a client never accepted, is not run again.
func TestRunnerFabricAgain(t *testing.T) {
	const hang = "hang" // the run blocks until killed
	cases := map[string]struct {
		role string
		outs []string // what each run prints, in turn (the last repeats)
		runs int
		want string // "ok: TEXT" or "not run: TEXT", TEXT in the detail
	}{
		"server: its client stalled, both run again": {role: "server", outs: []string{"iperf3/server_peer_stalled.json", "iperf3/pass.json"}, runs: 2,
			want: "ok: second run (the first could not finish: iperf3: line 1940: error - select failed: Bad file descriptor"},
		"client: its server gave up, both run again": {role: "client", outs: []string{"iperf3/client_peer_closed.json", "iperf3/pass.json"}, runs: 2,
			want: "ok: second run (the first could not finish: iperf3: line 69: unable to write to stream socket: Broken pipe"},
		"client: a failed exit is run once more, not retried as refused": {role: "client", outs: []string{"exit 1: iperf3/client_peer_closed.json", "iperf3/pass.json"},
			runs: 2, want: "ok: second run (the first could not finish: iperf3: line 69: unable to write to stream socket: Broken pipe"},
		"twice: not run, naming both": {role: "server", outs: []string{"iperf3/server_peer_stalled.json"}, runs: 2,
			want: "not run: select failed: Bad file descriptor: the tool reported that the test could not run; the first run too: iperf3: line 1940"},
		"server: nobody connected, killed, not run again": {role: "server", outs: []string{hang}, runs: 1,
			want: "not run: killed after 50ms: no partner connected within it, or the run hung"},
		"client: never accepted, not run again": {role: "client", outs: []string{"iperf3/refused_exit0.json"}, runs: 10,
			want: "not run: the partner did not accept the connection"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := passingNode(t)
			var mu sync.Mutex
			ran := 0
			r := Runner{LookPath: f.lookPath, PairEvery: time.Millisecond,
				RunLimit: func(time.Duration) time.Duration { return 50 * time.Millisecond },
				Pair: func(context.Context, string, string) (api.Peer, error) {
					return api.Peer{Role: c.role, Address: "10.40.0.11"}, nil
				},
				Exec: func(ctx context.Context, _ string, _ ...string) ([]byte, error) {
					mu.Lock()
					out := c.outs[min(ran, len(c.outs)-1)]
					ran++
					mu.Unlock()
					if out == hang {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					if file, ok := strings.CutPrefix(out, "exit 1: "); ok {
						b, _ := os.ReadFile(filepath.Join("testdata", file))
						return b, errors.New("exit status 1")
					}
					return os.ReadFile(filepath.Join("testdata", out))
				}}
			p := Plan{BurnIn: recipe.BurnIn{Duration: recipe.Duration(10 * time.Second)},
				Checks: []recipe.Check{{Name: "iperf3", Min: mustQ(t, "1Gbps")}}}
			res := r.Run(context.Background(), p)[0]
			kind, text, _ := strings.Cut(c.want, ": ")
			if res.OK != (kind == "ok") || res.Skipped != (kind == "not run") || !strings.Contains(res.Detail, text) || ran != c.runs {
				t.Errorf("%+v after %d runs, want %s saying %q after %d", res, ran, kind, text, c.runs)
			}
		})
	}
}

// ib_write_bw uses GPU memory (GPUDirect RDMA) on a node with GPUs and
// nvidia_peermem loaded, unless the recipe names the GPU; host memory
// elsewhere.
func TestRunnerGPUDirect(t *testing.T) {
	cases := map[string]struct {
		gpus    int
		peermem bool
		args    map[string]string
		want    string // the flag ib_write_bw gets, "" for none
	}{
		"GPUs and peermem":       {gpus: 8, peermem: true, want: "--use_cuda=0"},
		"the recipe's GPU":       {gpus: 8, peermem: true, args: map[string]string{"cuda": "3"}, want: "--use_cuda=3"},
		"no peermem":             {gpus: 8, want: ""},
		"no GPUs":                {peermem: true, want: ""},
		"named GPU, no peermem ": {gpus: 8, args: map[string]string{"cuda": "1"}, want: "--use_cuda=1"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var argv []string
			r := Runner{LookPath: func(b string) (string, error) { return "/usr/bin/" + b, nil },
				PeerMem: func() bool { return c.peermem },
				Pair: func(context.Context, string, string) (api.Peer, error) {
					return api.Peer{Role: "client", Address: "10.40.0.11"}, nil
				},
				Exec: func(_ context.Context, _ string, args ...string) ([]byte, error) {
					argv = args
					return os.ReadFile("testdata/ibwritebw/pass.txt")
				}}
			p := Plan{GPUs: c.gpus, BurnIn: recipe.BurnIn{Duration: recipe.Duration(10 * time.Second)},
				Checks: []recipe.Check{{Name: "ib-write-bw", Args: c.args}}}
			r.Run(context.Background(), p)
			got := ""
			for _, a := range argv {
				if strings.HasPrefix(a, "--use_cuda") {
					got = a
				}
			}
			if got != c.want || argv[len(argv)-1] != "10.40.0.11" {
				t.Errorf("ib_write_bw %q: want %q and the peer last", argv, c.want)
			}
		})
	}
}

// A tool that never returns fails its own check, killed past its run
// limit; the burn-in goes on with the next check.
func TestRunnerHungTool(t *testing.T) {
	f := passingNode(t)
	r := Runner{LookPath: f.lookPath, RunLimit: func(time.Duration) time.Duration { return 50 * time.Millisecond },
		Exec: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			if filepath.Base(name) == "fio" {
				<-ctx.Done() // hangs until killed
				return nil, ctx.Err()
			}
			return f.exec(ctx, name, args...)
		}}
	p := Plan{BurnIn: recipe.BurnIn{Duration: recipe.Duration(10 * time.Second)}, DataDisks: []string{"/dev/nvme1n1"},
		Checks: []recipe.Check{{Name: "fio"}, {Name: "stress-ng"}}}
	res := r.Run(context.Background(), p)
	if res[0].OK || res[0].Skipped || !strings.Contains(res[0].Detail, "fio") || !strings.Contains(res[0].Detail, "did not finish within 50ms (it runs for 10s)") {
		t.Errorf("fio: %+v, want a failure saying it hung", res[0])
	}
	if !res[1].OK {
		t.Errorf("stress-ng after the hung fio: %+v, want it run and passed", res[1])
	}
}

// The Xid gate holds only on a kernel log it read: dmesg failing, or an Xid
// line printk interleaved with another, fails the check naming the cause
// and the line (the code before counted either as 0 Xids and passed).
func TestRunnerXidGate(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*fakeNode)
		want string
	}{
		"dmesg cannot be read": {func(f *fakeNode) { f.out["dmesg"] = "" }, "the kernel log could not be read (dmesg: dmesg: no fixture): Xid errors unknown"},
		"an interleaved Xid line after the load": {func(f *fakeNode) { f.after = "xid/interleaved.txt" },
			`after the load: kernel log line 2 is an Xid report ingot cannot read: "[ 2211.400112] NVRM: Xid (PCI:0000:3a[ 2211.400113] nvidia-nvlink: IBMNPU: link 7 down"`},
	} {
		t.Run(name, func(t *testing.T) {
			f := passingNode(t)
			c.edit(f)
			r := Runner{LookPath: f.lookPath, Exec: f.exec, Every: time.Hour}
			res := r.Run(context.Background(), Plan{GPUs: 2, BurnIn: recipe.BurnIn{Duration: recipe.Duration(time.Minute)},
				Checks: []recipe.Check{{Name: "gpu-burn"}}})[0]
			if res.Verdict != api.VerdictFailed || !strings.Contains(res.Detail, c.want) {
				t.Errorf("%s %q, want failed saying %q", res.Verdict, res.Detail, c.want)
			}
		})
	}
}

// The Debian burn-in: bandwidthTest once per GPU, matrixMulCUBLAS on every
// GPU at once and again until the duration has passed, each run's output
// read together.
func TestRunnerDebianTools(t *testing.T) {
	f := passingNode(t)
	var mu sync.Mutex
	running, most := 0, 0
	r := Runner{LookPath: f.lookPath, Every: time.Hour, Exec: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		switch filepath.Base(name) {
		case "bandwidthTest":
			dev := strings.TrimPrefix(args[0], "--device=")
			return []byte(strings.ReplaceAll(string(fixture(t, "bandwidthtest/csv.txt")), "Device 0:", "Device "+dev+":")), nil
		case "matrixMulCUBLAS":
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			dev := strings.TrimPrefix(args[0], "-device=")
			out := strings.Split(string(fixture(t, "cublas/pass_4gpu.txt")), "[Matrix Multiply CUBLAS]")[1]
			return []byte("[Matrix Multiply CUBLAS]" + strings.ReplaceAll(out, "GPU Device 0:", "GPU Device "+dev+":")), nil
		}
		return f.exec(ctx, name, args...)
	}}
	p := Plan{GPUs: 2, BurnIn: recipe.BurnIn{Duration: recipe.Duration(30 * time.Millisecond)},
		Checks: []recipe.Check{{Name: "cuda-bandwidth", Min: mustQ(t, "48GB/s")}, {Name: "cublas-gemm", Min: mustQ(t, "30Tflop/s")}}}
	res := r.Run(context.Background(), p)
	if !res[0].OK || !strings.Contains(res[0].Detail, "4 transfers, slowest GPU 0 host->device at 55.1GB/s") {
		t.Errorf("cuda-bandwidth: %+v", res[0])
	}
	if !res[1].OK || res[1].Evidence == nil || len(res[1].Evidence.Values) != 2 || res[1].Evidence.Values[0].Work < 2 {
		t.Errorf("cublas-gemm: %+v (evidence %+v), want both GPUs checked in more than one run", res[1], res[1].Evidence)
	}
	if most != 2 {
		t.Errorf("matrixMulCUBLAS ran on %d GPUs at once, want 2", most)
	}
}

// Every check the runner has a tool for has a judge, and the other way.
func TestRunnerToolsHaveJudges(t *testing.T) {
	a, b := Checks(), judge.Checks()
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Errorf("runner %v, judge %v", a, b)
	}
}
