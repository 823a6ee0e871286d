package burnin

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseBandwidthTest(t *testing.T) {
	run := func(dev int, h2d, d2h float64) BandwidthTestRun {
		return BandwidthTestRun{Devices: []int{dev}, Result: "PASS", Transfers: []BandwidthTestTransfer{
			{Kind: "H2D", Memory: "pinned", SizeBytes: 32e6, BytesPerSec: h2d, Devices: 1},
			{Kind: "D2H", Memory: "pinned", SizeBytes: 32e6, BytesPerSec: d2h, Devices: 1},
			{Kind: "D2D", Memory: "pinned", SizeBytes: 32e6, BytesPerSec: 754.2e9, Devices: 1}}}
	}
	four := BandwidthTestResult{}
	for i := range 4 {
		r := run(i, (26.3+float64(i)/10)*1e9, (26.8-float64(i)/10)*1e9)
		r.Line = 1 + 24*i
		four.Runs = append(four.Runs, r)
	}
	tests := map[string]struct {
		in   []byte
		want BandwidthTestResult
		err  *wantErr
	}{
		"4 runs, one per GPU": {in: fixture(t, "bandwidthtest/pass_4gpu.txt"), want: four},
		"--csv": {in: fixture(t, "bandwidthtest/csv.txt"), want: BandwidthTestResult{Runs: []BandwidthTestRun{{Devices: []int{0}, Result: "PASS", Line: 1,
			Transfers: []BandwidthTestTransfer{{Kind: "H2D", Memory: "pinned", SizeBytes: 32e6, BytesPerSec: 55.1e9, Devices: 1},
				{Kind: "D2H", Memory: "pinned", SizeBytes: 32e6, BytesPerSec: 55.7e9, Devices: 1}, {Kind: "D2D", SizeBytes: 32e6, BytesPerSec: 3822.4e9, Devices: 1}}}}}},
		"no device": {in: fixture(t, "bandwidthtest/nodevice.txt"), err: &wantErr{is: ErrToolFailed, line: 1, text: "cudaErrorNoDevice"},
			want: BandwidthTestResult{Runs: []BandwidthTestRun{{Line: 1, Error: `CUDA error at bandwidthTest.cu:256 code=100(cudaErrorNoDevice) "cudaGetDeviceCount(&deviceCount)"`}}}},
		"killed mid run": {in: []byte("[CUDA Bandwidth Test] - Starting...\nRunning on...\n\n Device 0: NVIDIA L40S\n Quick Mode\n\n"), err: &wantErr{is: ErrIncomplete, text: "no \"Result =\" line"},
			want: BandwidthTestResult{Runs: []BandwidthTestRun{{Line: 1, Devices: []int{0}}}}},
		"nothing":             {in: []byte("bandwidthTest: command not found\n"), err: &wantErr{is: ErrIncomplete}},
		"MB/s before CUDA 11": {in: []byte("[CUDA Bandwidth Test] - Starting...\nRunning on...\n Device 0: Tesla V100\n Host to Device Bandwidth, 1 Device(s)\n PINNED Memory Transfers\n   Transfer Size (Bytes)\tBandwidth(MB/s)\n   33554432\t\t\t12085.2\n\nResult = PASS\n"), want: BandwidthTestResult{Runs: []BandwidthTestRun{{Line: 1, Devices: []int{0}, Result: "PASS", Transfers: []BandwidthTestTransfer{{Kind: "H2D", Memory: "pinned", SizeBytes: 33554432, BytesPerSec: 12085.2e6, Devices: 1}}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBandwidthTest(tc.in)
			checkErr(t, toolBandwidthTest, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseP2P(t *testing.T) {
	r, err := ParseP2P(fixture(t, "p2p/pass_4gpu.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range r.Matrices {
		kinds = append(kinds, m.Kind)
		if m.N != 4 || len(m.Cells) != 16 {
			t.Errorf("%s: %d cells for N %d", m.Kind, len(m.Cells), m.N)
		}
	}
	want := []string{"unidirectional-disabled", "unidirectional", "bidirectional-disabled", "bidirectional",
		"latency-gpu-disabled", "latency-cpu-disabled", "latency-gpu", "latency-cpu"}
	if d := cmp.Diff(want, kinds); d != "" || r.Devices != 4 {
		t.Errorf("matrices (-want +got):\n%s\ndevices %d", d, r.Devices)
	}
	m, _ := r.Matrix("unidirectional")
	if c := m.Cells[1*4+3]; c.Row != 1 || c.Col != 3 || c.Value != 391.26e9 {
		t.Errorf("unidirectional 1->3: %+v", c)
	}
	lat, _ := r.Matrix("latency-gpu")
	if c := lat.Cells[1]; math.Abs(c.Value-2.5e-6) > 1e-12 {
		t.Errorf("latency 0->1: %+v, want 2.5us", c)
	}
	for name, tc := range map[string]struct {
		in  []byte
		err *wantErr
	}{
		"stopped before its NOTE": {in: fixture(t, "p2p/truncated.txt"), err: &wantErr{is: ErrIncomplete, text: "no closing"}},
		"CUDA error":              {in: []byte("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\nCUDA error at p2pBandwidthLatencyTest.cu:618 code=2(cudaErrorMemoryAllocation) \"cudaMalloc\" \n"), err: &wantErr{is: ErrToolFailed, line: 2}},
		"short row": {in: []byte("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n   D\\D     0      1 \n     0 2009.47\n"),
			err: &wantErr{line: 3, text: "expected row 0 with 2 values"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseP2P(tc.in)
			checkErr(t, toolP2P, err, tc.err)
		})
	}
}

func TestParseCUBLAS(t *testing.T) {
	r, err := ParseCUBLAS(fixture(t, "cublas/miscompare.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 12 {
		t.Fatalf("%d runs, want 12", len(r.Runs))
	}
	want := CUBLASRun{Device: 1, Name: "NVIDIA L40S", Line: r.Runs[9].Line, GflopsPerSec: 35711.02, Ops: 1572864000, Compared: "FAIL", Errors: 31,
		MatrixA: [2]int{960, 1280}, MatrixB: [2]int{640, 960}}
	if d := cmp.Diff(want, r.Runs[9]); d != "" {
		t.Errorf("run 9 (-want +got):\n%s", d)
	}
	for name, tc := range map[string]struct {
		in  string
		err *wantErr
	}{
		"stopped before the check": {"[Matrix Multiply CUBLAS] - Starting...\nGPU Device 2: \"NVIDIA L40S\" with compute capability 8.9\n\nComputing result using CUBLAS...",
			&wantErr{is: ErrIncomplete, text: "run on GPU 2 stopped before its result check"}},
		"CUDA error": {"[Matrix Multiply CUBLAS] - Starting...\nCUDA error at matrixMulCUBLAS.cpp:279 code=999(cudaErrorUnknown) \"cudaMalloc\" \n",
			&wantErr{is: ErrToolFailed, text: "cudaErrorUnknown"}},
		"bad rate": {"[Matrix Multiply CUBLAS] - Starting...\nPerformance= fast GFlop/s, Time= 0.044 msec, Size= 1 Ops\n", &wantErr{line: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseCUBLAS([]byte(tc.in))
			checkErr(t, toolCUBLAS, err, tc.err)
		})
	}
}

func TestParseClpeak(t *testing.T) {
	r, err := ParseClpeak(fixture(t, "clpeak/pass_2gpu.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []ClpeakDevice{
		{Platform: "NVIDIA CUDA", Name: "NVIDIA L40S", Index: 0, Tests: []ClpeakTest{{Name: "Single-precision compute", Unit: "GFLOPS", Best: 89123.45e9}}},
		{Platform: "NVIDIA CUDA", Name: "NVIDIA L40S", Index: 1, Tests: []ClpeakTest{{Name: "Single-precision compute", Unit: "GFLOPS", Best: 88710.12e9}}},
		{Platform: "Portable Computing Language", Name: "cpu-haswell-AMD EPYC 9354 32-Core Processor", Index: 0,
			Tests: []ClpeakTest{{Name: "Single-precision compute", Unit: "GFLOPS", Best: 1412.33e9}}},
	}
	if d := cmp.Diff(want, r.Devices, approx()); d != "" {
		t.Errorf("devices (-want +got):\n%s", d)
	}
	s, _ := ParseClpeak(fixture(t, "clpeak/skipped.txt"))
	if x, ok := s.Devices[1].Test("Single-precision compute"); !ok || !x.Skipped || x.Best != 0 {
		t.Errorf("skipped test: %+v %v", x, ok)
	}
	_, err = ParseClpeak(fixture(t, "clpeak/noplatform.txt"))
	checkErr(t, toolClpeak, err, &wantErr{is: ErrIncomplete, text: "no OpenCL device"})
}
