package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseIBWriteBW(t *testing.T) {
	const mib = 8 * (1 << 20) // bits per "MB" perftest prints
	tests := map[string]struct {
		in   []byte
		want IBWriteBWResult
		max  float64
		err  *wantErr
	}{
		"pass: NDR, --report_gbits, three sizes": {
			in: fixture(t, "ibwritebw/pass.txt"),
			want: IBWriteBWResult{Rows: []IBWriteBWRow{
				{SizeBytes: 65536, Iterations: 5000, AvgBitsPerSec: 392.61e9, MsgRatePerSec: 0.748844e6},
				{SizeBytes: 1048576, Iterations: 5000, AvgBitsPerSec: 393.87e9, MsgRatePerSec: 0.046953e6},
				{SizeBytes: 8388608, Iterations: 5000, AvgBitsPerSec: 394.02e9, MsgRatePerSec: 0.005871e6},
			}},
			max: 394.02e9,
		},
		"pass: MB/sec without --report_gbits": {
			in:   fixture(t, "ibwritebw/pass_mb.txt"),
			want: IBWriteBWResult{Rows: []IBWriteBWRow{{SizeBytes: 65536, Iterations: 5000, AvgBitsPerSec: 46803.22 * mib, MsgRatePerSec: 0.748852e6}}},
			max:  46803.22 * mib,
		},
		"fail: could not connect": {in: fixture(t, "ibwritebw/fail.txt"), err: &wantErr{is: ErrToolFailed, line: 7, text: "Couldn't connect"}},
		"truncated: header, no rows": {
			in:  fixture(t, "ibwritebw/truncated.txt"),
			err: &wantErr{is: ErrIncomplete},
		},
		"four columns, peak measured": {
			in:   []byte(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]\n 1048576    5000             92.58              92.41\n"),
			want: IBWriteBWResult{Rows: []IBWriteBWRow{{SizeBytes: 1048576, Iterations: 5000, PeakBitsPerSec: 92.58e9, AvgBitsPerSec: 92.41e9}}},
			max:  92.41e9,
		},
		"garbage row": {
			in:  []byte(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536 5000 fast 98.01 0.18\n"),
			err: &wantErr{line: 2, text: `"fast": expected a rate`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseIBWriteBW(tc.in)
			checkErr(t, toolIBWriteBW, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.max, got.MaxAvgBitsPerSec(), approx()); d != "" {
				t.Errorf("MaxAvgBitsPerSec (-want +got):\n%s", d)
			}
		})
	}
}
