package burnin

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

const toolNCCL = "nccl"

var (
	ncclAvgRe  = regexp.MustCompile(`^#?\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?$`)
	ncclOOBRe  = regexp.MustCompile(`^#?\s*Out of bounds values\s*:\s*(\S+)\s*(OK|FAILED)?$`)
	ncclFailRe = regexp.MustCompile(`Test (NCCL |CUDA )?failure`)
	// "#  Rank  0 Group  0 Pid  41877 on node-a device  0 [0x18] NVIDIA H100 80GB HBM3"
	ncclRankRe = regexp.MustCompile(`^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+`)
	// A data type column: float, half, bfloat16, int8, uint64, fp8_e4m3, ...
	ncclTypeRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// gb is the "GB" nccl-tests prints bandwidth in: 1e9 bytes.
const gb = 1e9

// NCCLResult is one nccl-tests run (all_reduce_perf and its siblings).
type NCCLResult struct {
	Rows []NCCLRow
	// OutOfBounds is "# Out of bounds values : N": wrong elements summed over
	// all sizes and ranks. Non-zero means data corruption.
	OutOfBounds int64
	// AvgBusBWBytesPerSec is "# Avg bus bandwidth": the mean bus bandwidth
	// over all rows and both halves, in bytes/s (the tool prints GB/s, 1e9).
	AvgBusBWBytesPerSec float64
	// BelowMinBW: the average line ends in FAILED, which nccl-tests prints
	// when NCCL_TESTS_MIN_BW is set and the average is below 90% of it.
	BelowMinBW bool
	// Ranks is how many ranks (one GPU each) the "# Using devices" list
	// names; 0 when it was not printed.
	Ranks int
	// Failure is a "Test NCCL failure" or "Test CUDA failure" line: the run
	// stopped there. Set only in the partial result of a failed run.
	Failure string
}

// NCCLRow is one message size.
type NCCLRow struct {
	SizeBytes  int64
	Count      int64  // elements
	Type       string // "float", "bfloat16", ...
	RedOp      string // "sum", ...; "none" for collectives without one
	Root       int    // -1 for rootless collectives
	OutOfPlace NCCLMeasure
	InPlace    NCCLMeasure
}

// NCCLMeasure is one half (out-of-place or in-place) of a row.
type NCCLMeasure struct {
	TimeSec          float64 // the tool prints microseconds
	AlgBWBytesPerSec float64
	BusBWBytesPerSec float64 // 0 when printed as inf or nan (see NotANumber)
	Wrong            int64   // #wrong elements; -1 when not checked ("N/A", -c 0)
	// WrongNegative is a #wrong printed below 0: a count that overflowed,
	// wrong values all the same (Wrong holds what was printed).
	WrongNegative bool `json:",omitempty"`
	// NotANumber is what the tool printed for a time or bandwidth that is
	// no number ("inf", "-nan"); "" when all three are numbers.
	NotANumber string `json:",omitempty"`
}

// MaxBusBW returns the largest bus bandwidth, in bytes/s, over both halves
// of rows whose message is at least minSize bytes (use 1<<30 to judge only
// the 1 GiB and larger messages that reach peak). 0 if no row qualifies.
func (r NCCLResult) MaxBusBW(minSize int64) float64 {
	best := 0.0
	for _, row := range r.Rows {
		if row.SizeBytes >= minSize {
			best = max(best, row.OutOfPlace.BusBWBytesPerSec, row.InPlace.BusBWBytesPerSec)
		}
	}
	return best
}

// Passed reports whether the run checked its data and found it all correct,
// and did not fall below NCCL_TESTS_MIN_BW.
func (r NCCLResult) Passed() bool {
	for _, row := range r.Rows {
		if row.OutOfPlace.Wrong != 0 || row.InPlace.Wrong != 0 {
			return false
		}
	}
	if r.OutOfBounds < 0 {
		return false
	}
	return len(r.Rows) > 0 && r.OutOfBounds == 0 && !r.BelowMinBW
}

// ncclLayout is the column layout a table header announced.
type ncclLayout struct {
	redop, root bool
}

func (l ncclLayout) fields() int { return 3 + b2i(l.redop) + b2i(l.root) + 8 }

// ParseNCCL parses the text output of nccl-tests (all_reduce_perf -b 1G -e
// 8G -f 2 -g 8 and the other *_perf tests). Lines that are not part of the
// table are skipped wherever they are: NCCL INFO/WARN logs, Open MPI
// notices ("8 more processes have sent help message ..."), "[host:pid]"
// lines, stderr interleaved. A row is a line whose first two fields are
// numbers and whose third is a data type. Numbers may be in any notation
// printf gives ("1.04858e+06" in #wrong). Without the closing "Out of
// bounds" and "Avg bus bandwidth" lines the error wraps ErrIncomplete; a
// "Test NCCL failure" line wraps ErrToolFailed.
func ParseNCCL(data []byte) (NCCLResult, error) {
	res, err := parseNCCL(data)
	if err != nil {
		return NCCLResult{}, cutLastLine(data, err)
	}
	return res, nil
}

// ncclParser holds the state of one ParseNCCL call.
type ncclParser struct {
	res             NCCLResult
	layout          *ncclLayout // nil before the first table header
	seenOOB, seenAv bool
	ranks           map[string]bool
}

// parseNCCL returns what it read before an error too: the rows before a
// tool failure still show wrong values.
func parseNCCL(data []byte) (NCCLResult, error) {
	p := ncclParser{ranks: map[string]bool{}}
	for i, raw := range splitLines(data) {
		if err := p.line(i+1, strings.TrimSpace(raw)); err != nil {
			p.res.Ranks = len(p.ranks)
			return p.res, err
		}
	}
	p.res.Ranks = len(p.ranks)
	switch {
	case !p.seenOOB || !p.seenAv:
		return p.res, incomplete(toolNCCL, "no \"Out of bounds values\" and \"Avg bus bandwidth\" summary")
	case len(p.res.Rows) == 0:
		return p.res, incomplete(toolNCCL, "no result rows")
	}
	return p.res, nil
}

func (p *ncclParser) line(n int, line string) error {
	fields := strings.Fields(line)
	switch {
	case ncclFailRe.MatchString(line):
		p.res.Failure = clip(line)
		return &ParseError{Tool: toolNCCL, Line: n, Text: clip(line), Err: ErrToolFailed}
	case ncclOOBRe.MatchString(line):
		v, err := parseCount(ncclOOBRe.FindStringSubmatch(line)[1])
		if err != nil {
			return lineErr(toolNCCL, n, line, "expected a count of out of bounds values")
		}
		p.res.OutOfBounds, p.seenOOB = v, true
	case ncclAvgRe.MatchString(line):
		m := ncclAvgRe.FindStringSubmatch(line)
		v, err := parseRate(m[1])
		if err != nil {
			return lineErr(toolNCCL, n, line, "expected a bandwidth in GB/s")
		}
		p.res.AvgBusBWBytesPerSec, p.res.BelowMinBW, p.seenAv = v*gb, m[2] == "FAILED", true
	case ncclRankRe.MatchString(line):
		p.ranks[ncclRankRe.FindStringSubmatch(line)[1]] = true
	case strings.HasPrefix(line, "#"):
		l, err := ncclHeader(n, line)
		if l != nil {
			p.layout = l
		}
		return err
	case len(fields) >= 3 && digitsRe.MatchString(fields[0]) && digitsRe.MatchString(fields[1]) && ncclTypeRe.MatchString(fields[2]):
		return p.row(n, line, fields)
	}
	return nil
}

func (p *ncclParser) row(n int, line string, fields []string) error {
	if p.layout == nil {
		return lineErr(toolNCCL, n, line, "a result row before the table header")
	}
	row, err := ncclRow(*p.layout, fields)
	if err != nil {
		return lineErr(toolNCCL, n, line, "%v", err)
	}
	p.res.Rows = append(p.res.Rows, row)
	return nil
}

// ncclHeader recognises the "#  size  count  type  redop  root  time ..."
// header and returns its layout, or nil for other comment lines.
func ncclHeader(n int, line string) (*ncclLayout, error) {
	f := strings.Fields(strings.TrimPrefix(line, "#"))
	if len(f) < 3 || f[0] != "size" || f[1] != "count" || f[2] != "type" {
		return nil, nil
	}
	t := slices.Index(f, "time")
	l := &ncclLayout{redop: slices.Contains(f[:max(t, 0)], "redop"), root: slices.Contains(f[:max(t, 0)], "root")}
	if t != 3+b2i(l.redop)+b2i(l.root) || !slices.Equal(f[t:], []string{"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"}) {
		return nil, lineErr(toolNCCL, n, line, `unsupported table header: expected "size count type [redop] [root] time algbw busbw #wrong" twice (nccl-tests 2.x)`)
	}
	return l, nil
}

func ncclRow(l ncclLayout, f []string) (NCCLRow, error) {
	if len(f) != l.fields() {
		return NCCLRow{}, errorf("expected %d columns, got %d", l.fields(), len(f))
	}
	var row NCCLRow
	var err error
	if row.SizeBytes, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return row, errorf("size %q: %v", f[0], err)
	}
	if row.Count, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return row, errorf("count %q: %v", f[1], err)
	}
	row.Type, row.Root, f = f[2], -1, f[3:]
	if l.redop {
		row.RedOp, f = f[0], f[1:]
	}
	if l.root {
		if row.Root, err = strconv.Atoi(f[0]); err != nil {
			return row, errorf("root %q: %v", f[0], err)
		}
		f = f[1:]
	}
	if row.OutOfPlace, err = ncclMeasure(f[:4]); err != nil {
		return row, errorf("out-of-place: %v", err)
	}
	if row.InPlace, err = ncclMeasure(f[4:]); err != nil {
		return row, errorf("in-place: %v", err)
	}
	return row, nil
}

func ncclMeasure(f []string) (NCCLMeasure, error) {
	var v [3]float64
	var nan []string
	for i := range v {
		x, err := parseNumber(f[i])
		switch {
		case err != nil:
			return NCCLMeasure{}, errorf("%q: expected a number", f[i])
		case math.IsNaN(x) || math.IsInf(x, 0):
			nan = append(nan, f[i])
		default:
			v[i] = x
		}
	}
	m := NCCLMeasure{TimeSec: v[0] / 1e6, AlgBWBytesPerSec: v[1] * gb, BusBWBytesPerSec: v[2] * gb, Wrong: -1,
		NotANumber: strings.Join(nan, " ")}
	if f[3] != "N/A" {
		w, err := parseCount(f[3])
		if err != nil {
			return NCCLMeasure{}, errorf("#wrong %q: expected a count or N/A", f[3])
		}
		m.Wrong, m.WrongNegative = w, w < 0
	}
	return m, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
