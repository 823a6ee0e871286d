package recipe

import (
	"strings"
	"testing"
)

// os.agent.boot takes network (the default) or virtual-media, in lint and
// in the schema alike.
func TestAgentBoot(t *testing.T) {
	s := compileSchema(t)
	for _, tc := range []struct {
		boot    string
		wantErr string
		media   bool
	}{
		{"", "", false},
		{"network", "", false},
		{"virtual-media", "", true},
		{"pxe", `expected one of network, http, virtual-media, found "pxe"`, false},
	} {
		src := "name: x\nversion: '1'\nos:\n  agent:\n    cmdline: console=ttyS0\n"
		if tc.boot != "" {
			src += "    boot: " + tc.boot + "\n"
		}
		r, diags := Parse("x.yaml", []byte(src))
		text := diagText(diags)
		if tc.wantErr == "" {
			if HasErrors(diags) {
				t.Errorf("boot %q: %s", tc.boot, text)
				continue
			}
			if r.OS.Agent.VirtualMedia() != tc.media {
				t.Errorf("boot %q: VirtualMedia() = %v, want %v", tc.boot, !tc.media, tc.media)
			}
		} else if !strings.Contains(text, "os.agent.boot") || !strings.Contains(text, tc.wantErr) {
			t.Errorf("boot %q: lint says\n%s\nwant os.agent.boot: %s", tc.boot, text, tc.wantErr)
		}
		if schemaErr := s.Validate(yamlAsJSON(t, []byte(src))) != nil; schemaErr != (tc.wantErr != "") {
			t.Errorf("boot %q: schema rejects %v, want %v", tc.boot, schemaErr, tc.wantErr != "")
		}
	}
}
