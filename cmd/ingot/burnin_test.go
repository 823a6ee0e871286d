package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
)

// hgxJudgeRecipe is a recipe of 8 GPUs with the gates of the HGX
// class: all-reduce at 16 GiB, nvbandwidth per pair, and the Debian checks.
const hgxJudgeRecipe = `name: hgx-judge
version: '1'
template: true
hardware:
  gpus:
    - {vendor: nvidia, model: H200, count: 8}
acceptance:
  checks:
    - {name: gpu-burn, min: 45Tflop/s}
    - {name: nccl-allreduce, min: 431GB/s, args: {size: 16GiB}}
    - {name: nvbandwidth, min: 335GB/s}
    - {name: cuda-p2p, min: 335GB/s}
    - {name: dcgm-diag}
    - {name: nic-link, min: 400Gbps, count: 8}
  burn_in: {duration: 2h}
`

// burninFixture is a tool output of pkg/burnin's testdata (written from
// the tools' sources, not captured; see its README).
func burninFixture(name string) string {
	return filepath.Join("..", "..", "pkg", "burnin", "testdata", name)
}

// TestBurninJudge runs `ingot burnin judge` in-process on saved outputs:
// the verdict, its exit status and the reason naming the cause.
func TestBurninJudge(t *testing.T) {
	dir := t.TempDir()
	rfile := filepath.Join(dir, "hgx.yaml")
	if err := os.WriteFile(rfile, []byte(hgxJudgeRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args   []string
		exit   int // 0, 1 (failed), 3 (could not run), 2 (usage)
		stdout []string
		stderr string
		err    string // the error main prints
	}{
		"healthy 8x H200 all-reduce through MPI notices": {args: []string{"--check", "nccl-allreduce", burninFixture("nccl/mpi_noise.txt")},
			stdout: []string{"verdict:  passed", "reason:   all_reduce_perf: 16GiB at 475.8GB/s", "values read (all_reduce_perf):", "16GiB  475.8GB/s"}},
		"one slow NVLink pair of 56": {args: []string{"--check", "nvbandwidth", burninFixture("nvbandwidth/slow_pair.txt")}, exit: 1,
			stdout: []string{"verdict:  failed", "1 of 56 cells under the minimum, want at least 335GB/s (slowest first: GPU 2 -> GPU 5 at 121.4GB/s)", "value:    121.4GB/s (GPU 2 -> GPU 5)"}},
		"--gpus: a 4-GPU node's DCGM run": {args: []string{"--check", "dcgm-diag", "--gpus", "4", burninFixture("dcgm/pass_v4.json")},
			stdout: []string{"verdict:  passed", "against 4 GPUs"}},
		"the recipe's 8 GPUs, a 4-GPU DCGM run": {args: []string{"--check", "dcgm-diag", burninFixture("dcgm/pass_v4.json")}, exit: 1,
			stdout: []string{"no result for GPU 4; GPU 5; GPU 6; GPU 7 (the node has 8 GPUs)"}},
		"a refused peer could not run": {args: []string{"--check", "nccl-allreduce", burninFixture("nccl/truncated.txt")}, exit: 3,
			stdout: []string{"verdict:  could-not-run", "output ends early"}},
		"a check the recipe lacks":           {args: []string{"--check", "clpeak", burninFixture("clpeak/pass_2gpu.txt")}, exit: 1},
		"an agent check is no burn-in check": {args: []string{"--check", "nic-link", burninFixture("clpeak/pass_2gpu.txt")}, exit: 1},
		"no file":                            {args: []string{"--check", "gpu-burn"}, exit: 2, stderr: "needs --recipe, --check and one FILE"},
		"two files":                          {args: []string{"--check", "gpu-burn", "a", "b"}, exit: 2, stderr: `one FILE, found "a" and "b"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, err := runIngot(t, append([]string{"burnin", "judge", "--recipe", rfile}, tc.args...)...)
			if got := exitOf(err); got != tc.exit {
				t.Fatalf("exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", got, err, tc.exit, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout does not say %q:\n%s", w, stdout)
				}
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
		})
	}
}

// TestBurninJudgeJSON: -o json after the file carries the verdict, the
// reason and every value read.
func TestBurninJudgeJSON(t *testing.T) {
	dir := t.TempDir()
	rfile := filepath.Join(dir, "hgx.yaml")
	if err := os.WriteFile(rfile, []byte(hgxJudgeRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runIngot(t, "burnin", "judge", "--recipe", rfile, "--check", "gpu-burn", burninFixture("gpuburn/overflow.txt"), "-o", "json")
	if exitOf(err) != 1 {
		t.Fatalf("exit %v, want 1", err)
	}
	var got struct {
		Verdict  api.Verdict  `json:"verdict"`
		Reason   string       `json:"reason"`
		GPUs     int          `json:"gpus"`
		Evidence api.Evidence `json:"evidence"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if got.Verdict != api.VerdictFailed || got.GPUs != 8 || len(got.Evidence.Values) != 8 || len(got.Evidence.Faults) != 1 ||
		!strings.Contains(got.Reason, "GPU 5: FAULTY, error count overflowed: printed -2147483648") {
		t.Errorf("%+v", got)
	}
}

func exitOf(err error) int {
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return int(ee)
	case errors.Is(err, errUsage):
		return 2
	}
	return 1
}
