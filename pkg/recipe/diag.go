package recipe

import (
	"cmp"
	"fmt"
	"slices"
)

// Severity says whether a diagnostic fails the lint.
type Severity string

// Severities. Only errors make `ingot recipe lint` exit non-zero.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is one problem found in a recipe file, at the position of the
// YAML node it is about.
type Diagnostic struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Column   int      `json:"column"`
	Field    string   `json:"field,omitempty"` // path such as hardware.gpus[0].count
	Message  string   `json:"message"`         // what was expected and what was found
	Severity Severity `json:"severity"`
}

// String formats the diagnostic as file:line:col: severity: field: message.
func (d Diagnostic) String() string {
	s := fmt.Sprintf("%s:%d:%d: %s: ", d.File, d.Line, d.Column, d.Severity)
	if d.Field != "" {
		s += d.Field + ": "
	}
	return s + d.Message
}

// HasErrors reports whether any diagnostic is an error.
func HasErrors(diags []Diagnostic) bool {
	return slices.ContainsFunc(diags, func(d Diagnostic) bool { return d.Severity == SeverityError })
}

// SortDiagnostics orders diagnostics by file, line, column, field and
// message, and drops exact duplicates (an inherited base value is checked
// once for the base and once for every recipe extending it).
func SortDiagnostics(diags []Diagnostic) []Diagnostic {
	slices.SortFunc(diags, func(a, b Diagnostic) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message), cmp.Compare(a.Severity, b.Severity))
	})
	return slices.Compact(diags)
}

// pos is where a value sits in a file.
type pos struct {
	file      string
	line, col int
}

// diagnoser collects diagnostics.
type diagnoser struct {
	diags []Diagnostic
}

func (d *diagnoser) add(sev Severity, p pos, field, format string, args ...any) {
	line, col := max(p.line, 1), max(p.col, 1)
	d.diags = append(d.diags, Diagnostic{File: p.file, Line: line, Column: col, Field: field,
		Message: fmt.Sprintf(format, args...), Severity: sev})
}

func (d *diagnoser) errorf(p pos, field, format string, args ...any) {
	d.add(SeverityError, p, field, format, args...)
}

func (d *diagnoser) warnf(p pos, field, format string, args ...any) {
	d.add(SeverityWarning, p, field, format, args...)
}
