package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// approx compares floats that went through unit conversion.
func approx() cmp.Option { return cmpopts.EquateApprox(1e-12, 0) }

func ncclRowOf(size int64, oop, ip [4]float64) NCCLRow {
	m := func(v [4]float64) NCCLMeasure {
		return NCCLMeasure{TimeSec: v[0] / 1e6, AlgBWBytesPerSec: v[1] * 1e9, BusBWBytesPerSec: v[2] * 1e9, Wrong: int64(v[3])}
	}
	return NCCLRow{SizeBytes: size, Count: size / 4, Type: "float", RedOp: "sum", Root: -1, OutOfPlace: m(oop), InPlace: m(ip)}
}

func TestParseNCCL(t *testing.T) {
	const g = 1 << 30
	pass := NCCLResult{AvgBusBWBytesPerSec: 423.746e9, Ranks: 8, Rows: []NCCLRow{
		ncclRowOf(g, [4]float64{4501.1, 238.55, 417.46, 0}, [4]float64{4498.7, 238.68, 417.69, 0}),
		ncclRowOf(2*g, [4]float64{8874.3, 241.99, 423.48, 0}, [4]float64{8869.9, 242.11, 423.69, 0}),
		ncclRowOf(4*g, [4]float64{17637, 243.52, 426.16, 0}, [4]float64{17629, 243.63, 426.35, 0}),
		ncclRowOf(8*g, [4]float64{35161, 244.30, 427.53, 0}, [4]float64{35154, 244.35, 427.61, 0}),
	}}
	tests := map[string]struct {
		in      []byte
		want    NCCLResult
		passed  bool
		maxBus1 float64 // MaxBusBW(1 GiB)
		err     *wantErr
	}{
		"pass: 8x H100 all_reduce 1G-8G": {in: fixture(t, "nccl/pass.txt"), want: pass, passed: true, maxBus1: 427.61e9},
		"fail: corrupt in-place 4G, INFO lines interleaved": {
			in: fixture(t, "nccl/fail.txt"),
			want: NCCLResult{OutOfBounds: 16777216, AvgBusBWBytesPerSec: 373.58e9, Ranks: 8, Rows: []NCCLRow{
				ncclRowOf(g, [4]float64{5063.9, 212.04, 371.07, 0}, [4]float64{5067.9, 211.87, 370.77, 0}),
				ncclRowOf(2*g, [4]float64{10063, 213.40, 373.45, 0}, [4]float64{10081, 213.02, 372.79, 0}),
				ncclRowOf(4*g, [4]float64{20060, 214.11, 374.69, 0}, [4]float64{20042, 214.30, 375.03, 16777216}),
				ncclRowOf(8*g, [4]float64{40035, 214.56, 375.48, 0}, [4]float64{40048, 214.49, 375.36, 0}),
			}},
			maxBus1: 375.48e9,
		},
		"truncated: killed after two sizes": {in: fixture(t, "nccl/truncated.txt"), err: &wantErr{is: ErrIncomplete}},
		"check disabled, below NCCL_TESTS_MIN_BW, old summary without #": {
			in: []byte("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
				"  1073741824     268435456     float     sum      -1   4501.1  238.55  417.46    N/A   4498.7  238.68  417.69    N/A\n" +
				" Out of bounds values : 0 OK\n Avg bus bandwidth    : 417.575 FAILED\n"),
			want: NCCLResult{AvgBusBWBytesPerSec: 417.575e9, BelowMinBW: true, Rows: []NCCLRow{
				ncclRowOf(g, [4]float64{4501.1, 238.55, 417.46, -1}, [4]float64{4498.7, 238.68, 417.69, -1})}},
			maxBus1: 417.69e9,
		},
		"NCCL failure": {
			in:  []byte("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\nnode-a: Test NCCL failure common.cu:1005 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '\n"),
			err: &wantErr{is: ErrToolFailed, line: 2},
		},
		"short row": {
			in:  []byte("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n 1073741824 268435456 float sum -1 4501.1 238.55\n"),
			err: &wantErr{line: 2, text: "expected 13 columns, got 7"},
		},
		"row before header": {in: []byte(" 1024 256 float sum -1 1 2 3 0 1 2 3 0\n"), err: &wantErr{line: 1, text: "before the table header"}},
		"old error column": {
			in:  []byte("#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"),
			err: &wantErr{line: 1, text: "unsupported table header"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNCCL(tc.in)
			checkErr(t, toolNCCL, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if got.Passed() != tc.passed {
				t.Errorf("Passed() = %v, want %v", got.Passed(), tc.passed)
			}
			if d := cmp.Diff(tc.maxBus1, got.MaxBusBW(1<<30), approx()); d != "" {
				t.Errorf("MaxBusBW(1 GiB) (-want +got):\n%s", d)
			}
		})
	}
	if got, _ := ParseNCCL(fixture(t, "nccl/pass.txt")); got.MaxBusBW(4<<30) != got.Rows[3].InPlace.BusBWBytesPerSec || got.MaxBusBW(16<<30) != 0 {
		t.Errorf("MaxBusBW ignores minSize")
	}
}
