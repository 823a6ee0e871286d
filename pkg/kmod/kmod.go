// Package kmod finds Linux kernel modules by name in an unpacked kernel
// package and orders a set of them with all their dependencies so each
// module is loaded after the modules it needs. Dependencies come from each
// module's .modinfo ELF section (depends=), so no depmod run is needed.
package kmod

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Module is one kernel module to load.
type Module struct {
	// Name is the canonical name: dashes replaced by underscores.
	Name string
	// Path is the .ko file, as found under the index's root.
	Path string
	// Depends lists the canonical names of the modules it needs.
	Depends []string
}

// Index maps module names to files for one kernel version.
type Index struct {
	// Version is the kernel release, the folder name under lib/modules.
	Version string
	// Dir is root/lib/modules/Version.
	Dir     string
	files   map[string]string
	builtin map[string]bool
}

// ErrNotFound is wrapped when a requested module is neither a file nor built in.
var ErrNotFound = errors.New("kernel module not found")

// Canonical returns a module name in the kernel's own spelling: '-' is '_'.
func Canonical(name string) string {
	return strings.ReplaceAll(strings.TrimSpace(name), "-", "_")
}

// Open indexes the modules of the one kernel under root/lib/modules (root is
// e.g. a `dpkg -x` of a linux-image package). With several kernel versions
// there, version must name one; "" accepts a single one.
func Open(root, version string) (*Index, error) {
	base := filepath.Join(root, "lib", "modules")
	if version == "" {
		ents, err := os.ReadDir(base)
		if err != nil {
			return nil, fmt.Errorf("listing kernel versions: %w", err)
		}
		var vs []string
		for _, e := range ents {
			if e.IsDir() {
				vs = append(vs, e.Name())
			}
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("listing kernel versions in %s: found %q, expected exactly one (name one)", base, vs)
		}
		version = vs[0]
	}
	ix := &Index{Version: version, Dir: filepath.Join(base, version), files: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(ix.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return nil
		}
		n := Canonical(strings.TrimSuffix(d.Name(), ".ko"))
		if _, dup := ix.files[n]; !dup { // WalkDir is lexical: first path wins
			ix.files[n] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("indexing modules in %s: %w", ix.Dir, err)
	}
	if err := ix.readBuiltin(); err != nil {
		return nil, err
	}
	return ix, nil
}

// readBuiltin notes the modules compiled into the kernel (modules.builtin),
// which need no loading.
func (ix *Index) readBuiltin() error {
	f, err := os.Open(filepath.Join(ix.Dir, "modules.builtin"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading built-in modules: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		b := filepath.Base(strings.TrimSpace(s.Text()))
		ix.builtin[Canonical(strings.TrimSuffix(b, ".ko"))] = true
	}
	return s.Err()
}

// Builtin reports whether name is compiled into the kernel.
func (ix *Index) Builtin(name string) bool { return ix.builtin[Canonical(name)] }

// Path returns the .ko file of the named module.
func (ix *Index) Path(name string) (string, bool) {
	p, ok := ix.files[Canonical(name)]
	return p, ok
}

// Resolve returns names and every module they depend on, each once, ordered
// so that dependencies come before their dependents. The order is
// deterministic: a depth-first walk of names in the order given, each
// module's dependencies in sorted order. Built-in modules are left out.
func (ix *Index) Resolve(names []string) ([]Module, error) {
	r := resolver{ix: ix, state: map[string]int{}}
	for _, n := range names {
		if Canonical(n) == "" {
			continue
		}
		if err := r.visit(Canonical(n), nil); err != nil {
			return nil, err
		}
	}
	return r.out, nil
}

type resolver struct {
	ix    *Index
	state map[string]int // 1 visiting, 2 done
	out   []Module
}

func (r *resolver) visit(name string, chain []string) error {
	switch r.state[name] {
	case 2:
		return nil
	case 1:
		return fmt.Errorf("resolving module %s: dependency cycle %s", name, strings.Join(append(chain, name), " -> "))
	}
	p, ok := r.ix.files[name]
	if !ok {
		if r.ix.builtin[name] {
			r.state[name] = 2
			return nil
		}
		via := ""
		if len(chain) > 0 {
			via = " (needed by " + strings.Join(chain, " -> ") + ")"
		}
		return fmt.Errorf("resolving module %s%s: %w under %s", name, via, ErrNotFound, r.ix.Dir)
	}
	r.state[name] = 1
	info, err := ReadModinfo(p)
	if err != nil {
		return err
	}
	deps := Depends(info)
	for _, d := range deps {
		if err := r.visit(d, append(chain, name)); err != nil {
			return err
		}
	}
	r.state[name] = 2
	r.out = append(r.out, Module{Name: name, Path: p, Depends: deps})
	return nil
}

// Depends returns the sorted canonical names in a modinfo's depends= field.
func Depends(info map[string][]string) []string {
	var deps []string
	for _, v := range info["depends"] {
		for _, d := range strings.Split(v, ",") {
			if d = Canonical(d); d != "" {
				deps = append(deps, d)
			}
		}
	}
	sort.Strings(deps)
	return deps
}

// ReadModinfo reads the key=value strings of a module's .modinfo section.
func ReadModinfo(path string) (map[string][]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %w", path, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("reading module %s: no .modinfo section (expected in every kernel module)", path)
	}
	b, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("reading module %s .modinfo: %w", path, err)
	}
	return ParseModinfo(b), nil
}

// ParseModinfo splits a .modinfo section: NUL-separated key=value strings.
func ParseModinfo(b []byte) map[string][]string {
	info := map[string][]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if ok && k != "" {
			info[k] = append(info[k], v)
		}
	}
	return info
}
