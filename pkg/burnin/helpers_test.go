package burnin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture reads testdata/<name>.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtures returns every file under testdata/<dir>, for fuzz seeds.
func fixtures(t testing.TB, dir string) [][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// wantErr describes an expected error: a sentinel it wraps (may be nil),
// the line it names (0: any), and a substring of its text ("" : any).
type wantErr struct {
	is   error
	line int
	text string
}

// checkErr fails t unless err matches want; a nil want expects no error.
func checkErr(t *testing.T, tool string, err error, want *wantErr) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T), want a *ParseError", err, err)
	}
	if pe.Tool != tool {
		t.Errorf("error names tool %q, want %q", pe.Tool, tool)
	}
	if want.is != nil && !errors.Is(err, want.is) {
		t.Errorf("error %q does not wrap %q", err, want.is)
	}
	if want.line != 0 && pe.Line != want.line {
		t.Errorf("error %q names line %d, want %d", err, pe.Line, want.line)
	}
	if !strings.Contains(err.Error(), want.text) {
		t.Errorf("error %q does not contain %q", err, want.text)
	}
}

// checkFuzzErr is the invariant every parser's error keeps.
func checkFuzzErr(t *testing.T, tool string, data []byte, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ParseError", err, err)
	}
	if pe.Tool != tool || pe.Line < 0 || pe.Line > max(len(splitLines(data)), 1) || err.Error() == "" {
		t.Fatalf("bad error %#v for %d lines", pe, len(splitLines(data)))
	}
}

func ptr[T any](v T) *T { return &v }
