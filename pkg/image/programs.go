package image

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// libDirs are where the dynamic loader of a Debian amd64 system looks for a
// library no RUNPATH names (ld.so.conf.d's multiarch folders, then the
// trusted defaults).
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// ProgramFiles returns the absolute paths a host program needs to run in
// another root: the program itself (found on PATH unless absolute), its ELF
// interpreter and every shared library it loads, directly or through
// another library, each at the path the host's loader finds it. A library
// the loader would not find is an error naming the program and the library.
func ProgramFiles(program string) ([]string, error) {
	path := program
	if !filepath.IsAbs(program) {
		p, err := exec.LookPath(program)
		if err != nil {
			return nil, fmt.Errorf("program %s: not found on this build host's PATH (install its Debian package)", program)
		}
		path = p
	}
	seen := map[string]bool{}
	queue := []string{path}
	for len(queue) > 0 {
		file := queue[0]
		queue = queue[1:]
		if seen[file] {
			continue
		}
		seen[file] = true
		deps, err := elfDeps(file)
		if err != nil {
			return nil, fmt.Errorf("program %s: %w", program, err)
		}
		queue = append(queue, deps...)
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out, nil
}

// elfDeps returns an ELF file's interpreter and the paths of the libraries
// its DT_NEEDED entries name, searched in its DT_RUNPATH (or DT_RPATH),
// then libDirs. A static program has none.
func elfDeps(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading %s as ELF: %w", file, err)
	}
	defer f.Close()
	var deps []string
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("reading the interpreter of %s: %w", file, err)
		}
		deps = append(deps, strings.TrimRight(string(b), "\x00"))
	}
	needed, err := f.DynString(elf.DT_NEEDED)
	if err != nil || len(needed) == 0 {
		return deps, nil // static, or no dynamic section
	}
	var search []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				search = append(search, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(file)))
			}
		}
	}
	search = append(search, libDirs...)
	for _, lib := range needed {
		found := ""
		for _, d := range search {
			p := filepath.Join(d, lib)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				found = p
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%s needs %s, which is in none of %s", file, lib, strings.Join(search, ", "))
		}
		deps = append(deps, found)
	}
	return deps, nil
}

// addPrograms copies each program's files (ProgramFiles) into root at the
// same paths, as regular files (a symlink's target content), executable.
func addPrograms(root string, programs []string, epoch int64) error {
	var errs []error
	for _, prog := range programs {
		files, err := ProgramFiles(prog)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				errs = append(errs, fmt.Errorf("program %s: %w", prog, err))
				continue
			}
			if err := writeStamped(filepath.Join(root, f), b, 0o755, epoch); err != nil {
				errs = append(errs, fmt.Errorf("program %s: copying %s into the root: %w", prog, f, err))
			}
		}
	}
	return errors.Join(errs...)
}
