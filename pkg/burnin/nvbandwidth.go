package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolNVBandwidth = "nvbandwidth"

var (
	nvbRunningRe = regexp.MustCompile(`^Running (\S+)\.$`)
	nvbSumRe     = regexp.MustCompile(`^SUM (\S+) (\S+)$`)
	// "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
	// "Device to Device Latency SM GPU(row) <-> GPU(column) (ns)"
	nvbDescRe = regexp.MustCompile(`\(row\).*\(column\).*\((GB/s|ns|us)\)$`)
	// nvbandwidth's data-pattern check after a copy: the bytes that
	// arrived are not the bytes sent ("Invalid value when checking the
	// pattern at 0x...", then "ASSERT in expression h_errorFlag == 0 in
	// ... memcmpPatternHelper"). A hardware verdict, not a crash.
	nvbMiscompareRe = regexp.MustCompile(`Invalid value when checking the pattern|ASSERT in expression h_errorFlag == 0|memcmpPattern`)
	// nvbandwidth's other assertions and CUDA errors: the tool stopped.
	nvbAssertRe = regexp.MustCompile(`^(ASSERT in expression|\[CUDA_ERROR_[A-Z_]+\]|CUDA_ERROR_[A-Z_]+|Error: )`)
	nvbDeviceRe = regexp.MustCompile(`^Device (\d+): `)
)

// NVBandwidthResult is one nvbandwidth run.
type NVBandwidthResult struct {
	Matrices []NVBandwidthMatrix
	Waived   []string // testcases nvbandwidth waived as not applicable here
	Devices  int      // "Device N: ..." lines of the header
	// Miscompares are data-pattern check failures, by testcase: the copy
	// delivered wrong bytes. Set only in the partial result of such a run,
	// whose error wraps ErrMiscompare.
	Miscompares []NVBandwidthMiscompare `json:",omitempty"`
}

// NVBandwidthMiscompare is one failed data-pattern check.
type NVBandwidthMiscompare struct {
	Testcase string
	Line     int
	Text     string
}

// NVBandwidthMatrix is one result matrix. Most testcases print one; the
// bidirectional SM testcases print several (…_read1, …_read2, …_total).
type NVBandwidthMatrix struct {
	Testcase    string // from "Running <testcase>."
	Name        string // from "SUM <name> <value>"; Testcase when no SUM (latency)
	Description string // "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
	Latency     bool   // a latency matrix: cells carry LatencySec, not BytesPerSec
	Rows, Cols  int
	Cells       []NVBandwidthCell // measured cells only; "N/A" cells are left out
	// SumBytesPerSec is the SUM line, converted from GB/s (1e9 bytes/s).
	SumBytesPerSec float64
}

// NVBandwidthCell is one measured cell: Row is the source (CPU or GPU,
// per the description), Col the GPU.
type NVBandwidthCell struct {
	Row, Col    int
	BytesPerSec float64 // bandwidth matrices: GB/s × 1e9
	LatencySec  float64 // latency matrices: ns × 1e-9
}

// Matrix returns the matrix named name (the SUM name, or the testcase).
func (r NVBandwidthResult) Matrix(name string) (NVBandwidthMatrix, bool) {
	for _, m := range r.Matrices {
		if m.Name == name {
			return m, true
		}
	}
	return NVBandwidthMatrix{}, false
}

// nvbParser holds the state of one ParseNVBandwidth call.
type nvbParser struct {
	res      NVBandwidthResult
	testcase string             // current "Running" testcase, "" after it is done
	produced bool               // the current testcase printed a matrix
	cur      *NVBandwidthMatrix // matrix being read, nil between matrices
	unit     float64            // scale of cur's values to SI
	cols     int                // 0 until cur's column header is read
	ended    bool               // a blank line ended cur's rows
}

// ParseNVBandwidth parses nvbandwidth's plain-text output (nvbandwidth, or
// nvbandwidth -t <testcase>...). A bandwidth matrix is complete at its SUM
// line, a latency matrix at the next section; a testcase that printed no
// matrix and was not waived, or a bandwidth matrix without its SUM, wraps
// ErrIncomplete.
func ParseNVBandwidth(data []byte) (NVBandwidthResult, error) {
	res, err := parseNVBandwidth(data)
	if err != nil {
		return NVBandwidthResult{}, cutLastLine(data, err)
	}
	return res, nil
}

// parseNVBandwidth returns what it read before an error too.
func parseNVBandwidth(data []byte) (NVBandwidthResult, error) {
	var p nvbParser
	for i, raw := range splitLines(data) {
		if err := p.line(i+1, strings.TrimSpace(raw)); err != nil {
			return p.res, err
		}
	}
	if err := p.closeTestcase(0, ""); err != nil {
		return p.res, err
	}
	if len(p.res.Matrices) == 0 && len(p.res.Waived) == 0 {
		return p.res, incomplete(toolNVBandwidth, "no testcase results")
	}
	return p.res, nil
}

func (p *nvbParser) line(n int, s string) error {
	switch {
	case nvbMiscompareRe.MatchString(s):
		p.res.Miscompares = append(p.res.Miscompares, NVBandwidthMiscompare{Testcase: p.testcase, Line: n, Text: clip(s)})
		if strings.HasPrefix(s, "ASSERT") { // the tool stops after its assertion
			return &ParseError{Tool: toolNVBandwidth, Line: n, Text: clip(s), Msg: "testcase " + p.testcase + ": data-pattern check failed", Err: ErrMiscompare}
		}
	case nvbAssertRe.MatchString(s):
		return &ParseError{Tool: toolNVBandwidth, Line: n, Text: clip(s), Msg: "testcase " + p.testcase, Err: ErrToolFailed}
	case p.testcase == "" && nvbDeviceRe.MatchString(s):
		p.res.Devices++
	case nvbRunningRe.MatchString(s):
		if err := p.closeTestcase(n, s); err != nil {
			return err
		}
		p.testcase, p.produced = nvbRunningRe.FindStringSubmatch(s)[1], false
	case strings.HasPrefix(s, "Waived"):
		if p.testcase != "" && !p.produced {
			p.res.Waived = append(p.res.Waived, p.testcase)
			p.testcase = ""
		}
	case nvbDescRe.MatchString(s):
		return p.startMatrix(n, s)
	case nvbSumRe.MatchString(s):
		return p.sum(n, s)
	case p.cur != nil && s == "":
		if p.cur.Rows > 0 {
			p.ended = true
		}
	case p.cur != nil && !p.ended && p.matrixShaped(s):
		return p.matrixLine(n, s)
	}
	return nil
}

// matrixShaped: the column header ("0 1 2 3": every field its index), or
// the next row: its index, then one field per column. Other lines inside a
// matrix (a driver warning, a notice) are not the matrix's and are skipped.
func (p *nvbParser) matrixShaped(s string) bool {
	f := strings.Fields(s)
	if p.cols == 0 {
		for i, c := range f {
			if c != strconv.Itoa(i) {
				return false
			}
		}
		return len(f) > 0
	}
	if len(f) == 0 || f[0] != strconv.Itoa(p.cur.Rows) {
		return false
	}
	if len(f) == p.cols+1 {
		return true // a row; its values must parse
	}
	for _, v := range f[1:] { // a short or long row of numbers is ours, and wrong
		if _, err := parseNumber(v); err != nil && v != "N/A" {
			return false
		}
	}
	return true
}

func (p *nvbParser) startMatrix(n int, s string) error {
	if p.testcase == "" {
		return lineErr(toolNVBandwidth, n, s, "a result matrix outside a \"Running <testcase>.\" section")
	}
	if err := p.finishMatrix(n, s); err != nil {
		return err
	}
	unit := map[string]float64{"GB/s": gb, "ns": 1e-9, "us": 1e-6}[nvbDescRe.FindStringSubmatch(s)[1]]
	p.cur = &NVBandwidthMatrix{Testcase: p.testcase, Name: p.testcase, Description: s, Latency: unit != gb}
	p.unit, p.cols, p.ended, p.produced = unit, 0, false, true
	return nil
}

// matrixLine reads the column header "0 1 2 ..." or a row "0 12.3 N/A ...".
func (p *nvbParser) matrixLine(n int, s string) error {
	f := strings.Fields(s)
	if p.cols == 0 {
		for i, c := range f {
			if c != strconv.Itoa(i) {
				return lineErr(toolNVBandwidth, n, s, "expected column indices 0..n-1")
			}
		}
		p.cols, p.cur.Cols = len(f), len(f)
		return nil
	}
	if len(f) != p.cols+1 || f[0] != strconv.Itoa(p.cur.Rows) {
		return lineErr(toolNVBandwidth, n, s, "expected row %d with %d values", p.cur.Rows, p.cols)
	}
	for col, v := range f[1:] {
		if v == "N/A" {
			continue
		}
		x, err := parseRate(v)
		if err != nil || x < 0 {
			return lineErr(toolNVBandwidth, n, s, "column %d: expected a number or N/A", col)
		}
		cell := NVBandwidthCell{Row: p.cur.Rows, Col: col}
		if p.cur.Latency {
			cell.LatencySec = x * p.unit
		} else {
			cell.BytesPerSec = x * p.unit
		}
		p.cur.Cells = append(p.cur.Cells, cell)
	}
	p.cur.Rows++
	return nil
}

func (p *nvbParser) sum(n int, s string) error {
	m := nvbSumRe.FindStringSubmatch(s)
	if p.cur == nil || p.cur.Rows == 0 || !strings.HasPrefix(m[1], p.cur.Testcase) {
		return lineErr(toolNVBandwidth, n, s, "a SUM line without a matrix of its testcase")
	}
	v, err := parseRate(m[2])
	if err != nil {
		return lineErr(toolNVBandwidth, n, s, "expected a sum in GB/s")
	}
	if !p.cur.Latency {
		p.cur.SumBytesPerSec = v * gb
	}
	p.cur.Name = m[1]
	p.res.Matrices = append(p.res.Matrices, *p.cur)
	p.cur = nil
	return nil
}

// finishMatrix completes a matrix without a SUM line, which only latency
// matrices may lack. n is 0 at the end of the output.
func (p *nvbParser) finishMatrix(n int, s string) error {
	switch {
	case p.cur == nil:
		return nil
	case p.cur.Latency && p.cur.Rows > 0:
		p.res.Matrices = append(p.res.Matrices, *p.cur)
		p.cur = nil
		return nil
	case n == 0:
		return incomplete(toolNVBandwidth, "testcase %s: matrix %q ends without its SUM line", p.testcase, p.cur.Description)
	}
	return lineErr(toolNVBandwidth, n, s, "the previous matrix has no SUM line")
}

// closeTestcase checks that the current testcase finished.
func (p *nvbParser) closeTestcase(n int, s string) error {
	if err := p.finishMatrix(n, s); err != nil {
		return err
	}
	if p.testcase != "" && !p.produced {
		if n == 0 {
			return incomplete(toolNVBandwidth, "testcase %s printed no result", p.testcase)
		}
		return lineErr(toolNVBandwidth, n, s, "testcase %s printed no result", p.testcase)
	}
	return nil
}
