package burnin

import (
	"cmp"
	"slices"
	"strconv"
)

const toolFio = "fio"

// FioResult is one fio run.
type FioResult struct {
	Version string // "fio-3.36"
	Jobs    []FioJob
}

// FioJob is one job (or one group, with group_reporting).
type FioJob struct {
	Name     string
	Filename string // the device or file it read ("job options": filename)
	Error    int    // fio's per-job errno; non-zero means the job failed
	Read     FioIO
	Write    FioIO
	Trim     FioIO
}

// FioIO is one direction of a job. Zero when the job did not do it.
type FioIO struct {
	IOBytes     int64
	BytesPerSec float64 // bw_bytes; from "bw" (KiB/s) × 1024 on fio without bw_bytes
	IOPS        float64
	RuntimeSec  float64 // fio prints milliseconds
	TotalIOs    int64
	ClatMeanSec float64 // completion latency; fio prints nanoseconds (clat_ns)
	// ClatPercentiles are clat_ns.percentile, sorted by Percent.
	ClatPercentiles []FioPercentile
}

// FioPercentile is one completion-latency percentile.
type FioPercentile struct {
	Percent float64 // 99.9 for "99.900000"
	Sec     float64
}

// Passed reports whether the run has jobs and none failed.
func (r FioResult) Passed() bool {
	for _, j := range r.Jobs {
		if j.Error != 0 {
			return false
		}
	}
	return len(r.Jobs) > 0
}

type fioDoc struct {
	Version string       `json:"fio version"`
	Jobs    []fioJobJSON `json:"jobs"`
}

type fioJobJSON struct {
	Name    string `json:"jobname"`
	Options struct {
		Filename string `json:"filename"`
	} `json:"job options"`
	Error int       `json:"error"`
	Read  fioIOJSON `json:"read"`
	Write fioIOJSON `json:"write"`
	Trim  fioIOJSON `json:"trim"`
}

type fioIOJSON struct {
	IOBytes  int64    `json:"io_bytes"`
	BWBytes  *float64 `json:"bw_bytes"`
	BW       float64  `json:"bw"` // KiB/s
	IOPS     float64  `json:"iops"`
	Runtime  float64  `json:"runtime"` // ms
	TotalIOs int64    `json:"total_ios"`
	Clat     struct {
		Mean       float64            `json:"mean"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// ParseFio parses `fio --output-format=json` output. Text fio prints before
// the JSON document (warnings such as "note: both iodepth >= 1 and
// synchronous I/O engine") is skipped; line numbers count it.
func ParseFio(data []byte) (FioResult, error) {
	res, _, err := parseFioAt(data, 0)
	return res, err
}

// parseFioAt parses the first fio document at or after offset from and
// returns the offset past it: the runner's output of one fio run per
// disk holds one document each.
func parseFioAt(data []byte, from int) (FioResult, int, error) {
	var doc fioDoc
	end, err := decodeJSONFrom(toolFio, data, from, &doc)
	if err != nil {
		return FioResult{}, end, err
	}
	if len(doc.Jobs) == 0 {
		return FioResult{}, end, &ParseError{Tool: toolFio, Line: lineOfKey(data, "jobs"), Msg: "no jobs"}
	}
	res := FioResult{Version: doc.Version}
	for _, j := range doc.Jobs {
		job := FioJob{Name: j.Name, Error: j.Error, Filename: j.Options.Filename}
		var err error
		for _, d := range []struct {
			dst *FioIO
			src fioIOJSON
		}{{&job.Read, j.Read}, {&job.Write, j.Write}, {&job.Trim, j.Trim}} {
			if *d.dst, err = fioIO(d.src); err != nil {
				return FioResult{}, end, &ParseError{Tool: toolFio, Line: lineOfKey(data, j.Name), Msg: "job " + strconv.Quote(j.Name) + ": " + err.Error()}
			}
		}
		res.Jobs = append(res.Jobs, job)
	}
	return res, end, nil
}

func fioIO(j fioIOJSON) (FioIO, error) {
	out := FioIO{IOBytes: j.IOBytes, BytesPerSec: j.BW * 1024, IOPS: j.IOPS, RuntimeSec: j.Runtime / 1e3,
		TotalIOs: j.TotalIOs, ClatMeanSec: j.Clat.Mean / 1e9}
	if j.BWBytes != nil {
		out.BytesPerSec = *j.BWBytes
	}
	for k, v := range j.Clat.Percentile {
		pct, err := parseFinite(k)
		if err != nil || pct < 0 || pct > 100 {
			return FioIO{}, errorf("clat_ns percentile %q: expected a percentage", k)
		}
		out.ClatPercentiles = append(out.ClatPercentiles, FioPercentile{Percent: pct, Sec: v / 1e9})
	}
	slices.SortFunc(out.ClatPercentiles, func(a, b FioPercentile) int {
		return cmp.Or(cmp.Compare(a.Percent, b.Percent), cmp.Compare(a.Sec, b.Sec))
	})
	return out, nil
}
