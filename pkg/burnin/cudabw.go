package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolBandwidthTest = "bandwidthTest"

var (
	bwtStartRe  = regexp.MustCompile(`^\[CUDA Bandwidth Test\] - Starting\.\.\.`)
	bwtDeviceRe = regexp.MustCompile(`^Device (\d+): (.*)$`)
	// " Host to Device Bandwidth, 1 Device(s)"
	bwtKindRe = regexp.MustCompile(`^(Host to Device|Device to Host|Device to Device) Bandwidth, (\d+) Device\(s\)$`)
	// " PINNED Memory Transfers", " PAGEABLE Memory Transfers"
	bwtMemRe = regexp.MustCompile(`^(PINNED|PAGEABLE) Memory Transfers`)
	// "   Transfer Size (Bytes)	Bandwidth(GB/s)" (MB/s before CUDA 11)
	bwtHeadRe = regexp.MustCompile(`^Transfer Size \(Bytes\)\s+Bandwidth\((GB|MB)/s\)$`)
	// --csv: "bandwidthTest-H2D-Pinned, Bandwidth = 26.3 GB/s, Time = 0.00122 s, Size = 32000000 bytes, NumDevsUsed = 1"
	bwtCSVRe = regexp.MustCompile(`^bandwidthTest-(H2D|D2H|D2D)(?:-(\w+))?, Bandwidth = (\S+) (GB|MB)/s, Time = \S+ s, Size = (\d+) bytes, NumDevsUsed = (\d+)$`)
	// "Result = PASS" / "Result = FAIL"
	bwtResultRe = regexp.MustCompile(`^Result = (PASS|FAIL)$`)
	// helper_cuda.h's checkCudaErrors: "CUDA error at bandwidthTest.cu:860 code=2(cudaErrorMemoryAllocation) ..."
	cudaErrRe = regexp.MustCompile(`^CUDA error at \S+ code=(\d+)\((\w+)\)`)
)

// BandwidthTestResult is the output of one or more runs of the CUDA
// samples' bandwidthTest (11.x), e.g. one `bandwidthTest --device=N` per GPU.
type BandwidthTestResult struct {
	Runs []BandwidthTestRun
}

// BandwidthTestRun is one run: the devices it measured and its transfers.
// With more than one device (--device=all) bandwidthTest adds the devices'
// bandwidths together, so its numbers belong to no single GPU.
type BandwidthTestRun struct {
	Devices   []int // " Device N: NAME" under "Running on..."
	Transfers []BandwidthTestTransfer
	// Result is "PASS" or "FAIL" from the "Result =" line; "" when the run
	// stopped before it (Error says why, when the tool said).
	Result string
	Error  string // a "CUDA error at ..." line
	Line   int    // where the run starts
}

// BandwidthTestTransfer is one measured transfer size.
type BandwidthTestTransfer struct {
	Kind        string // "H2D", "D2H", "D2D"
	Memory      string // "pinned", "pageable" ("" for D2D)
	SizeBytes   int64
	BytesPerSec float64 // the tool prints GB/s (1e9; MB/s, 1e6, before CUDA 11)
	Devices     int     // "N Device(s)": more than 1 is a sum over devices
}

// bwtParser holds the state of one ParseBandwidthTest call.
type bwtParser struct {
	res            BandwidthTestResult
	kind, mem      string
	devs           int
	scale          float64 // bytes/s per printed unit; 0 outside a table
	runningDevices bool    // between "Running on..." and the first table
}

// ParseBandwidthTest parses bandwidthTest's output, readable or --csv, of
// one run or of several runs one after the other. Lines that are not
// bandwidthTest's are skipped. A run without its "Result =" line, or none
// at all, wraps ErrIncomplete; a run that stopped at a "CUDA error at"
// line wraps ErrToolFailed. The result holds every run either way.
func ParseBandwidthTest(data []byte) (BandwidthTestResult, error) {
	var p bwtParser
	for i, raw := range splitLines(data) {
		if err := p.line(i+1, strings.TrimSpace(raw)); err != nil {
			return p.res, err
		}
	}
	if len(p.res.Runs) == 0 {
		return p.res, incomplete(toolBandwidthTest, "no \"[CUDA Bandwidth Test] - Starting...\" run")
	}
	for _, r := range p.res.Runs {
		switch {
		case r.Error != "":
			return p.res, &ParseError{Tool: toolBandwidthTest, Line: r.Line, Msg: "run on device " + devList(r.Devices) + ": " + r.Error, Err: ErrToolFailed}
		case r.Result == "":
			return p.res, &ParseError{Tool: toolBandwidthTest, Line: r.Line, Msg: "run on device " + devList(r.Devices) + " has no \"Result =\" line", Err: ErrIncomplete}
		}
	}
	return p.res, nil
}

func devList(ds []int) string {
	if len(ds) == 0 {
		return "(none named)"
	}
	var s []string
	for _, d := range ds {
		s = append(s, strconv.Itoa(d))
	}
	return strings.Join(s, ",")
}

func (p *bwtParser) run() *BandwidthTestRun {
	if len(p.res.Runs) == 0 {
		p.res.Runs = append(p.res.Runs, BandwidthTestRun{Line: 1})
	}
	return &p.res.Runs[len(p.res.Runs)-1]
}

func (p *bwtParser) line(n int, s string) error {
	switch {
	case bwtStartRe.MatchString(s):
		p.res.Runs = append(p.res.Runs, BandwidthTestRun{Line: n})
		p.scale = 0
	case s == "Running on...":
		p.runningDevices = true
	case p.runningDevices && bwtDeviceRe.MatchString(s):
		d, _ := strconv.Atoi(bwtDeviceRe.FindStringSubmatch(s)[1])
		p.run().Devices = append(p.run().Devices, d)
	case bwtKindRe.MatchString(s):
		m := bwtKindRe.FindStringSubmatch(s)
		p.kind, p.mem, p.scale, p.runningDevices = map[string]string{"Host to Device": "H2D", "Device to Host": "D2H", "Device to Device": "D2D"}[m[1]], "", 0, false
		p.devs, _ = strconv.Atoi(m[2])
	case bwtMemRe.MatchString(s):
		p.mem = strings.ToLower(bwtMemRe.FindStringSubmatch(s)[1])
	case bwtHeadRe.MatchString(s):
		p.scale = map[string]float64{"GB": 1e9, "MB": 1e6}[bwtHeadRe.FindStringSubmatch(s)[1]]
	case bwtCSVRe.MatchString(s):
		return p.csv(n, s)
	case bwtResultRe.MatchString(s):
		p.run().Result, p.scale = bwtResultRe.FindStringSubmatch(s)[1], 0
	case cudaErrRe.MatchString(s):
		p.run().Error = clip(s)
	case p.scale != 0 && s == "":
		p.scale = 0
	case p.scale != 0:
		return p.row(n, s)
	}
	return nil
}

// row reads "32000000			26.3" under a table header.
func (p *bwtParser) row(n int, s string) error {
	f := strings.Fields(s)
	if len(f) != 2 || !digitsRe.MatchString(f[0]) {
		return nil // not a row: something printed between the rows
	}
	size, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return lineErr(toolBandwidthTest, n, s, "transfer size out of range")
	}
	bw, err := parseRate(f[1])
	if err != nil {
		return lineErr(toolBandwidthTest, n, s, "expected a bandwidth")
	}
	p.run().Transfers = append(p.run().Transfers, BandwidthTestTransfer{Kind: p.kind, Memory: p.mem, SizeBytes: size, BytesPerSec: bw * p.scale, Devices: p.devs})
	return nil
}

func (p *bwtParser) csv(n int, s string) error {
	m := bwtCSVRe.FindStringSubmatch(s)
	bw, err := parseRate(m[3])
	if err != nil {
		return lineErr(toolBandwidthTest, n, s, "expected a bandwidth")
	}
	size, err := strconv.ParseInt(m[5], 10, 64)
	if err != nil {
		return lineErr(toolBandwidthTest, n, s, "transfer size out of range")
	}
	devs, _ := strconv.Atoi(m[6])
	scale := map[string]float64{"GB": 1e9, "MB": 1e6}[m[4]]
	p.run().Transfers = append(p.run().Transfers, BandwidthTestTransfer{Kind: m[1], Memory: strings.ToLower(m[2]), SizeBytes: size, BytesPerSec: bw * scale, Devices: devs})
	return nil
}
