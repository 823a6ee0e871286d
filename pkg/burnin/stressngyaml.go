package burnin

import (
	"strconv"
	"strings"
)

// ParseStressNGYAML parses the "metrics:" section of the file stress-ng
// writes with --yaml FILE. Only Stressors is filled: the file carries no
// pass/fail verdict, so judge a run by ParseStressNG on its log. Each entry
// needs stressor, bogo-ops and bogo-ops-per-second-real-time; a missing
// section or key wraps ErrIncomplete. Other keys (misc metrics) are ignored.
func ParseStressNGYAML(data []byte) (StressNGResult, error) {
	res, err := parseStressNGYAML(data)
	return res, cutLastLine(data, err)
}

// sngYAML holds the state of one ParseStressNGYAML call.
type sngYAML struct {
	res       StressNGResult
	cur       *StressNGStressor // entry being read
	seen      map[string]bool   // keys of cur
	inMetrics bool
}

func parseStressNGYAML(data []byte) (StressNGResult, error) {
	var p sngYAML
	for i, raw := range splitLines(data) {
		if err := p.line(i+1, strings.TrimRight(raw, " \t")); err != nil {
			return StressNGResult{}, err
		}
	}
	if err := p.closeEntry(0); err != nil {
		return StressNGResult{}, err
	}
	if len(p.res.Stressors) == 0 {
		return StressNGResult{}, incomplete(toolStressNG, "no entries under \"metrics:\"")
	}
	return p.res, nil
}

func (p *sngYAML) line(n int, line string) error {
	switch {
	case line == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		return nil
	case line == "---" || line == "..." || (line[0] != ' ' && line[0] != '-'): // a top-level key
		err := p.closeEntry(n)
		p.cur, p.inMetrics = nil, line == "metrics:"
		return err
	case !p.inMetrics:
		return nil
	}
	key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
	if !ok {
		return lineErr(toolStressNG, n, line, "expected \"key: value\"")
	}
	if k, isItem := strings.CutPrefix(key, "- "); isItem {
		if err := p.closeEntry(n); err != nil {
			return err
		}
		p.res.Stressors = append(p.res.Stressors, StressNGStressor{})
		p.cur, p.seen, key = &p.res.Stressors[len(p.res.Stressors)-1], map[string]bool{}, strings.TrimSpace(k)
	}
	if p.cur == nil {
		return lineErr(toolStressNG, n, line, "expected \"- stressor: NAME\"")
	}
	if err := sngYAMLSet(p.cur, key, strings.Trim(strings.TrimSpace(val), `'"`)); err != nil {
		return lineErr(toolStressNG, n, line, "%v", err)
	}
	p.seen[key] = true
	return nil
}

// closeEntry checks that the entry just read has the keys a verdict needs.
func (p *sngYAML) closeEntry(n int) error {
	if p.cur == nil {
		return nil
	}
	for _, k := range []string{"stressor", "bogo-ops", "bogo-ops-per-second-real-time"} {
		if !p.seen[k] {
			return &ParseError{Tool: toolStressNG, Line: n, Msg: "metrics entry " + strconv.Quote(p.cur.Name) + " has no " + k, Err: ErrIncomplete}
		}
	}
	return nil
}

func sngYAMLSet(s *StressNGStressor, key, val string) error {
	if key == "stressor" {
		s.Name = val
		return nil
	}
	if key == "bogo-ops" {
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return errorf("bogo-ops: expected a count")
		}
		s.BogoOps = v
		return nil
	}
	dst := map[string]*float64{
		"bogo-ops-per-second-real-time":    &s.OpsPerSec,
		"bogo-ops-per-second-usr-sys-time": &s.OpsPerCPUs,
		"wall-clock-time":                  &s.RealSec,
		"user-time":                        &s.UserSec,
		"system-time":                      &s.SystemSec,
	}[key]
	if dst == nil {
		return nil
	}
	v, err := parseFinite(val)
	if err != nil {
		return errorf("%s: expected a number", key)
	}
	*dst = v
	return nil
}
