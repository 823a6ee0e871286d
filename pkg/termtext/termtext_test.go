package termtext

import (
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		// Seen on a SeaBIOS serial console: a flush between isolinux's
		// write and its cursor move.
		"resync inside a line": {"ISOLINUX\r\ningo\x1b[05;04H\x1b[05;05Ht: iso test CD\r\nLoading", "ingot: iso test CD"},
		// The same at a line's first character: sercon writes a bare CR.
		"resync at column 0": {"x\r\ni\r\x1b[05;02Hngot: iso test CD\r\n", "ingot: iso test CD"},
		"colours and resets": {"\x1bc\x1b[?7l\x1b[2J\x1b[0mSeaBIOS\r\n\x1b[0;31;1mred\x1b[0m", "SeaBIOS\nred"},
		"backspace":          {"ab\bc", "ac"},
		"truncated escape":   {"ok\x1b[12", "ok"},
	} {
		got := Lines([]byte(tc.in))
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: Lines(%q) = %q, want it to hold %q", name, tc.in, got, tc.want)
		}
	}
	// Without rendering, the bytes do not hold the text: the reason for this package.
	if strings.Contains("i\r\x1b[05;02Hngot", "ingot") {
		t.Fatal("the raw stream holds the text")
	}
}

func FuzzLines(f *testing.F) {
	f.Add([]byte("ingo\x1b[05;04H\x1b[05;05Ht\r\n"))
	f.Add([]byte("\x1b[99999999999;99999999999H"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got := Lines(b); len(got) > 1100*len(b)+1 {
			t.Fatalf("%d bytes rendered to %d", len(b), len(got))
		}
	})
}
