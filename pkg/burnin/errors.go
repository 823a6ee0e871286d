package burnin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Sentinel errors. Classify with errors.Is; every parser wraps one of these
// in a *ParseError when it applies.
const (
	// ErrIncomplete: the output ends before the tool printed its verdict
	// (the run was killed, timed out or crashed). Treat the node as not ready
	// and rerun; the numbers seen so far are not trustworthy.
	ErrIncomplete = sentinel("output ends early: the run did not finish")
	// ErrToolFailed: the tool itself reported that it could not run the test
	// (dcgmi runtime_error, iperf3 "error", an NCCL test failure).
	ErrToolFailed = sentinel("the tool reported that the test could not run")
	// ErrMiscompare: the tool checked the data it moved or computed and
	// found it wrong, then stopped (nvbandwidth's data-pattern assertion).
	// A hardware verdict: the node failed, the tool did not.
	ErrMiscompare = sentinel("the tool found wrong data and stopped")
)

// sentinel is a constant error, so the package needs no mutable globals.
type sentinel string

func (s sentinel) Error() string { return string(s) }

// ParseError is returned for output that is malformed, incomplete or reports
// a tool failure. Line is 1-based; 0 means the problem is not tied to a line.
type ParseError struct {
	Tool string // "gpu-burn", "dcgm", "nccl", ...
	Line int
	Text string // the offending line, trimmed; empty when Line is 0
	Msg  string // what was expected, for people
	Err  error  // ErrIncomplete, ErrToolFailed, or an underlying error; may be nil
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.Tool)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Text != "" {
		fmt.Fprintf(&b, ": %q", e.Text)
	}
	if e.Msg != "" {
		b.WriteString(": " + e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// lineErr builds a *ParseError for line n (1-based) with text.
func lineErr(tool string, n int, text, format string, args ...any) *ParseError {
	return &ParseError{Tool: tool, Line: n, Text: clip(strings.TrimSpace(text)), Msg: fmt.Sprintf(format, args...)}
}

// incomplete builds a *ParseError wrapping ErrIncomplete.
func incomplete(tool, format string, args ...any) *ParseError {
	return &ParseError{Tool: tool, Msg: fmt.Sprintf(format, args...), Err: ErrIncomplete}
}

// clip keeps error messages readable when a "line" is megabytes long.
func clip(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// splitLines splits data into lines, dropping a trailing "\r" from each, so
// index i holds line i+1. A final "\n" ends the last line; it does not
// start another.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// lineAt returns the 1-based line holding byte offset off of data.
func lineAt(data []byte, off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return min(bytes.Count(data[:off], []byte("\n"))+1, max(len(splitLines(data)), 1))
}

// lineOfKey returns the line of the first `"key"` in data, or 0.
func lineOfKey(data []byte, key string) int {
	i := bytes.Index(data, []byte(strconv.Quote(key)))
	if i < 0 {
		return 0
	}
	return lineAt(data, int64(i))
}

// decodeJSON decodes the first JSON object of data into v. Text before it
// (a warning, a notice) and after it (fio's normal output, stderr) is not
// the document and is skipped. The document starts on the first line
// whose first non-blank byte is "{" and decodes; when none decodes, the
// first candidate's error is returned: truncated input wraps
// ErrIncomplete, syntax and type errors name the line.
func decodeJSON(tool string, data []byte, v any) error {
	_, err := decodeJSONFrom(tool, data, 0, v)
	return err
}

// decodeJSONFrom is decodeJSON from offset from; it returns the offset
// just past the document it decoded, where the next one may start.
func decodeJSONFrom(tool string, data []byte, from int, v any) (int, error) {
	var first error
	for start := jsonStart(data, from); start >= 0; start = jsonStart(data, start+1) {
		end, err := decodeJSONAt(tool, data, start, v)
		if err == nil {
			return end, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return len(data), &ParseError{Tool: tool, Msg: "no JSON document", Err: ErrIncomplete}
	}
	return len(data), first
}

// jsonStart returns the offset of the first "{" at or after from that
// begins a line, or -1. Tools print a document's outer braces in column 0
// and indent what is inside, so a nested object is never taken for one.
func jsonStart(data []byte, from int) int {
	off := from
	if off > 0 && off <= len(data) && data[off-1] != '\n' { // mid-line: from the next line
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return -1
		}
		off += nl + 1
	}
	for off < len(data) {
		if data[off] == '{' {
			return off
		}
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return -1
		}
		off += nl + 1
	}
	return -1
}

// decodeJSONAt decodes one JSON value at data[start:].
func decodeJSONAt(tool string, data []byte, start int, v any) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data[start:]))
	err := dec.Decode(v)
	at := func(off int64) int { return lineAt(data, int64(start)+off) }
	if err == nil {
		return start + int(dec.InputOffset()), nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, &ParseError{Tool: tool, Line: len(splitLines(data)), Msg: "JSON document ends early", Err: ErrIncomplete}
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return 0, &ParseError{Tool: tool, Line: at(syn.Offset), Msg: "invalid JSON", Err: err}
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return 0, &ParseError{Tool: tool, Line: at(typ.Offset), Msg: fmt.Sprintf("field %q: expected %s, got JSON %s", typ.Field, typ.Type, typ.Value)}
	}
	return 0, &ParseError{Tool: tool, Msg: "decoding JSON", Err: err}
}

// cutLastLine marks a line error as ErrIncomplete when it is on the last
// line and the output does not end in a newline: the tool was stopped
// mid-line, the line is not malformed.
func cutLastLine(data []byte, err error) error {
	var pe *ParseError
	if err == nil || !errors.As(err, &pe) || pe.Err != nil || len(data) == 0 || data[len(data)-1] == '\n' {
		return err
	}
	if pe.Line == len(splitLines(data)) {
		pe.Err = ErrIncomplete
	}
	return err
}
