package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const (
	toolNvidiaSMI = "nvidia-smi"
	toolXID       = "xid"
)

var (
	smiBusRe  = regexp.MustCompile(`^([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])$`)
	smiLostRe = regexp.MustCompile(`^Unable to determine the device handle for (?:GPU)?\s*([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]): (.*)$`)
	// "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=..., GPU has fallen off the bus."
	// The parenthesis may hold more than the address (MIG: "PCI:0000:07:00
	// GPU-I:07"); the code may end the line ("..., 79" on old drivers).
	xidRe     = regexp.MustCompile(`NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?(?:\s[^)]*)?\): (\d+)(?:,\s*(.*))?$`)
	xidPIDRe  = regexp.MustCompile(`^pid=('?<unknown>'?|\d+),\s*`)
	xidNameRe = regexp.MustCompile(`^name=[^,]*,\s*`)
)

// GPUSample is one line of `nvidia-smi --query-gpu=index,pci.bus_id,
// temperature.gpu,power.draw,clocks_throttle_reasons.active
// --format=csv,noheader,nounits`. A nil field is a value nvidia-smi printed
// as "[N/A]", "[Not Supported]" or another bracketed reason.
type GPUSample struct {
	Index           int
	PCIBusID        string // as printed: "00000000:18:00.0"
	TempCelsius     *float64
	PowerWatts      *float64
	ThrottleReasons *uint64 // the clocks_throttle_reasons.active bitmask
}

// LostGPU is a GPU nvidia-smi could not reach ("Unable to determine the
// device handle for GPU 0000:3B:00.0: Unknown Error"), as after XID 79.
type LostGPU struct {
	PCIBusID string
	Reason   string
}

// GPUSamples is the parse of many sampling rounds.
type GPUSamples struct {
	Samples []GPUSample // in output order
	Lost    []LostGPU
}

// ByGPU groups the samples by GPU index, each in output order.
func (s GPUSamples) ByGPU() map[int][]GPUSample {
	out := map[int][]GPUSample{}
	for _, v := range s.Samples {
		out[v.Index] = append(out[v.Index], v)
	}
	return out
}

// ParseGPUSamples parses nvidia-smi CSV lines (see GPUSample) from any
// number of sampling rounds; blank lines are skipped.
func ParseGPUSamples(data []byte) (GPUSamples, error) {
	res, err := parseGPUSamples(data)
	return res, cutLastLine(data, err)
}

func parseGPUSamples(data []byte) (GPUSamples, error) {
	var res GPUSamples
	for i, raw := range splitLines(data) {
		n, line := i+1, strings.TrimSpace(raw)
		switch {
		case line == "":
		case smiLostRe.MatchString(line):
			m := smiLostRe.FindStringSubmatch(line)
			res.Lost = append(res.Lost, LostGPU{PCIBusID: m[1], Reason: m[2]})
		case strings.HasPrefix(line, "No devices were found"):
			return GPUSamples{}, &ParseError{Tool: toolNvidiaSMI, Line: n, Text: line, Err: ErrToolFailed}
		case line[0] < '0' || line[0] > '9':
			// not a sample: a warning nvidia-smi or the driver printed
		default:
			s, err := smiSample(line)
			if err != nil {
				return GPUSamples{}, lineErr(toolNvidiaSMI, n, line, "%v", err)
			}
			res.Samples = append(res.Samples, s)
		}
	}
	return res, nil
}

func smiSample(line string) (GPUSample, error) {
	f := strings.Split(line, ",")
	if len(f) != 5 {
		return GPUSample{}, errorf("expected 5 fields (index, pci.bus_id, temperature.gpu, power.draw, clocks_throttle_reasons.active), got %d", len(f))
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	var s GPUSample
	var err error
	if s.Index, err = strconv.Atoi(f[0]); err != nil || s.Index < 0 {
		return s, errorf("index %q: expected a GPU index", f[0])
	}
	if !smiBusRe.MatchString(f[1]) {
		return s, errorf("pci.bus_id %q: expected DDDDDDDD:BB:DD.F", f[1])
	}
	s.PCIBusID = f[1]
	if s.TempCelsius, err = smiFloat(f[2]); err != nil {
		return s, errorf("temperature.gpu %q: expected degrees C or [N/A]", f[2])
	}
	if s.PowerWatts, err = smiFloat(f[3]); err != nil {
		return s, errorf("power.draw %q: expected watts or [N/A]", f[3])
	}
	if !smiMissing(f[4]) {
		v, err := strconv.ParseUint(strings.TrimPrefix(f[4], "0x"), 16, 64)
		if err != nil || !strings.HasPrefix(f[4], "0x") {
			return s, errorf("clocks_throttle_reasons.active %q: expected 0x<hex> or [N/A]", f[4])
		}
		s.ThrottleReasons = &v
	}
	return s, nil
}

// smiMissing reports nvidia-smi's bracketed "no value": [N/A], [Not Supported], ...
func smiMissing(s string) bool { return strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") }

func smiFloat(s string) (*float64, error) {
	if smiMissing(s) {
		return nil, nil
	}
	v, err := parseFinite(s)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// XIDEvent is one NVIDIA driver Xid report from the kernel log.
type XIDEvent struct {
	Line    int    // 1-based line in the parsed log
	Raw     string // the line as printed, timestamp included: what tells two equal events apart
	PCI     string // as the driver prints it: "0000:18:00"
	Code    int    // 79: fallen off the bus, 48: DBE, 94/95: contained/uncontained ECC, ...
	PID     int    // -1 when not printed or "<unknown>"
	Message string // the rest, "GPU has fallen off the bus."
}

// XIDLog is the parse of a kernel log.
type XIDLog struct {
	Events []XIDEvent
}

// ParseXIDs finds "NVRM: Xid (PCI:DDDD:BB:DD): CODE, [pid=N, name=..., ]
// message" lines in dmesg or journalctl -k output; other lines are skipped.
// A line that names "NVRM: Xid" but does not fit is an error.
func ParseXIDs(data []byte) (XIDLog, error) {
	res, err := parseXIDs(data)
	return res, cutLastLine(data, err)
}

func parseXIDs(data []byte) (XIDLog, error) {
	var res XIDLog
	for i, raw := range splitLines(data) {
		n, line := i+1, strings.TrimSpace(raw)
		if !strings.Contains(line, "NVRM: Xid") {
			continue
		}
		m := xidRe.FindStringSubmatch(line)
		if m == nil {
			return XIDLog{}, lineErr(toolXID, n, line, "expected \"NVRM: Xid (PCI:DDDD:BB:DD): CODE, ...\"")
		}
		code, err := strconv.Atoi(m[2])
		if err != nil {
			return XIDLog{}, lineErr(toolXID, n, line, "Xid code out of range")
		}
		ev := XIDEvent{Line: n, Raw: line, PCI: m[1], Code: code, PID: -1, Message: m[3]}
		if p := xidPIDRe.FindStringSubmatch(ev.Message); p != nil {
			ev.PID = atoiOrMinus1(p[1])
			ev.Message = xidNameRe.ReplaceAllString(ev.Message[len(p[0]):], "")
		}
		res.Events = append(res.Events, ev)
	}
	return res, nil
}

func atoiOrMinus1(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return v
}

// NormalizePCI returns the "dddd:bb:dd" form (lower case, 4-digit domain, no
// function) of a PCI address as nvidia-smi ("00000000:18:00.0") or the
// driver ("0000:18:00") prints it, so samples and Xids can be matched.
func NormalizePCI(addr string) string {
	addr = strings.ToLower(addr)
	if i := strings.LastIndexByte(addr, '.'); i >= 0 {
		addr = addr[:i]
	}
	dom, rest, ok := strings.Cut(addr, ":")
	if ok && len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	if !ok {
		return addr
	}
	return dom + ":" + rest
}
