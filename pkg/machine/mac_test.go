package machine

import (
	"errors"
	"strings"
	"testing"
)

// Every MAC input (enrolment, /ipxe?mac=, /uki/MAC.efi, the agent's
// credential, leases, the store) goes through NormalizeMAC: 6 bytes in any
// notation net.ParseMAC knows, nothing longer or shorter.
func TestNormalizeMAC(t *testing.T) {
	for name, c := range map[string]struct{ in, want, err string }{
		"colons":          {in: "52:54:00:12:34:56", want: "52:54:00:12:34:56"},
		"dashes, upper":   {in: "52-54-00-12-AB-CD", want: "52:54:00:12:ab:cd"},
		"dotted":          {in: "5254.0012.abcd", want: "52:54:00:12:ab:cd"},
		"spaces around":   {in: " 52:54:00:12:34:56 ", want: "52:54:00:12:34:56"},
		"EUI-64":          {in: "00:00:00:00:fe:80:00:00", err: "8 bytes: expected six hex bytes"},
		"EUI-64 dotted":   {in: "0000.0000.fe80.0000", err: "8 bytes"},
		"IPoIB, 20 bytes": {in: "80:00:02:08:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6b:2c:91", err: "20 bytes: expected six hex bytes"},
		"5 bytes":         {in: "52:54:00:12:34", err: "expected six hex bytes"},
		"7 bytes":         {in: "52:54:00:12:34:56:78", err: "expected six hex bytes"},
		"empty":           {in: "", err: "expected six hex bytes"},
		"not hex":         {in: "52:54:00:12:34:5g", err: "expected six hex bytes"},
		"a line break":    {in: "52:54:00:12:34:56\n7", err: "expected six hex bytes"},
	} {
		got, err := NormalizeMAC(c.in)
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) || c.err == "" && (err != nil || got != c.want) {
			t.Errorf("%s: NormalizeMAC(%q) = %q, %v; want %q, error %q", name, c.in, got, err, c.want, c.err)
		}
	}
	if _, err := NormalizeMAC("00:00:00:00:fe:80:00:00"); !errors.Is(err, ErrNotEthernet) {
		t.Errorf("an EUI-64: %v, want ErrNotEthernet", err)
	}
	if _, err := NormalizeMAC("52:54:00:12:34"); errors.Is(err, ErrNotEthernet) {
		t.Error("a malformed MAC is ErrNotEthernet; want that only for well-formed other lengths")
	}
	m := Machine{Name: "n1", MACs: []string{"00:00:00:00:fe:80:00:00"}}
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "macs[0]") {
		t.Errorf("Validate with an 8-byte MAC: %v", err)
	}
}

// FuzzNormalizeMAC: MACs come from query strings, paths, agents and BMCs;
// any input is refused or gives a canonical 6-byte MAC that normalizes to
// itself.
func FuzzNormalizeMAC(f *testing.F) {
	for _, s := range []string{"52:54:00:12:34:56", "52-54-00-12-ab-cd", "5254.0012.abcd", "00:00:00:00:fe:80:00:00",
		"80:00:02:08:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6b:2c:91", "0000.0000.fe80.0000", "", ":::::", "52:54:00:12:34:56%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeMAC(s)
		if err != nil {
			return
		}
		if len(got) != len("00:00:00:00:00:00") || strings.ToLower(got) != got {
			t.Fatalf("NormalizeMAC(%q) = %q: not a canonical 6-byte MAC", s, got)
		}
		if again, err := NormalizeMAC(got); err != nil || again != got {
			t.Fatalf("NormalizeMAC(%q) = %q, %v; want it unchanged", got, again, err)
		}
	})
}
