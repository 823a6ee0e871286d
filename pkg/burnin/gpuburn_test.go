package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseGPUBurn(t *testing.T) {
	tests := map[string]struct {
		in     []byte
		want   GPUBurnResult
		passed bool
		err    *wantErr
	}{
		"pass: 2x H100 tensor cores, with power": {
			in: fixture(t, "gpuburn/pass.txt"),
			want: GPUBurnResult{TensorCores: true, GPUs: []GPUBurnGPU{
				{Index: 0, OK: true, Iterations: 16800, LastGflopsPerSec: 288412, MaxGflopsPerSec: 292010, TempCelsius: 66, MaxTempCelsius: 66, MaxPowerWatts: 700},
				{Index: 1, OK: true, Iterations: 16800, LastGflopsPerSec: 289903, MaxGflopsPerSec: 290557, TempCelsius: 63, MaxTempCelsius: 63, MaxPowerWatts: 695},
			}},
			passed: true,
		},
		"fail: GPU 2 of 4 miscomputes, old format without power": {
			in: fixture(t, "gpuburn/fail.txt"),
			want: GPUBurnResult{GPUs: []GPUBurnGPU{
				{Index: 0, OK: true, Iterations: 10140, LastGflopsPerSec: 14012, MaxGflopsPerSec: 14021, TempCelsius: 58, MaxTempCelsius: 58},
				{Index: 1, OK: true, Iterations: 10140, LastGflopsPerSec: 14093, MaxGflopsPerSec: 14102, TempCelsius: 55, MaxTempCelsius: 55},
				{Index: 2, Iterations: 9464, LastGflopsPerSec: 13901, MaxGflopsPerSec: 13958, MaxErrors: 4096, TempCelsius: 61, MaxTempCelsius: 61},
				{Index: 3, OK: true, Iterations: 10140, LastGflopsPerSec: 14071, MaxGflopsPerSec: 14077, TempCelsius: 54, MaxTempCelsius: 54},
			}},
		},
		"truncated: workers died, no verdict": {
			in:  fixture(t, "gpuburn/truncated.txt"),
			err: &wantErr{is: ErrIncomplete, text: `no "Tested N GPUs:" block`},
		},
		"verdict neither OK nor FAULTY": {
			in:  []byte("\rdone\n\nTested 4 GPUs:\n\tGPU 0: OK\n\tGPU 1: OK\n\tGPU 2: OK\n\tGPU 3: MAYBE\n"),
			err: &wantErr{line: 7, text: `gpu-burn: line 7: "GPU 3: MAYBE": expected OK or FAULTY`},
		},
		"verdict block lists too few GPUs": {
			in:  []byte("Tested 2 GPUs:\n\tGPU 0: OK\n"),
			err: &wantErr{is: ErrIncomplete, text: `"Tested 2 GPUs:" lists 1`},
		},
		"verdict out of order": {
			in:  []byte("Tested 2 GPUs:\n\tGPU 1: OK\n\tGPU 0: OK\n"),
			err: &wantErr{line: 2, text: "expected GPU 0 of 2"},
		},
		"progress entry counts disagree": {
			in:  []byte("\r10.0%  proc'd: 1 (5 Gflop/s) - 2 (6 Gflop/s)   errors: 0   temps: 40 C - 41 C \n"),
			err: &wantErr{line: 1, text: "expected 2 entries each"},
		},
		"progress covers other GPUs than the verdict": {
			in:  []byte("\r10.0%  proc'd: 1 (5 Gflop/s)   errors: 0   temps: 40 C \nTested 2 GPUs:\n\tGPU 0: OK\n\tGPU 1: OK\n"),
			err: &wantErr{text: "different number of GPUs"},
		},
		"no work reported is not a pass": {
			in:   []byte("Tested 1 GPUs:\n\tGPU 0: OK\n"),
			want: GPUBurnResult{GPUs: []GPUBurnGPU{{Index: 0, OK: true}}},
		},
		"doubles, inf rate and missing temperature": {
			in: []byte("Initialized device 0 with 16160 MB of memory (15896 MB available, using 14306 MB of it), using DOUBLES\n" +
				"\r50.0%  proc'd: 10 (inf Gflop/s)   errors: 0   temps: -- \r100.0%  proc'd: 20 (7012 Gflop/s)   errors: 0   temps: 71 C \n" +
				"Tested 1 GPUs:\n\tGPU 0: OK\n"),
			want: GPUBurnResult{Doubles: true, GPUs: []GPUBurnGPU{
				{Index: 0, OK: true, Iterations: 20, LastGflopsPerSec: 7012, MaxGflopsPerSec: 7012, TempCelsius: 71, MaxTempCelsius: 71}}},
			passed: true,
		},
		"empty": {in: nil, err: &wantErr{is: ErrIncomplete}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGPUBurn(tc.in)
			checkErr(t, toolGPUBurn, err, tc.err)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if got.Passed() != tc.passed {
				t.Errorf("Passed() = %v, want %v", got.Passed(), tc.passed)
			}
		})
	}
}

// The died worker of the truncated fixture is recorded before the abort.
func TestParseGPUBurnDied(t *testing.T) {
	in := fixture(t, "gpuburn/truncated.txt")
	in = append(in, "\nTested 2 GPUs:\n\tGPU 0: FAULTY\n\tGPU 1: FAULTY\n"...)
	got, err := ParseGPUBurn(in)
	if err != nil {
		t.Fatal(err)
	}
	if !got.GPUs[0].Died || !got.GPUs[1].Died || got.GPUs[0].Iterations != -1 || got.GPUs[1].MaxPowerWatts != 311 {
		t.Errorf("got %+v", got.GPUs)
	}
}
