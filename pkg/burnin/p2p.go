package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolP2P = "p2pBandwidthLatencyTest"

var (
	// "Device: 0, NVIDIA H100 80GB HBM3, pciBusID: 18, pciDeviceID: 0, pciDomainID:0"
	p2pDeviceRe = regexp.MustCompile(`^Device: (\d+), (.*), pciBusID: ([0-9a-fA-F]+)`)
	// "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
	// "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)"
	p2pBWRe = regexp.MustCompile(`^(Unidirectional|Bidirectional) P2P=(Enabled|Disabled) Bandwidth(?: \(P2P (Writes|Reads)\))? Matrix \(GB/s\)$`)
	// "P2P=Enabled Latency (P2P Writes) Matrix (us)"
	p2pLatRe = regexp.MustCompile(`^P2P=(Enabled|Disabled) Latency(?: \(P2P (Writes|Reads)\))? Matrix \(us\)$`)
	// matrix headers: "D\D     0      1", "GPU     0      1", "CPU     0      1"
	p2pHeadRe = regexp.MustCompile(`^(D\\D|GPU|CPU)((?:\s+\d+)+)$`)
	p2pDoneRe = regexp.MustCompile(`^NOTE: The CUDA Samples are not meant for performance measurements`)
)

// P2PResult is one run of the CUDA samples' p2pBandwidthLatencyTest (11.x).
type P2PResult struct {
	Devices  int // "Device: N, NAME, pciBusID: ..." lines
	Matrices []P2PMatrix
}

// P2PMatrix is one matrix the sample prints. Bandwidth cells are bytes/s
// (the tool prints GB/s, 1e9); latency cells are seconds (printed in us).
type P2PMatrix struct {
	Title string // as printed
	// Kind names the bandwidth matrices a check can judge: "unidirectional"
	// (P2P writes), "unidirectional-read" (P2P reads, --p2p_read),
	// "bidirectional"; with P2P disabled the copies go through the host and
	// Kind ends in "-disabled". Latency matrices: "latency-gpu", "latency-cpu"
	// (also with "-disabled").
	Kind  string
	Cells []P2PCell
	N     int // devices: the matrix is N x N
}

// P2PCell is one cell: row and column are CUDA device indices; the sample
// labels them "D\D" and ingot reads the row as the source.
type P2PCell struct {
	Row, Col int
	Value    float64
}

// Matrix returns the matrix of kind k.
func (r P2PResult) Matrix(k string) (P2PMatrix, bool) {
	for _, m := range r.Matrices {
		if m.Kind == k {
			return m, true
		}
	}
	return P2PMatrix{}, false
}

// p2pParser holds the state of one ParseP2P call.
type p2pParser struct {
	res   P2PResult
	kind  string  // of the matrices that follow the last title
	scale float64 // 1e9 (GB/s) or 1e-6 (us)
	cur   *P2PMatrix
	done  bool
}

// ParseP2P parses p2pBandwidthLatencyTest's output. Lines that are not the
// sample's (the "Device=0 CAN Access Peer Device=1" list, notices, stderr)
// are skipped. Output that stops before the closing NOTE wraps
// ErrIncomplete; a "CUDA error at" line wraps ErrToolFailed.
func ParseP2P(data []byte) (P2PResult, error) {
	var p p2pParser
	for i, raw := range splitLines(data) {
		if err := p.line(i+1, strings.TrimSpace(raw)); err != nil {
			p.flush()
			return p.res, err
		}
	}
	p.flush()
	if !p.done {
		return p.res, incomplete(toolP2P, "no closing \"NOTE: The CUDA Samples ...\" line")
	}
	if len(p.res.Matrices) == 0 {
		return p.res, incomplete(toolP2P, "no matrix")
	}
	return p.res, nil
}

func (p *p2pParser) line(n int, s string) error {
	switch {
	case cudaErrRe.MatchString(s):
		return &ParseError{Tool: toolP2P, Line: n, Text: clip(s), Err: ErrToolFailed}
	case p2pDeviceRe.MatchString(s):
		p.res.Devices++
	case p2pBWRe.MatchString(s):
		m := p2pBWRe.FindStringSubmatch(s)
		p.title(s, p2pKind(strings.ToLower(m[1]), m[3] == "Reads", m[2] == "Disabled"), 1e9)
	case p2pLatRe.MatchString(s):
		m := p2pLatRe.FindStringSubmatch(s)
		p.title(s, p2pKind("latency", m[2] == "Reads", m[1] == "Disabled"), 1e-6)
	case p2pDoneRe.MatchString(s):
		p.flush()
		p.done, p.kind = true, ""
	case p.kind != "" && p2pHeadRe.MatchString(s):
		p.header(s)
	case p.cur != nil:
		return p.row(n, s)
	}
	return nil
}

// p2pKind builds a matrix's Kind; latency matrices get their GPU or CPU
// part from the header.
func p2pKind(base string, reads, disabled bool) string {
	if reads {
		base += "-read"
	}
	if disabled {
		base += "-disabled"
	}
	return base
}

func (p *p2pParser) title(s, kind string, scale float64) {
	p.flush()
	p.kind, p.scale = kind, scale
	p.cur = &P2PMatrix{Title: s, Kind: kind}
}

// header starts the matrix under a title ("D\D"), or the GPU or CPU part
// of a latency matrix.
func (p *p2pParser) header(s string) {
	m := p2pHeadRe.FindStringSubmatch(s)
	title := ""
	if p.cur != nil {
		title = p.cur.Title
		if len(p.cur.Cells) > 0 {
			p.flush()
		}
	}
	kind := p.kind
	if m[1] != "D\\D" {
		kind = strings.Replace(p.kind, "latency", "latency-"+strings.ToLower(m[1]), 1)
	}
	p.cur = &P2PMatrix{Title: title, Kind: kind, N: len(strings.Fields(m[2]))}
}

// row reads the matrix's next row, "     0 1529.61  11.53"; other lines
// (blank, a notice) are not the matrix's.
func (p *p2pParser) row(n int, s string) error {
	f := strings.Fields(s)
	r := rowsOf(p.cur)
	if p.cur.N == 0 || r == p.cur.N || len(f) == 0 || f[0] != strconv.Itoa(r) {
		return nil
	}
	if len(f) != p.cur.N+1 {
		return lineErr(toolP2P, n, s, "expected row %d with %d values", r, p.cur.N)
	}
	for col, v := range f[1:] {
		x, err := parseRate(v)
		if err != nil || x < 0 {
			return lineErr(toolP2P, n, s, "column %d: expected a number", col)
		}
		p.cur.Cells = append(p.cur.Cells, P2PCell{Row: r, Col: col, Value: x * p.scale})
	}
	return nil
}

// rowsOf counts the rows read so far: cells come a full row at a time.
func rowsOf(m *P2PMatrix) int {
	if m.N == 0 {
		return 0
	}
	return len(m.Cells) / m.N
}

func (p *p2pParser) flush() {
	if p.cur != nil && p.cur.N > 0 && rowsOf(p.cur) == p.cur.N {
		p.res.Matrices = append(p.res.Matrices, *p.cur)
	}
	if p.cur != nil && len(p.cur.Cells) > 0 {
		p.cur = nil
	}
}
