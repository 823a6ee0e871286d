package journal

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecode(t *testing.T) {
	entry := appendField(appendField(appendField(nil, "MESSAGE", "hi"), "ERR", "two\nlines"), "MESSAGE", "again")
	got, err := Decode(entry)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string][]string{"MESSAGE": {"hi", "again"}, "ERR": {"two\nlines"}}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range []string{"MESSAGE=no newline", "ERR\n\x05\x00\x00", "ERR\n\xff\xff\xff\xff\xff\xff\xff\xff\n", "ERR\n\x02\x00\x00\x00\x00\x00\x00\x00abX"} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(appendField(appendField(nil, "MESSAGE", "hi"), "ERR", "two\nlines"))
	f.Add([]byte("PRIORITY=6\nMESSAGE=x\n"))
	f.Add([]byte("X\n\x01\x00\x00\x00\x00\x00\x00\x00a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes encodes back to something that decodes the same.
		var again []byte
		for name, values := range fields {
			for _, v := range values {
				again = appendField(again, name, v)
			}
		}
		back, err := Decode(again)
		if err != nil || len(back) != len(fields) {
			t.Errorf("re-encoded %q: %v, %d fields, want %d", again, err, len(back), len(fields))
		}
	})
}
