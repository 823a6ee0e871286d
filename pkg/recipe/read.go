package recipe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file reads recipe files from disk. Every read goes through ReadFile,
// which refuses a file over MaxFileSize from its size alone; a file named on
// its own is read with only the bases its extends chain names, never with
// the whole folder around it.

// MaxFileSize is the largest recipe file read, in bytes (1 MiB). A recipe is
// a few KiB of reviewed YAML; a bigger file is refused before it is read, so
// a stray image or log saved as .yaml beside the recipes costs no memory.
const MaxFileSize = 1 << 20

// SizeError is the error for a recipe file over MaxFileSize.
type SizeError struct {
	File  string
	Size  int64 // bytes
	Limit int64 // MaxFileSize
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d bytes (%s) for a recipe file; "+
		"a recipe is a few KiB of YAML: keep other files out of the recipes folder", e.File, e.Size, e.Limit, Size(e.Limit))
}

// CheckSize returns a *SizeError when size is over MaxFileSize.
func CheckSize(file string, size int64) error {
	if size > MaxFileSize {
		return &SizeError{File: file, Size: size, Limit: MaxFileSize}
	}
	return nil
}

// ReadFile reads one recipe file. A file over MaxFileSize (a *SizeError)
// and anything but a regular file (a named pipe would block, a device
// never end) are refused from os.Stat, without opening them; the read
// stops at the limit, so a file that grows after the check is refused too.
func ReadFile(name string) ([]byte, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file: expected a recipe YAML file", name, fileKind(st.Mode()))
	}
	if err := CheckSize(name, st.Size()); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := bytes.NewBuffer(make([]byte, 0, st.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if buf.Len() > MaxFileSize {
		size := int64(buf.Len())
		if st, err := f.Stat(); err == nil {
			size = max(size, st.Size())
		}
		return nil, CheckSize(name, size)
	}
	return buf.Bytes(), nil
}

// fileKind names what a file that is not a regular file is, for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// ReadPaths reads recipe files: each path is a file or a directory whose
// *.yaml and *.yml files are read, in name order. A file is read once; one
// that cannot be read (too large, not a regular file) is a diagnostic.
func ReadPaths(paths ...string) ([]File, []Diagnostic) {
	r := newReader()
	r.paths(paths)
	return r.files, r.diags
}

// Lint reads and lints the given files and folders as one set, as `ingot
// recipe lint` does. A folder's recipe files are all read; a file named on
// its own is read with only the bases its extends chain names, found beside
// it by name (a recipe named B lives in B.yaml or B.yml, which lint checks).
// It returns the diagnostics of the named files and of the folders' files,
// and how many such files there are.
func (o Options) Lint(paths ...string) ([]Diagnostic, int) {
	_, diags, n := o.loadNamed(paths)
	return diags, n
}

// LoadFile loads one recipe file with the bases its extends chain names
// (see Lint), and returns the set (the file's recipe and its bases) and
// the file's own diagnostics.
func (o Options) LoadFile(file string) (*Set, []Diagnostic) {
	set, diags, _ := o.loadNamed([]string{file})
	return set, diags
}

// loadNamed reads paths and their bases and builds them as one set; it
// keeps only the diagnostics of the files the paths name.
func (o Options) loadNamed(paths []string) (*Set, []Diagnostic, int) {
	r := newReader()
	r.paths(paths)
	r.bases()
	set, diags := o.build(r.files, r.beside)
	var out []Diagnostic
	for _, d := range append(r.diags, diags...) {
		if r.named[d.File] {
			out = append(out, d)
		}
	}
	return set, SortDiagnostics(out), r.count
}

// reader reads recipe files, each once.
type reader struct {
	files  []File
	diags  []Diagnostic
	failed map[string]error // by cleaned path: the files that could not be read
	seen   map[string]bool  // by cleaned path
	named  map[string]bool  // files the paths name, or in a folder they name
	alone  []File           // files named on their own: their bases are read
	count  int              // named files that exist
	beside beside
}

// beside is what reading bases learnt of recipes it did not load.
type beside struct {
	names  []string         // recipe files beside a missing base: suggestions
	unread map[string]error // a base whose file could not be read, and why
}

func newReader() *reader {
	return &reader{failed: map[string]error{}, seen: map[string]bool{}, named: map[string]bool{},
		beside: beside{unread: map[string]error{}}}
}

// paths reads each path: a folder's recipe files, or the file.
func (r *reader) paths(paths []string) {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			for _, n := range recipeFiles(p) {
				r.named[n] = true
				r.read(n)
			}
			continue
		}
		r.named[p] = true
		if f, ok := r.read(p); ok {
			r.alone = append(r.alone, f)
		}
	}
}

// read reads one file unless it was read already; ok is false when it
// was, or when it cannot be read (a diagnostic then says why).
func (r *reader) read(name string) (File, bool) {
	key := filepath.Clean(name)
	if r.seen[key] {
		return File{}, false
	}
	r.seen[key] = true
	data, err := ReadFile(name)
	if !errors.Is(err, fs.ErrNotExist) && r.named[name] {
		r.count++
	}
	if err != nil {
		r.failed[key] = err
		r.diags = append(r.diags, Diagnostic{File: name, Line: 1, Column: 1, Severity: SeverityError,
			Message: fmt.Sprintf("reading recipe: %v", err)})
		return File{}, false
	}
	f := File{Name: name, Data: data}
	r.files = append(r.files, f)
	return f, true
}

// bases reads, for each file named on its own, the chain of bases its
// extends names, each from the folder of the file that names it. It stops
// at a missing base, a base read already (a cycle, or a base two files
// share) and a name that cannot be a file; the build then says what is
// wrong.
func (r *reader) bases() {
	for _, f := range r.alone {
		for {
			name := extendsOf(f)
			if !nameRE.MatchString(name) {
				break
			}
			dir := filepath.Dir(f.Name)
			file, ok := baseFile(dir, name)
			if !ok {
				r.beside.names = append(r.beside.names, recipeNames(dir)...)
				break
			}
			next, ok := r.read(file)
			if !ok {
				if err := r.failed[filepath.Clean(file)]; err != nil {
					r.beside.unread[name] = err
				}
				break
			}
			f = next
		}
	}
}

// extendsOf is the name a recipe file's extends gives ("" for none, or
// when the file does not parse: the build reports that).
func extendsOf(f File) string {
	root, _ := parseYAML(f.Name, f.Data)
	root = deref(root)
	if root == nil || root.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if deref(root.Content[i]).Value == "extends" {
			if v := deref(root.Content[i+1]); v != nil && v.Kind == yaml.ScalarNode {
				return v.Value
			}
		}
	}
	return ""
}

// baseFile is the file of dir that holds the recipe named name.
func baseFile(dir, name string) (string, bool) {
	for _, ext := range []string{".yaml", ".yml"} {
		p := filepath.Join(dir, name+ext)
		if _, err := os.Lstat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// recipeNames lists the recipe names the files of dir are named for,
// without reading them.
func recipeNames(dir string) []string {
	var out []string
	for _, f := range recipeFiles(dir) {
		base := filepath.Base(f)
		out = append(out, strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml"))
	}
	return out
}

// recipeFiles lists the recipe files of a directory, sorted.
func recipeFiles(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if !e.IsDir() && IsRecipeFile(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// IsRecipeFile reports whether a file name looks like a recipe (.yaml or
// .yml); racks.yaml beside the recipes declares racks (pkg/rack).
func IsRecipeFile(name string) bool {
	if base := filepath.Base(name); base == "racks.yaml" || base == "racks.yml" {
		return false
	}
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}
