package recipe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds the work one file may cause (aliases can repeat a node
// many times); a real recipe has a few hundred nodes.
const maxNodes = 100_000

var (
	typeSize     = reflect.TypeFor[Size]()
	typeSpeed    = reflect.TypeFor[Speed]()
	typeDuration = reflect.TypeFor[Duration]()
	typeValue    = reflect.TypeFor[Value]()
	typeQuantity = reflect.TypeFor[Quantity]()

	typeFirmwareAction = reflect.TypeFor[FirmwareAction]()
	typePin            = reflect.TypeFor[Pin]()
)

// parseYAML reads one YAML document and returns its root node (nil when
// the file has none, does not parse or is over MaxFileSize: files that
// reach here without ReadFile, from git or a test, are bounded too).
func parseYAML(file string, data []byte) (root *yaml.Node, diags []Diagnostic) {
	if err := CheckSize(file, int64(len(data))); err != nil {
		return nil, []Diagnostic{{File: file, Line: 1, Column: 1, Severity: SeverityError, Message: err.Error()}}
	}
	defer func() {
		// yaml.v3 has panicked on hostile input before; a recipe file is
		// reviewed text, but lint must never crash on it.
		if r := recover(); r != nil {
			root = nil
			diags = append(diags, Diagnostic{File: file, Line: 1, Column: 1, Severity: SeverityError,
				Message: fmt.Sprintf("YAML parser failed on this file: %v", r)})
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []Diagnostic{{File: file, Line: 1, Column: 1, Severity: SeverityError,
				Message: "empty file: expected a recipe (a mapping with at least name and version)"}}
		}
		return nil, []Diagnostic{syntaxDiagnostic(file, err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		diags = append(diags, syntaxDiagnostic(file, err))
	default:
		diags = append(diags, Diagnostic{File: file, Line: max(extra.Line, 1), Column: max(extra.Column, 1),
			Severity: SeverityError, Message: "a second YAML document: expected exactly one recipe per file"})
	}
	root = &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	return root, diags
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// syntaxDiagnostic turns a yaml.v3 syntax error into a diagnostic at the
// line the error names (yaml.v3 reports no column).
func syntaxDiagnostic(file string, err error) Diagnostic {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(strings.Replace(msg, m[0]+":", "", 1))
	}
	return Diagnostic{File: file, Line: line, Column: 1, Severity: SeverityError,
		Message: "invalid YAML: " + msg}
}

// decoder walks a yaml.v3 node tree against a Go type by reflection,
// filling the value and recording every mismatch instead of stopping at the
// first. Keys are the json tags of the Go fields.
type decoder struct {
	diagnoser
	files     map[*yaml.Node]string // node -> file it came from (merged trees span files)
	file      string                // file of nodes missing from files
	partial   bool                  // the tree extends a base: do not require fields of inherited mappings
	positions map[string]pos        // field path -> position of its value
	budget    int
}

func newDecoder(file string, files map[*yaml.Node]string, partial bool) *decoder {
	return &decoder{files: files, file: file, partial: partial, positions: map[string]pos{}, budget: maxNodes}
}

func (d *decoder) posOf(n *yaml.Node) pos {
	f, ok := d.files[n]
	if !ok {
		f = d.file
	}
	return pos{file: f, line: n.Line, col: n.Column}
}

// decodeRecipe decodes root into a new Recipe.
func (d *decoder) decodeRecipe(root *yaml.Node) *Recipe {
	r := &Recipe{}
	if root == nil {
		return r
	}
	d.decode(root, reflect.ValueOf(r).Elem(), "")
	return r
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for hops := 0; n.Kind == yaml.AliasNode && n.Alias != nil && hops < 100; hops++ {
		n = n.Alias
	}
	if d.budget--; d.budget == 0 {
		d.errorf(d.posOf(n), path, "file too large or too many aliases: stopped after %d values", maxNodes)
	}
	if d.budget <= 0 {
		return
	}
	d.positions[path] = d.posOf(n)
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
	switch t := v.Type(); {
	case t == typeSize || t == typeSpeed || t == typeDuration:
		d.decodeUnit(n, v, path)
	case t == typeValue:
		d.decodeValue(n, v, path)
	case t == typeQuantity:
		d.decodeQuantity(n, v, path)
	case t == typePin && n.Kind != yaml.MappingNode:
		d.decodePin(n, v, path)
	case t.Kind() == reflect.Pointer:
		if isNull {
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
	case t.Kind() == reflect.Struct:
		if !isNull {
			d.decodeStruct(n, v, path)
		}
	case t.Kind() == reflect.Map:
		if !isNull {
			d.decodeMap(n, v, path)
		}
	case t.Kind() == reflect.Slice:
		if !isNull {
			d.decodeSlice(n, v, path)
		}
	default:
		d.decodeScalar(n, v, path)
	}
}

func (d *decoder) mismatch(n *yaml.Node, t reflect.Type, path string) {
	delete(d.positions, path) // not given as far as the semantic checks go
	d.errorf(d.posOf(n), path, "expected %s, found %s", expected(t), describe(n))
}

// structField is one YAML key of a Go struct.
type structField struct {
	key      string
	index    int
	required bool
	doc      string
}

// fieldsOf lists a struct's YAML keys (json tags), in declaration order.
func fieldsOf(t reflect.Type) []structField {
	var out []structField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		out = append(out, structField{key: name, index: i, required: !optional, doc: f.Tag.Get("doc")})
	}
	return out
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		d.mismatch(n, t, path)
		return
	}
	fields := fieldsOf(t)
	seen := map[string]bool{}
	merged := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key, ok := d.key(k, path)
		if !ok {
			merged = merged || k.ShortTag() == "!!merge"
			continue
		}
		if seen[key] {
			d.errorf(d.posOf(k), join(path, key), "field %q given twice in %s; keep one", key, where(path))
			continue
		}
		seen[key] = true
		j := slices.IndexFunc(fields, func(f structField) bool { return f.key == key })
		if j < 0 {
			d.unknownField(k, key, fields, path)
			continue
		}
		d.decode(val, v.Field(fields[j].index), join(path, key))
	}
	for _, f := range fields {
		if f.required && !seen[f.key] && !merged && (!d.partial || path == "") {
			d.errorf(d.posOf(n), join(path, f.key), "missing required field %q in %s", f.key, where(path))
		}
	}
}

// key checks that a mapping key is a plain string.
func (d *decoder) key(k *yaml.Node, path string) (string, bool) {
	if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
		d.errorf(d.posOf(k), path, "YAML merge keys (<<) are not supported in recipes; use extends: BASE to share settings")
		return "", false
	}
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
		d.errorf(d.posOf(k), path, "expected a string key, found %s", describe(k))
		return "", false
	}
	return k.Value, true
}

func (d *decoder) unknownField(k *yaml.Node, key string, fields []structField, path string) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.key
	}
	msg := fmt.Sprintf("unknown field %q in %s; expected one of: %s", key, where(path), strings.Join(names, ", "))
	if hint, ok := removedFields()[join(path, key)]; ok {
		msg += "; " + hint
	} else if s := suggest(key, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	d.errorf(d.posOf(k), join(path, key), "%s", msg)
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode || t.Key().Kind() != reflect.String {
		d.mismatch(n, t, path)
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key, ok := d.key(k, path)
		if !ok {
			continue
		}
		if seen[key] {
			d.errorf(d.posOf(k), join(path, key), "key %q given twice in %s; keep one", key, where(path))
			continue
		}
		seen[key] = true
		elem := reflect.New(t.Elem()).Elem()
		p := join(path, key)
		d.decode(val, elem, p)
		if _, ok := d.positions[p]; ok { // not a type mismatch
			v.SetMapIndex(reflect.ValueOf(key).Convert(t.Key()), elem)
		}
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.SequenceNode {
		d.mismatch(n, t, path)
		return
	}
	s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
	// List elements are never merged with a base, so their fields are
	// required even in a recipe that extends another.
	partial := d.partial
	d.partial = false
	for i, e := range n.Content {
		d.decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	d.partial = partial
	v.Set(s)
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	tag := ""
	if n.Kind == yaml.ScalarNode {
		tag = n.ShortTag()
	}
	switch v.Kind() {
	case reflect.String:
		if tag == "!!str" {
			v.SetString(n.Value)
			return
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		var i int64
		if tag == "!!int" && n.Decode(&i) == nil && !v.OverflowInt(i) {
			v.SetInt(i)
			return
		}
	case reflect.Float64, reflect.Float32:
		var f float64
		if (tag == "!!int" || tag == "!!float") && n.Decode(&f) == nil {
			v.SetFloat(f)
			return
		}
	case reflect.Bool:
		var b bool
		if tag == "!!bool" && n.Decode(&b) == nil {
			v.SetBool(b)
			return
		}
	}
	d.mismatch(n, v.Type(), path)
}

// decodeUnit reads a Size, Speed or Duration from a string scalar.
func (d *decoder) decodeUnit(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.mismatch(n, v.Type(), path)
		return
	}
	var (
		x   int64
		err error
	)
	switch v.Type() {
	case typeSize:
		var s Size
		s, err = ParseSize(n.Value)
		x = int64(s)
	case typeSpeed:
		var s Speed
		s, err = ParseSpeed(n.Value)
		x = int64(s)
	case typeDuration:
		var s Duration
		s, err = ParseDuration(n.Value)
		x = int64(s)
	}
	if err != nil {
		delete(d.positions, path)
		d.errorf(d.posOf(n), path, "%v", err)
		return
	}
	v.SetInt(x)
}

// decodeValue reads a BIOS attribute value; the YAML tag decides its type,
// so a quoted "1" is a string and an unquoted 1 an integer.
func (d *decoder) decodeValue(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str":
			v.Set(reflect.ValueOf(StringValue(n.Value)))
			return
		case "!!int":
			var i int64
			if n.Decode(&i) == nil {
				v.Set(reflect.ValueOf(IntValue(i)))
				return
			}
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				v.Set(reflect.ValueOf(BoolValue(b)))
				return
			}
		}
	}
	d.mismatch(n, v.Type(), path)
}

// removedFields explains fields recipes used to have.
func removedFields() map[string]string {
	return map[string]string{
		"acceptance.burn_in.min_tflops": "min_tflops was removed: give the gpu-burn check a min with its unit instead, e.g. min: 50000Gflop/s (per GPU)",
	}
}

// decodeQuantity reads a check threshold: an unquoted number is a plain
// number, a string must carry a unit (400Gbps). Whether the unit suits
// the check is lint's business (the check's name may come after min).
func (d *decoder) decodeQuantity(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!int", "!!float":
			var f float64
			if n.Decode(&f) == nil {
				if !(f >= 0 && f <= math.MaxFloat64) {
					delete(d.positions, path)
					d.errorf(d.posOf(n), path, "expected a finite number >= 0, found %s", n.Value)
					return
				}
				v.Set(reflect.ValueOf(Number(f)))
				return
			}
		case "!!str":
			if _, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64); err == nil {
				delete(d.positions, path)
				d.errorf(d.posOf(n), path, "expected an unquoted number, or a number with a unit such as 400Gbps; found string %q", n.Value)
				return
			}
			q, err := ParseQuantity(n.Value)
			if err != nil {
				delete(d.positions, path)
				d.errorf(d.posOf(n), path, "%v", err)
				return
			}
			v.Set(reflect.ValueOf(q))
			return
		}
	}
	d.mismatch(n, v.Type(), path)
}

// decodePin reads the string form of a firmware pin (`bios: 1.7.2`): the
// version alone. The mapping form is an ordinary struct.
func (d *decoder) decodePin(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		v.Set(reflect.ValueOf(Pin{Version: n.Value}))
		d.positions[join(path, "version")] = d.posOf(n)
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	delete(d.positions, path)
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		d.errorf(d.posOf(n), path, "expected a version string or a pin mapping, found number %s (quote it if it is a version: %q)", n.Value, n.Value)
		return
	}
	d.errorf(d.posOf(n), path, "expected a version string or a pin mapping (version, package, apply_time, policy, allow_downgrade, component), found %s", describe(n))
}
