package burnin

import (
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// shapeCase is one tool output in a shape real runs print, judged as the
// node and the server judge it.
type shapeCase struct {
	file    string        // under testdata
	in      string        // or inline output
	check   recipe.Check  // what the recipe asks
	burnIn  recipe.BurnIn // its limits
	inv     judge.Inventory
	verdict api.Verdict
	reason  []string // substrings of the reason, in order
}

func qty(t testing.TB, s string) recipe.Quantity {
	t.Helper()
	v, err := recipe.ParseQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRealShapes: every tool's parser and judge on the output shapes real
// runs print: MPI notices and driver warnings between the lines, JSON with
// text around it, %g and negative counts, an idle GPU, a zero receiver, a
// latency testcase, one slow NVLink pair among 56. Each case failed on the
// code before pkg/burnin/judge (a wrong verdict, or the right one for the
// wrong cause), checked once by running these fixtures through it.
func TestRealShapes(t *testing.T) {
	for name, tc := range nvidiaShapes(t) {
		t.Run(name, func(t *testing.T) { tc.run(t) })
	}
	for name, tc := range otherShapes(t) {
		t.Run(name, func(t *testing.T) { tc.run(t) })
	}
}

func gpusInv(n int) judge.Inventory { return judge.Inventory{GPUs: n} }

// check builds a recipe check: its name, min ("" for none), args in pairs.
func check(t *testing.T, name, min string, args ...string) recipe.Check {
	ch := recipe.Check{Name: name}
	if min != "" {
		ch.Min = qty(t, min)
	}
	if len(args) > 0 {
		ch.Args = map[string]string{}
		for i := 0; i+1 < len(args); i += 2 {
			ch.Args[args[i]] = args[i+1]
		}
	}
	return ch
}

// nvidiaShapes: nccl-tests, gpu-burn, nvbandwidth, DCGM.
func nvidiaShapes(t *testing.T) map[string]shapeCase {
	gpus := gpusInv
	c := func(name, min string, args ...string) recipe.Check { return check(t, name, min, args...) }
	return map[string]shapeCase{
		// nccl-tests
		"nccl: Open MPI notices and NCCL logs inside the table, healthy 8x H200 to 16GiB": {file: "nccl/mpi_noise.txt",
			check: c("nccl-allreduce", "431GB/s", "size", "16GiB"), inv: gpus(8), verdict: api.VerdictPassed,
			reason: []string{"all_reduce_perf: 16GiB at 475.8GB/s"}},
		"nccl: #wrong as %g, 96 wrong values, out of bounds FAILED, mpirun's abort: the hardware": {file: "nccl/wrong.txt",
			check: c("nccl-allreduce", "350GB/s"), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"all_reduce 2GiB: 96 wrong values (out-of-place)", "all_reduce 4GiB: 1048580 wrong values (in-place)", "4 out of bounds values"}},
		"nccl: a negative out of bounds count is an overflow, not 0": {in: strings.Replace(string(fixture(t, "nccl/pass.txt")), "Out of bounds values : 0 OK", "Out of bounds values : -2147483296 FAILED", 1),
			check: c("nccl-allreduce", ""), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"all sizes: out of bounds values, the count overflowed (printed -2147483296): data corruption"}},
		"nccl: no row at the judged size fails without min": {file: "nccl/short.txt",
			check: c("nccl-allreduce", ""), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"no row at or above 8GiB, the size the check judges (the largest measured is 4GiB)"}},
		"nccl: ran on fewer GPUs than the node has": {file: "nccl/pass.txt",
			check: c("nccl-allreduce", ""), inv: gpus(16), verdict: api.VerdictFailed, reason: []string{"ran on 8 GPUs, the node has 16"}},
		// gpu-burn
		"gpu-burn: 6 of 7 GPUs did 0 iterations fails without min": {file: "gpuburn/idle.txt",
			check: c("gpu-burn", ""), inv: gpus(7), verdict: api.VerdictFailed,
			reason: []string{"measured nothing for GPU 1 (0 iterations); GPU 2 (0 iterations)", "GPU 6 (0 iterations)"}},
		"gpu-burn: an overflowed error count is errors, named": {file: "gpuburn/overflow.txt",
			check: c("gpu-burn", "45Tflop/s"), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"GPU 5: FAULTY, error count overflowed: printed -2147483648, more than 2^31-1 errors"}},
		"gpu-burn: a GPU of the node absent from the results": {file: "gpuburn/pass.txt",
			check: c("gpu-burn", ""), inv: gpus(8), verdict: api.VerdictFailed, reason: []string{"no result for GPU 2;", "(the node has 8 GPUs)"}},
		"gpu-burn: workers died before the verdict: the hardware, not the tool": {file: "gpuburn/truncated.txt",
			check: c("gpu-burn", ""), inv: gpus(2), verdict: api.VerdictFailed,
			reason: []string{"GPU 0: computed wrong results, 12 errors, its worker died", "GPU 1: computed wrong results, 3 errors, its worker died"}},
		// nvbandwidth
		"nvbandwidth: one slow NVLink pair among 56 fails, named; the SUM moves 1%": {file: "nvbandwidth/slow_pair.txt",
			check: c("nvbandwidth", "335GB/s"), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"nvbandwidth device_to_device_memcpy_read_ce: 1 of 56 cells under the minimum, want at least 335GB/s (slowest first: GPU 2 -> GPU 5 at 121.4GB/s)"}},
		"nvbandwidth: a driver warning and a notice between the rows": {file: "nvbandwidth/noise.txt",
			check: c("nvbandwidth", "335GB/s"), inv: gpus(8), verdict: api.VerdictPassed,
			reason: []string{"56 cells, slowest GPU"}},
		"nvbandwidth: a latency testcase measures no bandwidth": {file: "nvbandwidth/latency.txt",
			check: c("nvbandwidth", "", "testcase", "device_to_device_latency_sm"), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"device_to_device_latency_sm measures latency, not bandwidth"}},
		"nvbandwidth: a cell of 0 fails without min": {file: "nvbandwidth/zero_cell.txt",
			check: c("nvbandwidth", "", "testcase", "host_to_device_memcpy_ce"), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"measured nothing for GPU 6 host->device (0B/s)"}},
		"nvbandwidth: the data-pattern assertion is a miscompare, not a crash": {file: "nvbandwidth/crash.txt",
			check: c("nvbandwidth", ""), inv: gpus(4), verdict: api.VerdictFailed,
			reason: []string{"device_to_device_memcpy_read_ce: data-pattern check failed (the copy delivered wrong bytes): Invalid value when checking the pattern"}},
		// DCGM
		"dcgm: a table with notices inside and before it": {file: "dcgm/noise_v3.txt",
			check: c("dcgm-diag", ""), inv: gpus(4), verdict: api.VerdictPassed, reason: []string{"4 GPUs passed: GPU 0 6 tests passed"}},
		"dcgm: JSON with text before and after": {in: "dcgmi: notice: running level 3\n" + string(fixture(t, "dcgm/pass_v4.json")) + "\nnv-hostengine: connection reset\n",
			check: c("dcgm-diag", ""), inv: gpus(4), verdict: api.VerdictPassed, reason: []string{"4 GPUs passed"}},
		"dcgm: a GPU of the node absent": {file: "dcgm/pass_v4.json",
			check: c("dcgm-diag", ""), inv: gpus(8), verdict: api.VerdictFailed, reason: []string{"no result for GPU 4; GPU 5; GPU 6; GPU 7"}},
		"dcgm: a DBE names the GPU and the test": {file: "dcgm/fail_v3.txt",
			check: c("dcgm-diag", ""), inv: gpus(4), verdict: api.VerdictFailed,
			reason: []string{"GPU 1: GPU Memory Fail", "GPU 3: Targeted Power Warn"}},
		"dcgm: runtime_error could not run": {file: "dcgm/runtime_error.json",
			check: c("dcgm-diag", ""), inv: gpus(4), verdict: api.VerdictCouldNotRun, reason: []string{"persistence mode is off"}},
	}
}

// otherShapes: fio, iperf3, ib_write_bw, stress-ng, and Debian's CUDA
// samples and clpeak.
func otherShapes(t *testing.T) map[string]shapeCase {
	gpus := gpusInv
	c := func(name, min string, args ...string) recipe.Check { return check(t, name, min, args...) }
	return map[string]shapeCase{
		// fio, iperf3, ib_write_bw, stress-ng
		"fio: JSON followed by its normal text": {file: "fio/json_then_text.json",
			check: c("fio", "3GB/s"), inv: judge.Inventory{Disks: []string{"/dev/nvme1n1"}}, verdict: api.VerdictPassed,
			reason: []string{"fio: /dev/nvme1n1 at 6.909GB/s"}},
		"fio: a disk that read 0 bytes fails without min": {file: "fio/zero.json",
			check: c("fio", ""), inv: judge.Inventory{Disks: []string{"/dev/nvme2n1"}}, verdict: api.VerdictFailed,
			reason: []string{"measured nothing for /dev/nvme2n1 (0 bytes read)"}},
		"fio: a data disk without a result": {file: "fio/json_then_text.json",
			check: c("fio", ""), inv: judge.Inventory{Disks: []string{"/dev/nvme1n1", "/dev/nvme2n1"}}, verdict: api.VerdictFailed,
			reason: []string{"no result for /dev/nvme2n1 (the data disks are /dev/nvme1n1, /dev/nvme2n1)"}},
		"iperf3: a receiver that got 0 bytes fails without min": {file: "iperf3/zero_receiver.json",
			check: c("iperf3", ""), verdict: api.VerdictFailed, reason: []string{"measured nothing for received over 8 streams (0 bytes received)"}},
		"iperf3: a refused connection could not run": {file: "iperf3/refused_exit0.json",
			check: c("iperf3", "100Gbps"), verdict: api.VerdictCouldNotRun, reason: []string{"unable to connect to server"}},
		"ib_write_bw: a warning inside the table": {in: strings.Replace(string(fixture(t, "ibwritebw/pass.txt")), " 1048576 ", " mlx5: node-a: got completion with error:\n 1048576 ", 1),
			check: c("ib-write-bw", "380Gbps"), verdict: api.VerdictPassed, reason: []string{"average with 8388608B messages at 394Gbps"}},
		"stress-ng: memory bit errors are the hardware": {file: "stressng/fail.txt",
			check: c("stress-ng", ""), verdict: api.VerdictFailed, reason: []string{"vm: detected 1 bit errors while stressing memory"}},
		// Debian's CUDA samples and clpeak
		"bandwidthTest: 4 GPUs, one run each": {file: "bandwidthtest/pass_4gpu.txt",
			check: c("cuda-bandwidth", "24GB/s"), inv: gpus(4), verdict: api.VerdictPassed, reason: []string{"8 transfers, slowest GPU 0 host->device at 26.3GB/s"}},
		"bandwidthTest: GPU 2 on a narrow link": {file: "bandwidthtest/slow_gpu2.txt",
			check: c("cuda-bandwidth", "24GB/s"), inv: gpus(4), verdict: api.VerdictFailed,
			reason: []string{"2 of 8 transfers under the minimum, want at least 24GB/s (slowest first: GPU 2 host->device at 6.6GB/s; GPU 2 device->host at 6.7GB/s)"}},
		"bandwidthTest: --csv": {file: "bandwidthtest/csv.txt",
			check: c("cuda-bandwidth", "48GB/s"), inv: gpus(1), verdict: api.VerdictPassed, reason: []string{"slowest GPU 0 host->device at 55.1GB/s"}},
		"bandwidthTest: GPUs the runs did not cover": {file: "bandwidthtest/csv.txt",
			check: c("cuda-bandwidth", ""), inv: gpus(2), verdict: api.VerdictFailed, reason: []string{"no result for GPU 1 host->device; GPU 1 device->host"}},
		"bandwidthTest: no CUDA device could not run": {file: "bandwidthtest/nodevice.txt",
			check: c("cuda-bandwidth", ""), inv: gpus(1), verdict: api.VerdictCouldNotRun, reason: []string{"cudaErrorNoDevice"}},
		"p2pBandwidthLatencyTest: 4 GPUs": {file: "p2p/pass_4gpu.txt",
			check: c("cuda-p2p", "335GB/s"), inv: gpus(4), verdict: api.VerdictPassed, reason: []string{"12 pairs, slowest GPU 0 -> GPU 1 at 391.2GB/s"}},
		"p2pBandwidthLatencyTest: one slow pair of 56, bidirectional too": {file: "p2p/slow_pair_8gpu.txt",
			check: c("cuda-p2p", "600GB/s", "matrix", "bidirectional"), inv: gpus(8), verdict: api.VerdictFailed,
			reason: []string{"1 of 56 pairs under the minimum", "GPU 1 -> GPU 3 at 250.1GB/s"}},
		"p2pBandwidthLatencyTest: stopped early": {file: "p2p/truncated.txt",
			check: c("cuda-p2p", ""), inv: gpus(4), verdict: api.VerdictCouldNotRun, reason: []string{"no closing"}},
		"p2pBandwidthLatencyTest: one GPU has no pair": {in: "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n",
			check: c("cuda-p2p", ""), inv: gpus(1), verdict: api.VerdictFailed, reason: []string{"needs at least 2 GPUs; the node has 1"}},
		"matrixMulCUBLAS: 4 GPUs, 3 runs each": {file: "cublas/pass_4gpu.txt",
			check: c("cublas-gemm", "30Tflop/s"), inv: gpus(4), verdict: api.VerdictPassed, reason: []string{"4 GPUs, slowest GPU 0 at 35.91Tflop/s"}},
		"matrixMulCUBLAS: a product that differs from the CPU's": {file: "cublas/miscompare.txt",
			check: c("cublas-gemm", ""), inv: gpus(4), verdict: api.VerdictFailed,
			reason: []string{"GPU 1: product differs from the CPU's in 1 of 3 runs (31 wrong elements)"}},
		"matrixMulCUBLAS: an idle GPU": {file: "cublas/idle.txt",
			check: c("cublas-gemm", ""), inv: gpus(4), verdict: api.VerdictFailed, reason: []string{"measured nothing for GPU 3 (0flop/s)"}},
		"clpeak: NVIDIA's two GPUs, pocl's CPU is no GPU": {file: "clpeak/pass_2gpu.txt",
			check: c("clpeak", "80Tflop/s"), inv: gpus(2), verdict: api.VerdictPassed, reason: []string{"2 GPUs, slowest GPU 1 at 88.71Tflop/s"}},
		"clpeak: a skipped test is no measurement": {file: "clpeak/skipped.txt",
			check: c("clpeak", ""), inv: gpus(2), verdict: api.VerdictFailed, reason: []string{"GPU 1 (printed skipped: no support)"}},
		"clpeak: no OpenCL platform could not run": {file: "clpeak/noplatform.txt",
			check: c("clpeak", ""), inv: gpus(1), verdict: api.VerdictCouldNotRun, reason: []string{"no OpenCL device"}},
	}
}

func (tc shapeCase) run(t *testing.T) {
	t.Helper()
	out := []byte(tc.in)
	if tc.file != "" {
		out = fixture(t, tc.file)
	}
	ev, got := JudgeOutput(tc.check, tc.burnIn, out, tc.inv)
	if got.Verdict != tc.verdict {
		t.Errorf("verdict %s, want %s: %s\nevidence %+v", got.Verdict, tc.verdict, got.Reason, ev)
	}
	rest := got.Reason
	for _, want := range tc.reason {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Errorf("reason %q\ndoes not say %q (after what came before)", got.Reason, want)
			return
		}
		rest = rest[i+len(want):]
	}
}
