package burnin

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

func TestParseStressNG(t *testing.T) {
	tests := map[string]struct {
		in     []byte
		want   StressNGResult
		passed bool
		err    *wantErr
	}{
		"pass: 0.17 metrc table with extra columns": {
			in: fixture(t, "stressng/pass.txt"),
			want: StressNGResult{PassedInstances: 68, Successful: true, Stressors: []StressNGStressor{
				{Name: "cpu", BogoOps: 173278040, RealSec: 1800, UserSec: 115187.52, SystemSec: 8.94, OpsPerSec: 96265.58, OpsPerCPUs: 1504.28, Status: "passed"},
				{Name: "vm", BogoOps: 85122471, RealSec: 1800.03, UserSec: 2214.83, SystemSec: 4985.21, OpsPerSec: 47289.34, OpsPerCPUs: 11822.31, Status: "passed"},
			}},
			passed: true,
		},
		"fail: vm bit errors": {
			in: fixture(t, "stressng/fail.txt"),
			want: StressNGResult{PassedInstances: 9, FailedInstances: 1, Failures: []string{"vm: detected 1 bit errors while stressing memory"},
				Stressors: []StressNGStressor{
					{Name: "cpu", BogoOps: 295814, RealSec: 60, UserSec: 479.31, SystemSec: 0.05, OpsPerSec: 4930.23, OpsPerCPUs: 617.11, Status: "passed"},
					{Name: "vm", BogoOps: 1823347, RealSec: 60.01, UserSec: 30.62, SystemSec: 89.14, OpsPerSec: 30384.05, OpsPerCPUs: 15225.33, Status: "failed"},
				}},
		},
		"truncated: killed while running": {in: fixture(t, "stressng/truncated.txt"), err: &wantErr{is: ErrIncomplete}},
		"0.13: table after completion, timestamps": {
			in: []byte("stress-ng: 10:48:33.34 info:  [4399] dispatching hogs: 72 matrix\n" +
				"stress-ng: 10:58:33.39 info:  [4399] successful run completed in 600.05s (10 mins, 0.05 secs)\n" +
				"stress-ng: 10:58:33.39 info:  [4399] stressor      bogo ops real time  usr time  sys time   bogo ops/s   bogo ops/s\n" +
				"stress-ng: 10:58:33.39 info:  [4399]                          (secs)    (secs)    (secs)   (real time) (usr+sys time)\n" +
				"stress-ng: 10:58:33.39 info:  [4399] matrix        99686236    600.00  43196.82      0.00    166143.74      2307.72\n" +
				"stress-ng: 10:58:33.39 info:  [4399] for a 600.05s run time:\n"),
			want: StressNGResult{Successful: true, Stressors: []StressNGStressor{
				{Name: "matrix", BogoOps: 99686236, RealSec: 600, UserSec: 43196.82, OpsPerSec: 166143.74, OpsPerCPUs: 2307.72}}},
			passed: true,
		},
		"--log-brief, untrustworthy metrics": {
			in: []byte("stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s\n" +
				"                          (secs)    (secs)    (secs)   (real time) (usr+sys time)\n" +
				"ramfs            735238     60.00     12.37    363.70     12253.05        1955.08\n" +
				"passed: 9: ramfs (9)\nfailed: 0\nmetrics untrustworthy: 9\nsuccessful run completed in 60.01s (1 min, 0.01 secs)\n"),
			want: StressNGResult{PassedInstances: 9, UntrustworthyInstances: 9, Successful: true, Stressors: []StressNGStressor{
				{Name: "ramfs", BogoOps: 735238, RealSec: 60, UserSec: 12.37, SystemSec: 363.7, OpsPerSec: 12253.05, OpsPerCPUs: 1955.08, Status: "passed"}}},
		},
		"bad number in the table": {
			in:  []byte("stress-ng: metrc: [1] stressor bogo ops real time usr time sys time bogo ops/s bogo ops/s\nstress-ng: metrc: [1] cpu 100 1.00 x 0.00 100.00 100.00\n"),
			err: &wantErr{line: 2, text: `column 4 "x": expected a number`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseStressNG(tc.in)
			checkErr(t, toolStressNG, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if got.Passed() != tc.passed {
				t.Errorf("Passed() = %v, want %v", got.Passed(), tc.passed)
			}
		})
	}
}

func TestParseStressNGYAML(t *testing.T) {
	tests := map[string]struct {
		in   []byte
		want StressNGResult
		err  *wantErr
	}{
		"pass: two stressors": {
			in: fixture(t, "stressng/pass.yaml"),
			want: StressNGResult{Stressors: []StressNGStressor{
				{Name: "cpu", BogoOps: 173278040, RealSec: 1800, UserSec: 115187.52, SystemSec: 8.94, OpsPerSec: 96265.577778, OpsPerCPUs: 1504.277632},
				{Name: "vm", BogoOps: 85122471, RealSec: 1800.03, UserSec: 2214.83, SystemSec: 4985.21, OpsPerSec: 47289.342289, OpsPerCPUs: 11822.313723},
			}},
		},
		"truncated: entry without its numbers": {
			in:  fixture(t, "stressng/truncated.yaml"),
			err: &wantErr{is: ErrIncomplete, text: `metrics entry "vm" has no bogo-ops`},
		},
		"column-0 list items": {
			in:   []byte("metrics:\n- stressor: cpu\n  bogo-ops: 15000\n  bogo-ops-per-second-real-time: 3000.5\n"),
			want: StressNGResult{Stressors: []StressNGStressor{{Name: "cpu", BogoOps: 15000, OpsPerSec: 3000.5}}},
		},
		"bad count": {
			in:  []byte("metrics:\n    - stressor: cpu\n      bogo-ops: many\n"),
			err: &wantErr{line: 3, text: "bogo-ops: expected a count"},
		},
		"no metrics": {in: []byte("---\nsystem-info:\n      run-by: root\n...\n"), err: &wantErr{is: ErrIncomplete}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseStressNGYAML(tc.in)
			checkErr(t, toolStressNG, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}

// stress-ng's memory workers take args.memory together, 75% of memory
// without it; the load lasts the burn-in duration.
func TestStressArgvMemory(t *testing.T) {
	plan := Plan{BurnIn: recipe.BurnIn{Duration: recipe.Duration(90 * time.Second)}}
	for name, tc := range map[string]struct {
		args map[string]string
		want string
	}{
		"default":   {nil, "--cpu 0 --vm 2 --vm-bytes 75% --timeout 90s --metrics-brief"},
		"a size":    {map[string]string{"memory": "64M"}, "--cpu 0 --vm 2 --vm-bytes 64M --timeout 90s --metrics-brief"},
		"a percent": {map[string]string{"memory": "25%"}, "--cpu 0 --vm 2 --vm-bytes 25% --timeout 90s --metrics-brief"},
	} {
		t.Run(name, func(t *testing.T) {
			runs := stressArgv(recipe.Check{Name: "stress-ng", Args: tc.args}, plan)
			if len(runs) != 1 || strings.Join(runs[0], " ") != tc.want {
				t.Errorf("stressArgv = %q, want one run: %s", runs, tc.want)
			}
		})
	}
}
