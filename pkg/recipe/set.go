package recipe

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is one recipe file: its name (used in diagnostics and matched
// against the recipe's name) and its bytes.
type File struct {
	Name string
	Data []byte
}

// Options configure loading a set of recipes.
type Options struct {
	// ImagesDir is the images/ folder: a recipe's os.image.name must be a
	// folder there holding image.yaml. Empty skips the check.
	ImagesDir string
}

// Set is a loaded set of recipes with extends resolved.
type Set struct {
	byName map[string]*entry
}

// entry is one recipe file as loaded.
type entry struct {
	file      string
	root      *yaml.Node
	raw       *Recipe // the file alone, extends not applied
	resolved  *Recipe // extends applied (raw when resolution failed)
	positions map[string]pos
	merged    *yaml.Node
	state     resolution
}

// resolution is where resolving an entry's extends stands.
type resolution int

const (
	unresolved resolution = iota
	resolved
	failed // missing base or cycle: the entry keeps its own values only
)

// Names lists the recipe names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Get returns the named recipe with its base merged in.
func (s *Set) Get(name string) (*Recipe, bool) {
	e, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return e.resolved, true
}

// File returns the file the named recipe was read from.
func (s *Set) File(name string) string {
	if e, ok := s.byName[name]; ok {
		return e.file
	}
	return ""
}

// Len is the number of recipes.
func (s *Set) Len() int { return len(s.byName) }

// Parse reads one recipe file strictly and lints it on its own: every
// unknown field, type mismatch and bad value is reported, not only the
// first. Extends is not resolved (use LoadDir or Options.Build for that);
// in a recipe that extends another, fields of inherited mappings are not
// required. The recipe is nil only when the file is not YAML or is over
// MaxFileSize.
func Parse(filename string, data []byte) (*Recipe, []Diagnostic) {
	root, diags := parseYAML(filename, data)
	if root == nil {
		return nil, diags
	}
	files := nodeFiles(root, filename, nil)
	dec := newDecoder(filename, files, hasKey(root, "extends"))
	r := dec.decodeRecipe(root)
	l := &linter{file: filename, pos: dec.positions}
	l.lint(r)
	diags = append(append(diags, dec.diags...), l.diags...)
	return r, SortDiagnostics(diags)
}

// LoadDir loads every *.yaml and *.yml file of dir as one set, without the
// image check. See Options.Load.
func LoadDir(dir string) (*Set, []Diagnostic) {
	return Options{}.Load(dir)
}

// Load reads the given files and the *.yaml/*.yml files of the given
// directories (not recursively) and builds one set from them. A file is
// read with ReadFile: one over MaxFileSize is an error diagnostic, unread.
// For one file and only the bases it needs, see LoadFile.
func (o Options) Load(paths ...string) (*Set, []Diagnostic) {
	files, diags := ReadPaths(paths...)
	s, more := o.Build(files)
	return s, SortDiagnostics(append(diags, more...))
}

// Build parses, resolves and lints a set of recipe files together: strict
// decoding, extends (missing base, cycles), duplicate names, every semantic
// check, and the image check when ImagesDir is set. The set holds every
// recipe that has a name, even one with errors; check HasErrors.
func (o Options) Build(files []File) (*Set, []Diagnostic) {
	return o.build(files, beside{})
}

// build is Build, told what reading the files learnt of the recipes beside
// them that it did not read.
func (o Options) build(files []File, bs beside) (*Set, []Diagnostic) {
	b := &builder{opts: o, beside: bs, files: map[*yaml.Node]string{}, byName: map[string]*entry{}}
	var entries []*entry
	for _, f := range files {
		if e := b.load(f); e != nil {
			entries = append(entries, e)
		}
	}
	for _, e := range entries {
		b.checkDuplicate(e)
	}
	for _, e := range entries {
		b.resolve(e)
	}
	set := &Set{byName: map[string]*entry{}}
	for _, e := range entries {
		l := &linter{file: e.file, pos: e.positions, imagesDir: o.ImagesDir}
		l.lint(e.resolved)
		b.diags = append(b.diags, l.diags...)
		if n := e.raw.Name; n != "" && set.byName[n] == nil {
			set.byName[n] = e
		}
	}
	return set, SortDiagnostics(b.diags)
}

// builder holds the state of one Build.
type builder struct {
	diagnoser
	opts   Options
	beside beside
	files  map[*yaml.Node]string
	byName map[string]*entry // first file to claim each name
}

// load parses and decodes one file on its own.
func (b *builder) load(f File) *entry {
	root, diags := parseYAML(f.Name, f.Data)
	b.diags = append(b.diags, diags...)
	if root == nil {
		return nil
	}
	nodeFiles(root, f.Name, b.files)
	dec := newDecoder(f.Name, b.files, hasKey(root, "extends"))
	r := dec.decodeRecipe(root)
	b.diags = append(b.diags, dec.diags...)
	return &entry{file: f.Name, root: root, raw: r, resolved: r, positions: dec.positions}
}

// checkDuplicate reports a name already claimed by an earlier file.
func (b *builder) checkDuplicate(e *entry) {
	n := e.raw.Name
	if n == "" {
		return
	}
	first, ok := b.byName[n]
	if !ok {
		b.byName[n] = e
		return
	}
	fp := first.positions["name"]
	b.errorf(e.positions["name"], "name", "duplicate recipe name %q: also defined in %s:%d; names must be unique",
		n, first.file, fp.line)
}

// resolve merges e's base chain into e (memoized).
func (b *builder) resolve(e *entry) bool {
	switch e.state {
	case resolved:
		return true
	case failed:
		return false
	}
	if e.raw.Extends == "" {
		e.state, e.merged = resolved, e.root
		return true
	}
	e.state = failed // until proven otherwise; also stops recursion through a cycle
	if chain, ok := b.cycle(e); ok {
		b.errorf(e.positions["extends"], "extends", "extends cycle: %s", strings.Join(chain, " -> "))
		return false
	}
	base := b.byName[e.raw.Extends]
	if err := b.beside.unread[e.raw.Extends]; base == nil && err != nil {
		b.errorf(e.positions["extends"], "extends", "base recipe %q could not be read: %v", e.raw.Extends, err)
		return false
	}
	if base == nil {
		msg := fmt.Sprintf("no recipe named %q in this set", e.raw.Extends)
		if s := suggest(e.raw.Extends, b.names()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		b.errorf(e.positions["extends"], "extends", "%s", msg)
		return false
	}
	if !b.resolve(base) {
		b.errorf(e.positions["extends"], "extends", "base recipe %q has an unresolved extends; fix it first", base.raw.Name)
		return false
	}
	e.merged = mergeNodes(base.merged, e.root, b.files, true)
	dec := newDecoder(e.file, b.files, false)
	r := dec.decodeRecipe(e.merged)
	b.diags = append(b.diags, dec.diags...)
	e.resolved, e.positions, e.state = r, dec.positions, resolved
	return true
}

// cycle follows extends from e and returns the chain if it comes back to a
// recipe already in it.
func (b *builder) cycle(e *entry) ([]string, bool) {
	chain := []string{e.raw.Name}
	for cur := e; cur.raw.Extends != ""; {
		next := b.byName[cur.raw.Extends]
		if next == nil {
			return nil, false
		}
		chain = append(chain, next.raw.Name)
		if slices.Index(chain, next.raw.Name) < len(chain)-1 {
			return chain, true
		}
		cur = next
	}
	return nil, false
}

// names lists the recipe names a missing base may be a misspelling of:
// those loaded, and those of the files beside a missing base.
func (b *builder) names() []string {
	out := slices.Clone(b.beside.names)
	for n := range b.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// isIdentityKey reports whether a top-level key is never inherited from a
// base recipe: a recipe's name, version and extends are its own, and so
// is template (extending a template does not make a template).
func isIdentityKey(k string) bool {
	return k == "name" || k == "version" || k == "extends" || k == "template"
}

// mergeNodes deep-merges child over base: mappings merge key by key, the
// child's scalars and lists replace the base's, an empty (null) child value
// keeps the base's. New mapping nodes are
// attributed to the child's file.
func mergeNodes(base, child *yaml.Node, files map[*yaml.Node]string, top bool) *yaml.Node {
	base, child = deref(base), deref(child)
	if base == nil || base.Kind != yaml.MappingNode || child.Kind != yaml.MappingNode {
		return child
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: child.Tag, Line: child.Line, Column: child.Column}
	files[out] = files[child]
	idx := map[string]int{}
	for i := 0; i+1 < len(base.Content); i += 2 {
		k := deref(base.Content[i])
		if top && isIdentityKey(k.Value) {
			continue
		}
		idx[k.Value] = len(out.Content)
		out.Content = append(out.Content, base.Content[i], base.Content[i+1])
	}
	for i := 0; i+1 < len(child.Content); i += 2 {
		k, v := child.Content[i], child.Content[i+1]
		if j, ok := idx[deref(k).Value]; ok {
			if isNull(v) {
				continue // an empty key does not erase what the base says
			}
			out.Content[j], out.Content[j+1] = k, mergeNodes(out.Content[j+1], v, files, false)
			continue
		}
		idx[deref(k).Value] = len(out.Content)
		out.Content = append(out.Content, k, v)
	}
	return out
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func deref(n *yaml.Node) *yaml.Node {
	for hops := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && hops < 100; hops++ {
		n = n.Alias
	}
	return n
}

// nodeFiles records which file every node of a tree came from.
func nodeFiles(root *yaml.Node, file string, m map[*yaml.Node]string) map[*yaml.Node]string {
	if m == nil {
		m = map[*yaml.Node]string{}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if _, ok := m[n]; ok {
			return
		}
		m[n] = file
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(root)
	return m
}

// hasKey reports whether a mapping node has the key.
func hasKey(n *yaml.Node, key string) bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if deref(n.Content[i]).Value == key {
			return true
		}
	}
	return false
}
