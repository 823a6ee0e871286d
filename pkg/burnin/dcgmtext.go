package burnin

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	// "|-----  Deployment  --------+----...|" and "+-----  Stress  ---...+"
	dcgmCatRe = regexp.MustCompile(`^[|+]-+\s+(\S.*?)\s+-+\+`)
	// "Pass", "Fail - All", "Warn - GPUs: 0, 2", "Skip - GPU: 1"
	dcgmStatusRe = regexp.MustCompile(`^(Pass|Fail|Warn|Skip)(?: - (All|GPUs?: ([\d, ]+)))?$`)
	// DCGM 4 per-entity rows: "GPU0: Pass"
	dcgmEntityRe = regexp.MustCompile(`^([A-Za-z]+)(\d+): (Pass|Fail|Warn|Skip)$`)
	// DCGM 4 per-entity warning labels: "Warning: GPU0"
	dcgmEntityNameRe = regexp.MustCompile(`^([A-Za-z]+)(\d+)$`)
)

// dcgmTextInfoWidth is the width dcgmi wraps Warning and Info text at.
const dcgmTextInfoWidth = 45

// dcgmTable holds the state of one ParseDCGMText call.
type dcgmTable struct {
	res      DCGMResult
	category string
	started  bool         // saw the "| Diagnostic | Result |" header
	done     bool         // saw the closing border
	warning  *DCGMWarning // the warning continuation rows extend
	chunk    int          // length of the warning's last wrapped piece
}

// ParseDCGMText parses the table `dcgmi diag -r N` prints without -j, from
// DCGM 3 ("Pass - All", "Fail - GPU: 1") and DCGM 4 ("GPU0: Pass" rows).
// Warnings are joined from their 45-column wrapped pieces; Info rows are
// dropped. Prefer ParseDCGM: the table carries no error codes.
func ParseDCGMText(data []byte) (DCGMResult, error) {
	res, err := parseDCGMText(data)
	return res, cutLastLine(data, err)
}

func parseDCGMText(data []byte) (DCGMResult, error) {
	var t dcgmTable
	lines := splitLines(data)
	for i, line := range lines {
		if err := t.line(i+1, strings.TrimSpace(line)); err != nil {
			return DCGMResult{}, err
		}
		if t.done {
			break
		}
	}
	if !t.done {
		for _, line := range lines {
			if s := strings.TrimSpace(line); !t.started && strings.HasPrefix(s, "Error:") {
				return DCGMResult{}, &ParseError{Tool: toolDCGM, Msg: s, Err: ErrToolFailed}
			}
		}
		return DCGMResult{}, incomplete(toolDCGM, "no complete result table")
	}
	if len(t.res.Tests) == 0 {
		return DCGMResult{}, incomplete(toolDCGM, "the result table lists no tests")
	}
	return t.res, nil
}

func (t *dcgmTable) line(n int, s string) error {
	switch {
	case !t.started:
		t.started = strings.HasPrefix(s, "| Diagnostic") && strings.Contains(s, "| Result")
	case dcgmCatRe.MatchString(s):
		t.category, t.warning = dcgmCatRe.FindStringSubmatch(s)[1], nil
	case strings.HasPrefix(s, "+="):
		// the rule under the header
	case strings.HasPrefix(s, "+-"):
		t.done = strings.Trim(s, "+-") == ""
	case strings.HasPrefix(s, "|"):
		cells := strings.Split(strings.Trim(s, "|"), "|")
		if len(cells) != 2 {
			return lineErr(toolDCGM, n, s, "expected two table columns")
		}
		return t.row(n, s, strings.TrimSpace(cells[0]), cells[1])
	}
	return nil // not the table's: a notice or stderr between its rows
}

// row handles one "| name | cell |" row. cell keeps its padding: a wrapped
// warning piece may begin with a space that belongs to the message.
func (t *dcgmTable) row(n int, s, name, cell string) error {
	value := strings.TrimSpace(cell)
	if t.category == "Metadata" {
		switch name {
		case "DCGM Version":
			t.res.Version = value
		case "Driver Version Detected":
			t.res.DriverVersion = value
		case "GPU Device IDs Detected":
			t.res.GPUs = len(strings.Split(value, ","))
		}
		return nil
	}
	switch {
	case name == "Warning" || strings.HasPrefix(name, "Warning:"):
		return t.addWarning(n, s, name, value)
	case name == "Info" || strings.HasPrefix(name, "Info:"):
		t.warning = nil
	case name != "":
		return t.addTest(n, s, name, value)
	case len(t.res.Tests) == 0:
		return lineErr(toolDCGM, n, s, "a continuation row before any test")
	default:
		return t.continuation(n, s, cell, value)
	}
	return nil
}

// addTest starts a test at "| PCIe | Pass - All |".
func (t *dcgmTable) addTest(n int, s, name, value string) error {
	m := dcgmStatusRe.FindStringSubmatch(value)
	if m == nil {
		return lineErr(toolDCGM, n, s, "expected Pass, Fail, Warn or Skip")
	}
	t.res.Tests = append(t.res.Tests, DCGMTest{Category: t.category, Name: name, Status: DCGMStatus(m[1])})
	t.warning = nil
	return t.addGPUs(n, s, &t.res.Tests[len(t.res.Tests)-1], m)
}

// continuation handles a row with an empty name: more GPUs of the test,
// a DCGM 4 entity result, or the next piece of a wrapped warning.
func (t *dcgmTable) continuation(n int, s, cell, value string) error {
	test := &t.res.Tests[len(t.res.Tests)-1]
	if m := dcgmStatusRe.FindStringSubmatch(value); m != nil {
		t.warning = nil
		return t.addGPUs(n, s, test, m)
	}
	if m := dcgmEntityRe.FindStringSubmatch(value); m != nil {
		t.warning = nil
		return t.addEntity(n, s, test, m[1], m[2], DCGMStatus(m[3]))
	}
	if t.warning == nil {
		return nil
	}
	// Pieces are cut every 45 bytes; a piece shorter than that lost
	// trailing spaces to the padding.
	piece := strings.TrimRight(strings.TrimPrefix(cell, " "), " ")
	sep := " "
	if t.chunk >= dcgmTextInfoWidth {
		sep = ""
	}
	t.warning.Message += sep + piece
	t.chunk = len(piece)
	return nil
}

// addWarning attaches "Warning" (test-wide) or "Warning: GPU0" rows.
func (t *dcgmTable) addWarning(n int, s, name, value string) error {
	last := len(t.res.Tests) - 1
	if last < 0 {
		return lineErr(toolDCGM, n, s, "a warning before any test")
	}
	test := &t.res.Tests[last]
	target := &test.Warnings
	if ent := strings.TrimSpace(strings.TrimPrefix(name, "Warning:")); ent != name && ent != "" {
		if i := dcgmFindEntity(test, dcgmEntityNameRe.FindStringSubmatch(ent)); i >= 0 {
			target = &test.Entities[i].Warnings
		}
	}
	*target = append(*target, DCGMWarning{Message: value})
	t.warning, t.chunk = &(*target)[len(*target)-1], len(value)
	return nil
}

// addGPUs records the GPUs a "Fail - GPUs: 0, 1" row names; "- All"
// names every GPU of "GPU Device IDs Detected" (none when that is absent).
func (t *dcgmTable) addGPUs(n int, s string, test *DCGMTest, m []string) error {
	st := DCGMStatus(m[1])
	if m[2] == "All" {
		for i := range t.res.GPUs {
			test.Entities = append(test.Entities, DCGMEntityResult{Group: "GPU", ID: i, Status: st})
		}
		return nil
	}
	for _, f := range strings.Split(m[3], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if err := t.addEntity(n, s, test, "GPU", f, st); err != nil {
			return err
		}
	}
	return nil
}

func (t *dcgmTable) addEntity(n int, s string, test *DCGMTest, group, id string, st DCGMStatus) error {
	v, err := strconv.Atoi(id)
	if err != nil {
		return lineErr(toolDCGM, n, s, "entity ID out of range")
	}
	test.Entities = append(test.Entities, DCGMEntityResult{Group: group, ID: v, Status: st})
	if st.rank() > test.Status.rank() {
		test.Status = st
	}
	return nil
}

func dcgmFindEntity(test *DCGMTest, m []string) int {
	if m == nil {
		return -1
	}
	for i := len(test.Entities) - 1; i >= 0; i-- {
		if e := test.Entities[i]; e.Group == m[1] && strconv.Itoa(e.ID) == m[2] {
			return i
		}
	}
	return -1
}
