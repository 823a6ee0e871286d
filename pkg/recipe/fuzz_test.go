package recipe

import (
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
