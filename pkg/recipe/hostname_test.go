package recipe

import (
	"strings"
	"testing"
)

func TestRenderHostname(t *testing.T) {
	v := HostnameVars{Recipe: "gpu-train-h100x8", Rack: "R12", Index: 3, Serial: "SN123", MAC: "52:54:00:AA:BB:CC"}
	cases := map[string]struct {
		pattern string
		vars    HostnameVars
		want    string // or "error: TEXT"
	}{
		"rack and padded index": {"h100-{rack}-{index:02d}", v, "h100-r12-03"},
		"plain index":           {"n{index}", v, "n3"},
		"mac without colons":    {"node-{mac}", v, "node-525400aabbcc"},
		"recipe and serial":     {"{recipe}-{serial}", v, "gpu-train-h100x8-sn123"},
		"no rack":               {"h100-{rack}-{index:02d}", HostnameVars{Index: 1}, "error: needs {rack}"},
		"unknown placeholder":   {"x-{row}", v, "error: unknown placeholder {row}"},
		"too long":              {strings.Repeat("a", 60) + "-{index:04d}", v, "error: expected 1-63 characters"},
		"bad character":         {"{serial}", HostnameVars{Serial: "SN/1"}, "error: is not a hostname character"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := RenderHostname(c.pattern, c.vars)
			if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("RenderHostname(%q) = %q, %v; want an error saying %q", c.pattern, got, err, want)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("RenderHostname(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
			}
		})
	}
}
