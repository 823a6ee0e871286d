package recipe

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, every diagnostic has a position, a file
// without errors gives a recipe that equals itself under Diff, and a set
// built from the file agrees with Parse on whether it has errors when no
// extends is involved. Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: x\nversion: '1'\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, diags := Parse("x.yaml", data)
		for _, d := range diags {
			if d.Line < 1 || d.Column < 1 || d.Message == "" || d.File != "x.yaml" {
				t.Fatalf("bad diagnostic %+v", d)
			}
		}
		if !HasErrors(diags) {
			if r == nil {
				t.Fatal("no errors and no recipe")
			}
			if c := Diff(r, r); len(c) != 0 {
				t.Fatalf("recipe differs from itself: %v", c)
			}
		}
		set, sdiags := Options{}.Build([]File{{Name: "x.yaml", Data: data}})
		for _, d := range sdiags {
			if d.Line < 1 || d.Column < 1 {
				t.Fatalf("bad set diagnostic %+v", d)
			}
		}
		if r != nil && r.Extends == "" && HasErrors(diags) != HasErrors(sdiags) {
			t.Fatalf("Parse errors %v, Build errors %v", diags, sdiags)
		}
		_ = set.Names()
	})
}

// FuzzQuantity: ParseQuantity never panics; what it reads prints back to
// text that reads as the same quantity, and JSON round-trips it. Seeds:
// testdata/fuzz/FuzzQuantity.
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"400Gbps", "2TiB", "350GB/s", "20GiB/s", "600Tflop/s", "50000Gflop/s", "1.5bps", "400", "-1Gbps"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuantity(s)
		if err != nil {
			return
		}
		if !q.Unit.Physical() || q.Value < 0 {
			t.Fatalf("ParseQuantity(%q) = %+v", s, q)
		}
		back, err := ParseQuantity(q.String())
		if err != nil || back != q {
			t.Fatalf("ParseQuantity(%q) = %+v prints %q, which reads as %+v (%v)", s, q, q.String(), back, err)
		}
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		var j Quantity
		if err := json.Unmarshal(b, &j); err != nil || j != q {
			t.Fatalf("JSON %s of %+v reads as %+v (%v)", b, q, j, err)
		}
	})
}

// FuzzFillPins: FillPins never panics, and a file it pins still parses
// with every pin it reports changed now holding the digest. Seeds: the
// FuzzParse corpus is a good start (testdata/fuzz/FuzzFillPins).
func FuzzFillPins(f *testing.F) {
	f.Add([]byte("name: x\nos:\n  image:\n    name: lab\n    sha256: '" + strings.Repeat("0", 64) + "'\n"))
	f.Add([]byte("name: x\nos:\n  agent:\n    kernel:\n      path: k\n"))
	sum := strings.Repeat("ab", 32)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, changes, err := FillPins("x.yaml", data, func(string) (string, error) { return sum, nil })
		if err != nil {
			return
		}
		root, diags := parseYAML("x.yaml", out)
		if root == nil || HasErrors(diags) {
			t.Fatalf("pinned file does not parse: %v\n%q", diags, out)
		}
		for _, c := range changes {
			m := lookupMapping(root, strings.Split(strings.TrimSuffix(c.Field, ".sha256"), "."))
			if v := mappingValue(m, "sha256"); v == nil || v.Value != sum {
				t.Fatalf("%s not pinned in %q", c.Field, out)
			}
		}
	})
}
