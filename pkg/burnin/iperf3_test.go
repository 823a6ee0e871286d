package burnin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseIperf3(t *testing.T) {
	tests := map[string]struct {
		in   []byte
		want Iperf3Result
		err  *wantErr
	}{
		"pass: TCP -P 8 at 93 Gbit/s": {
			in: fixture(t, "iperf3/pass.json"),
			want: Iperf3Result{Protocol: "TCP", Streams: 8, DurationSec: 30, SentBytes: 349098475520, ReceivedBytes: 349081698304,
				SentBitsPerSec: 93092912001.6, ReceivedBitsPerSec: 93087757000.4, Retransmits: 24},
		},
		"fail: connection refused": {
			in:  fixture(t, "iperf3/fail.json"),
			err: &wantErr{is: ErrToolFailed, line: 17, text: "unable to connect to server"},
		},
		"truncated": {in: fixture(t, "iperf3/truncated.json"), err: &wantErr{is: ErrIncomplete}},
		"UDP, iperf before 3.9": {
			in: fixture(t, "iperf3/udp.json"),
			want: Iperf3Result{Protocol: "UDP", Streams: 1, DurationSec: 30, SentBytes: 3749982720, ReceivedBytes: 3749982720,
				SentBitsPerSec: 999994750.1, ReceivedBitsPerSec: 999994750.1, LostPercent: 0.05189, JitterSec: 0.0123e-3},
		},
		"interrupted: no end sums": {in: []byte(`{"start": {}, "intervals": [], "end": {}}`), err: &wantErr{is: ErrIncomplete}},
		"wrong type":               {in: []byte("{\"start\": {},\n\"error\": 3}"), err: &wantErr{line: 2, text: `field "error"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseIperf3(tc.in)
			checkErr(t, toolIperf3, err, tc.err)
			if d := cmp.Diff(tc.want, got, approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}
