package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

const toolStressNG = "stress-ng"

var (
	// "stress-ng: info:  [1234] msg", "stress-ng: 10:48:33.34 metrc: [1234] msg"
	sngPrefixRe = regexp.MustCompile(`^stress-ng:\s+(?:\d\d:\d\d:\d\d\.\d\d\s+)?(?:([a-z]+):\s+)?(?:\[\d+\]\s+)?`)
	sngCountRe  = regexp.MustCompile(`^(passed|failed|skipped|metrics untrustworthy): (\d+)(?:: (.*))?$`)
	sngNamesRe  = regexp.MustCompile(`(\S+) \((\d+)\)`)
	sngDoneRe   = regexp.MustCompile(`^(successful|unsuccessful) run completed`)
)

// StressNGResult is one stress-ng run with --metrics-brief.
type StressNGResult struct {
	Stressors []StressNGStressor
	// Instance counts from the "passed: N", "failed: N", "skipped: N" and
	// "metrics untrustworthy: N" lines (stress-ng 0.14 and later; 0 before).
	PassedInstances, FailedInstances, SkippedInstances, UntrustworthyInstances int
	// Successful: "successful run completed" (false: "unsuccessful").
	Successful bool
	// Failures are the messages of "fail:" lines.
	Failures []string
}

// StressNGStressor is one row of the metrics table. The rates are bogo
// operations per second: a stressor-specific work count, comparable only
// between runs of the same stressor, method and stress-ng version.
type StressNGStressor struct {
	Name       string
	BogoOps    int64
	RealSec    float64 // wall-clock run time
	UserSec    float64
	SystemSec  float64
	OpsPerSec  float64 // bogo ops/s over real time: the throughput to compare
	OpsPerCPUs float64 // bogo ops/s over usr+sys time
	// Status is "passed", "failed" or "skipped" as the summary lines name
	// the stressor; "" when stress-ng printed no per-stressor summary.
	Status string
}

// Passed reports a successful run with no failed instance, no "fail:"
// message and trustworthy metrics.
func (r StressNGResult) Passed() bool {
	return r.Successful && r.FailedInstances == 0 && r.UntrustworthyInstances == 0 && len(r.Failures) == 0 && len(r.Stressors) > 0
}

// ParseStressNG parses stress-ng's log (stderr) from a run with
// --metrics-brief, with or without --timestamp or --log-brief. Without the
// "successful/unsuccessful run completed" line the error wraps
// ErrIncomplete.
func ParseStressNG(data []byte) (StressNGResult, error) {
	res, err := parseStressNG(data)
	if err != nil {
		return StressNGResult{}, cutLastLine(data, err)
	}
	return res, nil
}

// sngParser holds the state of one ParseStressNG call.
type sngParser struct {
	res     StressNGResult
	status  map[string]string // stressor name -> passed/failed/skipped
	inTable bool
	done    bool // saw "run completed"
}

func parseStressNG(data []byte) (StressNGResult, error) {
	p := sngParser{status: map[string]string{}}
	for i, raw := range splitLines(data) {
		if err := p.line(i+1, strings.TrimSpace(raw)); err != nil {
			return p.res, err
		}
	}
	if !p.done {
		return p.res, incomplete(toolStressNG, "no \"run completed\" line")
	}
	for i := range p.res.Stressors {
		p.res.Stressors[i].Status = p.status[p.res.Stressors[i].Name]
	}
	return p.res, nil
}

func (p *sngParser) line(n int, line string) error {
	level, msg := sngSplit(line)
	f := strings.Fields(msg)
	switch {
	case level == "fail":
		p.res.Failures = append(p.res.Failures, msg)
	case len(f) > 2 && f[0] == "stressor" && f[1] == "bogo" && f[2] == "ops":
		p.inTable = true
	case p.inTable && strings.HasPrefix(msg, "(secs)"):
		// the units line under the header
	case p.inTable && len(f) >= 7 && digitsRe.MatchString(f[1]):
		s, err := sngRow(f)
		if err != nil {
			return lineErr(toolStressNG, n, line, "%v", err)
		}
		p.res.Stressors = append(p.res.Stressors, s)
	case sngCountRe.MatchString(msg):
		p.inTable = false
		if err := p.res.count(sngCountRe.FindStringSubmatch(msg), p.status); err != nil {
			return lineErr(toolStressNG, n, line, "%v", err)
		}
	case sngDoneRe.MatchString(msg):
		p.res.Successful, p.done = sngDoneRe.FindStringSubmatch(msg)[1] == "successful", true
	default:
		p.inTable = false
	}
	return nil
}

// sngSplit strips the "stress-ng: level: [pid]" prefix. Lines without it
// (--log-brief) have level "".
func sngSplit(line string) (level, msg string) {
	m := sngPrefixRe.FindStringSubmatch(line)
	if m == nil {
		return "", line
	}
	return m[1], strings.TrimSpace(line[len(m[0]):])
}

// sngRow parses "cpu 23782 10.00 39.92 0.00 2378.08 595.74 [more columns]".
func sngRow(f []string) (StressNGStressor, error) {
	s := StressNGStressor{Name: f[0]}
	var err error
	if s.BogoOps, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return s, errorf("bogo ops %q: %v", f[1], err)
	}
	for i, dst := range []*float64{&s.RealSec, &s.UserSec, &s.SystemSec, &s.OpsPerSec, &s.OpsPerCPUs} {
		if *dst, err = parseFinite(f[2+i]); err != nil {
			return s, errorf("column %d %q: expected a number", 3+i, f[2+i])
		}
	}
	return s, nil
}

// count records "passed: 8: cpu (4) vm (4)" and its siblings; a stressor
// named under "failed" stays failed.
func (r *StressNGResult) count(m []string, status map[string]string) error {
	v, err := strconv.Atoi(m[2])
	if err != nil {
		return errorf("count out of range")
	}
	switch m[1] {
	case "passed":
		r.PassedInstances = v
	case "failed":
		r.FailedInstances = v
	case "skipped":
		r.SkippedInstances = v
	default:
		r.UntrustworthyInstances = v
		return nil
	}
	for _, nm := range sngNamesRe.FindAllStringSubmatch(m[3], -1) {
		if status[nm[1]] != "failed" {
			status[nm[1]] = m[1]
		}
	}
	return nil
}
