package burnin

import (
	stdcmp "cmp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fioView is the part of a FioJob the table checks; percentiles are
// checked by p99 and count.
type fioView struct {
	Name                string
	Error               int
	ReadBps, WriteBps   float64
	ReadIOPS, WriteIOPS float64
	RuntimeSec          float64
	ClatMeanSec, P99Sec float64
	Percentiles         int
}

func fioViews(r FioResult) []fioView {
	var out []fioView
	for _, j := range r.Jobs {
		io := j.Read
		if j.Write.TotalIOs > 0 {
			io = j.Write
		}
		v := fioView{Name: j.Name, Error: j.Error, ReadBps: j.Read.BytesPerSec, WriteBps: j.Write.BytesPerSec,
			ReadIOPS: j.Read.IOPS, WriteIOPS: j.Write.IOPS, RuntimeSec: io.RuntimeSec, ClatMeanSec: io.ClatMeanSec, Percentiles: len(io.ClatPercentiles)}
		if i := slices.IndexFunc(io.ClatPercentiles, func(p FioPercentile) bool { return p.Percent == 99 }); i >= 0 {
			v.P99Sec = io.ClatPercentiles[i].Sec
		}
		out = append(out, v)
	}
	return out
}

func TestParseFio(t *testing.T) {
	tests := map[string]struct {
		in     []byte
		want   []fioView
		passed bool
		err    *wantErr
	}{
		"pass: seqwrite 1M and randread 4k": {
			in: fixture(t, "fio/pass.json"),
			want: []fioView{
				{Name: "seqwrite", WriteBps: 6871833143, WriteIOPS: 6553.490775153748, RuntimeSec: 60.001, ClatMeanSec: 8123456.7e-9, P99Sec: 18683950e-9, Percentiles: 17},
				{Name: "randread", ReadBps: 104721778, ReadIOPS: 25566.840552657457, RuntimeSec: 60.001, ClatMeanSec: 41211.3e-9, P99Sec: 94785e-9, Percentiles: 17},
			},
			passed: true,
		},
		"fail: EIO, stderr line before the JSON": {
			in:   fixture(t, "fio/fail.json"),
			want: []fioView{{Name: "randread", Error: 5, ReadBps: 14281885, ReadIOPS: 3486.7883410514846, RuntimeSec: 7.342, ClatMeanSec: 41211.3e-9, P99Sec: 94785e-9, Percentiles: 17}},
		},
		"truncated": {in: fixture(t, "fio/truncated.json"), err: &wantErr{is: ErrIncomplete}},
		"old fio: bw in KiB/s only": {
			in:     []byte(`{"fio version": "fio-2.2.10", "jobs": [{"jobname": "a", "error": 0, "read": {"bw": 1000, "iops": 250.5, "runtime": 2000}}]}`),
			want:   []fioView{{Name: "a", ReadBps: 1024000, ReadIOPS: 250.5, RuntimeSec: 2}},
			passed: true,
		},
		"syntax error line, after leading text": {
			in:  []byte("note: both iodepth >= 1 and synchronous I/O engine are selected\n{\n\"jobs\": [\n}\n"),
			err: &wantErr{line: 4, text: "invalid JSON"},
		},
		"no jobs":         {in: []byte("{\n\"fio version\": \"fio-3.36\",\n\"jobs\": []}"), err: &wantErr{line: 3, text: "no jobs"}},
		"not JSON at all": {in: []byte("fio: failed to open /dev/nvme9n1\n"), err: &wantErr{is: ErrIncomplete, text: "no JSON document"}},
		"bad percentile": {
			in:  []byte(`{"jobs": [{"jobname": "a", "read": {"clat_ns": {"percentile": {"lots": 1}}}}]}`),
			err: &wantErr{text: `percentile "lots"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFio(tc.in)
			checkErr(t, toolFio, err, tc.err)
			if d := cmp.Diff(tc.want, fioViews(got), approx()); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
			if got.Passed() != tc.passed {
				t.Errorf("Passed() = %v, want %v", got.Passed(), tc.passed)
			}
		})
	}
	r, _ := ParseFio(fixture(t, "fio/pass.json"))
	if p := r.Jobs[0].Write.ClatPercentiles; !slices.IsSortedFunc(p, func(a, b FioPercentile) int { return stdcmp.Compare(a.Percent, b.Percent) }) || p[0].Percent != 1 || p[16].Percent != 99.99 {
		t.Errorf("percentiles not sorted: %v", p)
	}
	if r.Version != "fio-3.36" {
		t.Errorf("Version = %q", r.Version)
	}
}
