package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nvbRow builds the cells of row r from printed values; -1 is N/A.
func nvbRow(r int, scale float64, latency bool, vals ...float64) []NVBandwidthCell {
	var out []NVBandwidthCell
	for c, v := range vals {
		switch {
		case v < 0:
		case latency:
			out = append(out, NVBandwidthCell{Row: r, Col: c, LatencySec: v * scale})
		default:
			out = append(out, NVBandwidthCell{Row: r, Col: c, BytesPerSec: v * scale})
		}
	}
	return out
}

func nvbResult(h2d, d2h []float64, h2dSum, d2hSum float64) NVBandwidthResult {
	var d2d []NVBandwidthCell
	for r, row := range [][]float64{{-1, 389.12, 389.30, 388.95}, {389.04, -1, 389.21, 389.17}, {389.33, 389.08, -1, 389.26}, {389.11, 389.29, 389.02, -1}} {
		d2d = append(d2d, nvbRow(r, 1e9, false, row...)...)
	}
	return NVBandwidthResult{
		Waived: []string{"device_to_device_bidirectional_memcpy_read_ce"}, Devices: 4,
		Matrices: []NVBandwidthMatrix{
			{Testcase: "host_to_device_memcpy_ce", Name: "host_to_device_memcpy_ce", Description: "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
				Rows: 1, Cols: 4, Cells: nvbRow(0, 1e9, false, h2d...), SumBytesPerSec: h2dSum * 1e9},
			{Testcase: "device_to_host_memcpy_ce", Name: "device_to_host_memcpy_ce", Description: "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
				Rows: 1, Cols: 4, Cells: nvbRow(0, 1e9, false, d2h...), SumBytesPerSec: d2hSum * 1e9},
			{Testcase: "device_to_device_memcpy_read_ce", Name: "device_to_device_memcpy_read_ce", Description: "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
				Rows: 4, Cols: 4, Cells: d2d, SumBytesPerSec: 4669.88e9},
			{Testcase: "host_device_latency_sm", Name: "host_device_latency_sm", Description: "memory latency SM CPU(row) <-> GPU(column) (ns)",
				Latency: true, Rows: 1, Cols: 4, Cells: nvbRow(0, 1e-9, true, 812.44, 809.87, 815.02, 811.30)},
		},
	}
}

func TestParseNVBandwidth(t *testing.T) {
	tests := map[string]struct {
		in   []byte
		want NVBandwidthResult
		err  *wantErr
	}{
		"pass: 4x H100": {
			in:   fixture(t, "nvbandwidth/pass.txt"),
			want: nvbResult([]float64{55.24, 55.21, 55.19, 55.26}, []float64{55.37, 55.33, 55.35, 55.39}, 220.90, 221.44),
		},
		"fail: GPU 2 on a narrow PCIe link": {
			in:   fixture(t, "nvbandwidth/fail.txt"),
			want: nvbResult([]float64{55.24, 55.21, 13.62, 55.26}, []float64{55.37, 55.33, 13.71, 55.39}, 179.33, 179.80),
		},
		"miscompare: the data-pattern assertion": {
			in:  fixture(t, "nvbandwidth/crash.txt"),
			err: &wantErr{is: ErrMiscompare, line: 23, text: "testcase device_to_device_memcpy_read_ce: data-pattern check failed"},
		},
		"truncated mid row": {in: fixture(t, "nvbandwidth/truncated.txt"), err: &wantErr{is: ErrIncomplete, line: 23}},
		"matrix without SUM at the end": {
			in:  []byte("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0\n0 55.24\n\n"),
			err: &wantErr{is: ErrIncomplete, text: "ends without its SUM line"},
		},
		"bad value": {
			in:  []byte("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0 1\n0 55.24 fast\n"),
			err: &wantErr{line: 4, text: "column 1: expected a number or N/A"},
		},
		"SUM of another testcase": {
			in:  []byte("Running a_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n 0\n0 1.00\n\nSUM b_ce 1.00\n"),
			err: &wantErr{line: 6, text: "without a matrix of its testcase"},
		},
		"no output": {in: []byte("nvbandwidth Version: v0.8\n"), err: &wantErr{is: ErrIncomplete}},
		"bidirectional SM testcase: three matrices": {
			in: []byte("Running device_to_device_bidirectional_memcpy_read_sm.\n" +
				"memcpy SM CPU(row) <-> GPU(column) Read1 bandwidth (GB/s)\n          0         1\n 0       N/A    370.10\n 1    370.21       N/A\n\n" +
				"SUM device_to_device_bidirectional_memcpy_read_sm_read1 740.31\n\n" +
				"memcpy SM CPU(row) <-> GPU(column) Read2 bandwidth (GB/s)\n          0         1\n 0       N/A    369.90\n 1    370.02       N/A\n\n" +
				"SUM device_to_device_bidirectional_memcpy_read_sm_read2 739.92\n\n" +
				"memcpy SM CPU(row) <-> GPU(column) Total bandwidth (GB/s)\n          0         1\n 0       N/A    740.00\n 1    740.23       N/A\n\n" +
				"SUM device_to_device_bidirectional_memcpy_read_sm_total 1480.23\n"),
			want: NVBandwidthResult{Matrices: []NVBandwidthMatrix{
				nvbBidir("read1", "Read1", 740.31, 370.10, 370.21),
				nvbBidir("read2", "Read2", 739.92, 369.90, 370.02),
				nvbBidir("total", "Total", 1480.23, 740.00, 740.23),
			}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNVBandwidth(tc.in)
			checkErr(t, toolNVBandwidth, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}

func nvbBidir(suffix, label string, sum, a, b float64) NVBandwidthMatrix {
	const tc = "device_to_device_bidirectional_memcpy_read_sm"
	return NVBandwidthMatrix{Testcase: tc, Name: tc + "_" + suffix, Description: "memcpy SM CPU(row) <-> GPU(column) " + label + " bandwidth (GB/s)",
		Rows: 2, Cols: 2, SumBytesPerSec: sum * 1e9, Cells: append(nvbRow(0, 1e9, false, -1, a), nvbRow(1, 1e9, false, b, -1)...)}
}

func TestNVBandwidthMatrix(t *testing.T) {
	r, err := ParseNVBandwidth(fixture(t, "nvbandwidth/fail.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := r.Matrix("host_to_device_memcpy_ce")
	if !ok || m.Cells[2].BytesPerSec != 13.62e9 {
		t.Errorf("Matrix(h2d) = %+v, %v", m, ok)
	}
	if _, ok := r.Matrix("nope"); ok {
		t.Error("Matrix(nope) found")
	}
}
