package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolIBWriteBW = "ib_write_bw"

var (
	// " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	ibHeaderRe = regexp.MustCompile(`^#bytes\s+#iterations\s+BW peak\[(Gb|MB|MiB)/sec\]\s+BW average\[(Gb|MB|MiB)/sec\](\s+MsgRate\[Mpps\])?$`)
	// perftest's setup failures: " Couldn't connect to 10.0.0.1:18515"
	ibFailRe = regexp.MustCompile(`^(Couldn't|Unable to|Failed to) `)
)

// IBWriteBWResult is one perftest bandwidth run (ib_write_bw; ib_read_bw
// and ib_send_bw print the same table).
type IBWriteBWResult struct {
	Rows []IBWriteBWRow // one per message size (-a prints many)
}

// IBWriteBWRow is one message size. Rates are bits per second whichever
// unit perftest printed: with --report_gbits it prints Gb/sec (1e9 bits),
// without it MB/sec where MB means 2^20 bytes (perftest's own note).
type IBWriteBWRow struct {
	SizeBytes      int64
	Iterations     int64
	PeakBitsPerSec float64 // 0 with -N (no peak)
	AvgBitsPerSec  float64
	MsgRatePerSec  float64 // MsgRate[Mpps] × 1e6; 0 when not printed
}

// MaxAvgBitsPerSec returns the best average bandwidth over all rows.
func (r IBWriteBWResult) MaxAvgBitsPerSec() float64 {
	best := 0.0
	for _, row := range r.Rows {
		best = max(best, row.AvgBitsPerSec)
	}
	return best
}

// ParseIBWriteBW parses the client's (or server's) stdout of ib_write_bw,
// with or without --report_gbits; the unit is read from the table header.
// No table, or a header without rows, wraps ErrIncomplete; a setup failure
// ("Couldn't connect to ...") without a table wraps ErrToolFailed.
func ParseIBWriteBW(data []byte) (IBWriteBWResult, error) {
	res, err := parseIBWriteBW(data)
	return res, cutLastLine(data, err)
}

func parseIBWriteBW(data []byte) (IBWriteBWResult, error) {
	var res IBWriteBWResult
	var failure *ParseError
	scale := 0.0 // bits/s per printed unit; 0 outside a table
	for i, raw := range splitLines(data) {
		n, line := i+1, strings.TrimSpace(raw)
		f := strings.Fields(line)
		switch {
		case failure == nil && ibFailRe.MatchString(line):
			failure = &ParseError{Tool: toolIBWriteBW, Line: n, Text: clip(line), Err: ErrToolFailed}
		case ibHeaderRe.MatchString(line):
			m := ibHeaderRe.FindStringSubmatch(line)
			if m[1] != m[2] {
				return IBWriteBWResult{}, lineErr(toolIBWriteBW, n, line, "peak and average in different units")
			}
			scale = 8 * (1 << 20)
			if m[1] == "Gb" {
				scale = 1e9
			}
		case scale != 0 && strings.HasPrefix(line, "---"):
			scale = 0 // the rule under the table
		case scale != 0 && len(f) > 0 && digitsRe.MatchString(f[0]):
			row, err := ibRow(f, scale)
			if err != nil {
				return IBWriteBWResult{}, lineErr(toolIBWriteBW, n, line, "%v", err)
			}
			res.Rows = append(res.Rows, row)
		}
		// anything else is not the table's: a warning, stderr
	}
	if len(res.Rows) == 0 && failure != nil {
		return IBWriteBWResult{}, failure
	}
	if len(res.Rows) == 0 {
		return IBWriteBWResult{}, incomplete(toolIBWriteBW, "no \"#bytes #iterations BW peak...\" table with rows")
	}
	return res, nil
}

// ibRow parses "65536 5000 98.01 98.01 0.186932" (MsgRate optional).
func ibRow(f []string, scale float64) (IBWriteBWRow, error) {
	if len(f) != 4 && len(f) != 5 {
		return IBWriteBWRow{}, errorf("expected 4 or 5 columns, got %d", len(f))
	}
	var row IBWriteBWRow
	var err error
	if row.SizeBytes, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return row, errorf("#bytes %q: expected a size", f[0])
	}
	if row.Iterations, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return row, errorf("#iterations %q: expected a count", f[1])
	}
	vals := make([]float64, len(f)-2)
	for i, s := range f[2:] {
		if vals[i], err = parseFinite(s); err != nil || vals[i] < 0 {
			return row, errorf("%q: expected a rate", s)
		}
	}
	row.PeakBitsPerSec, row.AvgBitsPerSec = vals[0]*scale, vals[1]*scale
	if len(vals) == 3 {
		row.MsgRatePerSec = vals[2] * 1e6
	}
	return row, nil
}
