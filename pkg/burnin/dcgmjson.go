package burnin

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The JSON of `dcgmi diag -j`. DCGM 2.x/3.x name the root "DCGM GPU
// Diagnostic" and keep version and driver beside it; DCGM 4 names it "DCGM
// Diagnostic", adds entity_groups and metadata, and gives each test a
// test_summary.
type dcgmDoc struct {
	V3         *dcgmDiag       `json:"DCGM GPU Diagnostic"`
	V4         *dcgmDiag       `json:"DCGM Diagnostic"`
	Version    string          `json:"version"`
	Driver     string          `json:"Driver Version Detected"`
	Metadata   dcgmMeta        `json:"metadata"`
	Iterations json.RawMessage `json:"iterations"`
	DeviceIDs  []string        `json:"GPU Device IDs"` // DCGM 3
	Groups     []struct {
		Group    string            `json:"entity_group"`
		Entities []json.RawMessage `json:"entities"`
	} `json:"entity_groups"` // DCGM 4
}

type dcgmMeta struct {
	Version string `json:"version"`
	Driver  string `json:"Driver Version Detected"`
}

type dcgmDiag struct {
	Categories   []dcgmCategory `json:"test_categories"`
	RuntimeError string         `json:"runtime_error"`
}

type dcgmCategory struct {
	Category string         `json:"category"`
	Tests    []dcgmTestJSON `json:"tests"`
}

type dcgmTestJSON struct {
	Name    string           `json:"name"`
	Results []dcgmResultJSON `json:"results"`
	Summary *dcgmResultJSON  `json:"test_summary"`
}

type dcgmResultJSON struct {
	GPUID       json.RawMessage   `json:"gpu_id"` // "0" per GPU; 0 on DCGM 3 deployment errors
	EntityGroup string            `json:"entity_group"`
	EntityID    *int              `json:"entity_id"`
	Status      string            `json:"status"`
	Warnings    []dcgmWarningJSON `json:"warnings"`
	Info        json.RawMessage   `json:"info"` // a string in DCGM 3, a list in DCGM 4
}

type dcgmWarningJSON struct {
	Warning  string `json:"warning"`
	Warnings string `json:"warnings"` // DCGM 3 deployment results use this key
	ErrorID  int    `json:"error_id"`
	Category int    `json:"error_category"`
	Severity int    `json:"error_severity"`
}

// ParseDCGM parses the JSON of `dcgmi diag -r N -j` from DCGM 2.x, 3.x or
// 4.x. A runtime_error wraps ErrToolFailed; the multi-iteration form
// (--iterations) is rejected.
func ParseDCGM(data []byte) (DCGMResult, error) {
	var doc dcgmDoc
	if err := decodeJSON(toolDCGM, data, &doc); err != nil {
		return DCGMResult{}, err
	}
	if doc.Iterations != nil {
		return DCGMResult{}, lineErr(toolDCGM, lineOfKey(data, "iterations"), "", "multi-iteration output is not supported; run dcgmi diag without --iterations")
	}
	diag := doc.V4
	if diag == nil {
		diag = doc.V3
	}
	if diag == nil {
		return DCGMResult{}, &ParseError{Tool: toolDCGM, Line: 1, Msg: `expected a "DCGM Diagnostic" or "DCGM GPU Diagnostic" object`}
	}
	if diag.RuntimeError != "" {
		return DCGMResult{}, &ParseError{Tool: toolDCGM, Line: lineOfKey(data, "runtime_error"), Msg: diag.RuntimeError, Err: ErrToolFailed}
	}
	if len(diag.Categories) == 0 {
		return DCGMResult{}, incomplete(toolDCGM, "no test_categories")
	}
	res := DCGMResult{Version: firstNonEmpty(doc.Metadata.Version, doc.Version), DriverVersion: firstNonEmpty(doc.Metadata.Driver, doc.Driver),
		GPUs: len(doc.DeviceIDs)}
	for _, g := range doc.Groups {
		if g.Group == "GPU" {
			res.GPUs = max(res.GPUs, len(g.Entities))
		}
	}
	for _, c := range diag.Categories {
		for _, t := range c.Tests {
			test, err := dcgmTest(c.Category, t)
			if err != nil {
				return DCGMResult{}, &ParseError{Tool: toolDCGM, Line: lineOfKey(data, t.Name), Msg: err.Error()}
			}
			res.Tests = append(res.Tests, test)
		}
	}
	if len(res.Tests) == 0 {
		return DCGMResult{}, incomplete(toolDCGM, "test_categories hold no tests")
	}
	return res, nil
}

func dcgmTest(category string, t dcgmTestJSON) (DCGMTest, error) {
	test := DCGMTest{Category: category, Name: t.Name, Status: DCGMSkip}
	for _, r := range t.Results {
		e, err := dcgmEntity(r)
		if err != nil {
			return DCGMTest{}, fmt.Errorf("test %q: %w", t.Name, err)
		}
		test.Entities = append(test.Entities, e)
		if e.Status.rank() > test.Status.rank() {
			test.Status = e.Status
		}
	}
	if t.Summary != nil {
		s, err := dcgmEntity(*t.Summary)
		if err != nil {
			return DCGMTest{}, fmt.Errorf("test %q summary: %w", t.Name, err)
		}
		test.Status, test.Warnings = s.Status, s.Warnings
	} else if len(t.Results) == 0 {
		return DCGMTest{}, fmt.Errorf("test %q has neither results nor test_summary", t.Name)
	}
	return test, nil
}

func dcgmEntity(r dcgmResultJSON) (DCGMEntityResult, error) {
	e := DCGMEntityResult{ID: -1, Status: DCGMStatus(r.Status)}
	if e.Status.rank() < 0 {
		return e, fmt.Errorf("status %q: expected Pass, Fail, Warn or Skip", r.Status)
	}
	switch {
	case r.EntityID != nil:
		e.Group, e.ID = r.EntityGroup, *r.EntityID
	case r.GPUID != nil && string(r.GPUID) != "null":
		id, err := dcgmGPUID(r.GPUID)
		if err != nil {
			return e, err
		}
		e.Group, e.ID = "GPU", id
	}
	for _, w := range r.Warnings {
		if msg := firstNonEmpty(w.Warning, w.Warnings); msg != "" {
			e.Warnings = append(e.Warnings, DCGMWarning{Message: msg, ErrorID: w.ErrorID, Category: w.Category, Severity: w.Severity})
		}
	}
	info, err := dcgmInfo(r.Info)
	e.Info = info
	return e, err
}

// dcgmGPUID accepts "3" (per-GPU results) and 3 (DCGM 3 deployment errors).
func dcgmGPUID(raw json.RawMessage) (int, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.Atoi(s)
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("gpu_id %s: expected a GPU index", raw)
	}
	return n, nil
}

// dcgmInfo accepts a string (DCGM 3) or a list of strings (DCGM 4).
func dcgmInfo(raw json.RawMessage) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("info %s: expected a string or a list of strings", clip(string(raw)))
	}
	return list, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
