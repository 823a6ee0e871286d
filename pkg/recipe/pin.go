package recipe

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// PinFields are the sha256 pins `ingot recipe pin` fills, each in the
// mapping that names the artifact.
func PinFields() []string {
	return []string{"os.image.sha256", "os.agent.kernel.sha256", "os.agent.initrd.sha256"}
}

// PinChange is one pin FillPins wrote.
type PinChange struct {
	Field string // os.image.sha256
	Line  int    // line of the value in the new file
	Old   string // the placeholder; "" when the key was added
	New   string
}

// FillPins returns data with every pin of PinFields that the file gives
// as the all-zero placeholder, or leaves out of a mapping it has (os.image
// without sha256), set to what digest returns for its field. Only those
// values change: comments, quoting and layout stay as they were. Pins the
// file does not hold (inherited from a base, or already a digest) are not
// touched. When digest fails for any pin, nothing is written and the
// error names every failure.
func FillPins(file string, data []byte, digest func(field string) (string, error)) ([]byte, []PinChange, error) {
	root, diags := parseYAML(file, data)
	if root == nil || HasErrors(diags) {
		msg := "not a recipe"
		if len(diags) > 0 {
			msg = diags[0].String()
		}
		return nil, nil, fmt.Errorf("cannot pin a file that does not parse: %s", msg)
	}
	lines := strings.SplitAfter(string(data), "\n")
	var (
		edits []pinEdit
		errs  []error
	)
	for _, field := range PinFields() {
		m := lookupMapping(root, strings.Split(strings.TrimSuffix(field, ".sha256"), "."))
		if m == nil {
			continue
		}
		val := mappingValue(m, "sha256")
		if val != nil && !(val.Kind == yaml.ScalarNode && IsPlaceholderSHA256(val.Value)) {
			continue
		}
		sum, err := digest(field)
		if err == nil && !sha256RE.MatchString(sum) {
			err = fmt.Errorf("the content store gave %q, expected 64 lowercase hex digits", sum)
		}
		var e pinEdit
		switch {
		case err != nil:
		case val != nil:
			e, err = valueEdit(lines, val, sum)
		default:
			e, err = insertEdit(lines, m, sum)
		}
		if err != nil {
			at := m
			if val != nil {
				at = val
			}
			errs = append(errs, fmt.Errorf("%s:%d: %s: %w", file, at.Line, field, err))
			continue
		}
		e.change.Field = field
		edits = append(edits, e)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	eol := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		eol = "\r\n"
	}
	slices.SortFunc(edits, func(a, b pinEdit) int { return cmp.Compare(b.line, a.line) })
	for _, e := range edits { // bottom-up: the line indexes above stay valid
		l := lines[e.line]
		if e.col >= 0 {
			lines[e.line] = l[:e.col] + e.text + l[e.col+e.oldLen:]
			continue
		}
		text := e.text + eol
		if !strings.HasSuffix(l, "\n") { // the last line, without one: keep the file ending so
			lines[e.line], text = l+eol, e.text
		}
		lines = slices.Insert(lines, e.line+1, text)
	}
	var changes []PinChange
	if len(edits) > 0 {
		changes = make([]PinChange, len(edits))
	}
	for i, e := range edits { // edits are bottom-up; changes top-down
		c := e.change
		c.Line = e.line + 1
		for _, o := range edits {
			if o.col < 0 && o.line < e.line {
				c.Line++
			}
		}
		if e.col < 0 {
			c.Line++
		}
		changes[len(edits)-1-i] = c
	}
	return []byte(strings.Join(lines, "")), changes, nil
}

// pinEdit is one change to a line of the file.
type pinEdit struct {
	change PinChange
	line   int    // 0-based line index
	col    int    // byte offset of the old value in the line; -1: add text as a new line after it
	oldLen int    // bytes of the old value, quotes included
	text   string // the new value, or the new line
}

// valueEdit replaces a placeholder value where it stands, in its quotes.
func valueEdit(lines []string, val *yaml.Node, sum string) (pinEdit, error) {
	if val.Line < 1 || val.Line > len(lines) {
		return pinEdit{}, errors.New("value outside the file")
	}
	l := lines[val.Line-1]
	col := byteOffset(l, val.Column-1)
	var q byte
	switch {
	case val.Style&yaml.DoubleQuotedStyle != 0:
		q = '"'
	case val.Style&yaml.SingleQuotedStyle != 0:
		q = '\''
	}
	old := quoteSHA(val.Value, q)
	if col < 0 || !strings.HasPrefix(l[col:], old) {
		return pinEdit{}, fmt.Errorf("expected %s at column %d; edit this pin by hand", old, val.Column)
	}
	if q == 0 && !plainString(sum) {
		q = '"' // a plain digest of digits only would read as a number
	}
	return pinEdit{change: PinChange{Old: val.Value, New: sum}, line: val.Line - 1, col: col, oldLen: len(old),
		text: quoteSHA(sum, q)}, nil
}

// insertEdit adds "sha256: DIGEST" under the first key of a block mapping
// that lacks it, at that key's indentation.
func insertEdit(lines []string, m *yaml.Node, sum string) (pinEdit, error) {
	if m.Style&yaml.FlowStyle != 0 {
		return pinEdit{}, errors.New("a flow mapping ({...}) without sha256: add it by hand")
	}
	if len(m.Content) < 2 {
		return pinEdit{}, errors.New("an empty mapping: add sha256 by hand")
	}
	k, v := m.Content[0], m.Content[1]
	if v.Kind != yaml.ScalarNode || v.Line != k.Line || v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 || k.Line > len(lines) {
		return pinEdit{}, fmt.Errorf("expected its first key %q on one line; add sha256 by hand", k.Value)
	}
	l := lines[k.Line-1]
	indent := l[:max(byteOffset(l, k.Column-1), 0)]
	if strings.Trim(indent, " ") != "" {
		return pinEdit{}, fmt.Errorf("expected only spaces before %q; add sha256 by hand", k.Value)
	}
	text := indent + "sha256: " + quoteSHA(sum, '"')
	// Under the first key, unless its value goes on over the next lines (a
	// quoted or plain scalar may), where the new line would land inside
	// it: then above the first key.
	if insertsKey(lines, k.Line-1, text, k, sum) {
		return pinEdit{change: PinChange{New: sum}, line: k.Line - 1, col: -1, text: text}, nil
	}
	if k.Line < 2 || !insertsKey(lines, k.Line-2, text, k, sum) {
		return pinEdit{}, fmt.Errorf("found no line for sha256 beside %q that keeps the file's meaning; add it by hand", k.Value)
	}
	return pinEdit{change: PinChange{New: sum}, line: k.Line - 2, col: -1, text: text}, nil
}

// insertsKey reports whether text, inserted after line index at, reads
// back as a sha256 key of the mapping whose first key is k.
func insertsKey(lines []string, at int, text string, k *yaml.Node, sum string) bool {
	trial := slices.Clone(lines)
	if !strings.HasSuffix(trial[at], "\n") {
		trial[at] += "\n"
	}
	trial = slices.Insert(trial, at+1, text+"\n")
	var doc yaml.Node
	if yaml.Unmarshal([]byte(strings.Join(trial, "")), &doc) != nil {
		return false
	}
	var found bool
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode && len(n.Content) >= 2 && n.Content[0].Line == k.Line && n.Content[0].Column == k.Column {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "sha256" && n.Content[i+1].Value == sum {
					found = true
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return found
}

func quoteSHA(sum string, q byte) string {
	if q == 0 {
		return sum
	}
	return string(q) + sum + string(q)
}

// plainString reports whether s written plain reads back as the string s.
func plainString(s string) bool {
	var n yaml.Node
	return yaml.Unmarshal([]byte(s), &n) == nil && len(n.Content) == 1 && n.Content[0].ShortTag() == "!!str" && n.Content[0].Value == s
}

// byteOffset turns a 0-based column in characters into a byte offset.
func byteOffset(l string, col int) int {
	n := 0
	for i := range l {
		if n == col {
			return i
		}
		n++
	}
	if n == col {
		return len(l)
	}
	return -1
}

// lookupMapping follows keys from a mapping node; nil when a key is absent
// or not a mapping.
func lookupMapping(n *yaml.Node, keys []string) *yaml.Node {
	for _, k := range keys {
		if n = mappingValue(n, k); n == nil {
			return nil
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	return n
}

// mappingValue is the value of key in a mapping node (aliases followed).
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if deref(m.Content[i]).Value == key {
			return deref(m.Content[i+1])
		}
	}
	return nil
}
