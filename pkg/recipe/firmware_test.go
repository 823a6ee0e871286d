package recipe

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const pkgSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// TestPinForms: the string form still reads as before (a version, policy
// block) and the mapping form carries every field; both round-trip through
// JSON, and a version-only pin keeps the string form (so the digest of a
// recipe that pins as before does not change).
func TestPinForms(t *testing.T) {
	src := "name: x\nversion: '1'\nfirmware:\n  bios: 1.7.2\n  gpu:\n    component: NVIDIA A40\n    version: 94.02.5C.00.03\n" +
		"    package: " + pkgSHA + "\n    apply_time: ac-cycle\n    policy: update\n    allow_downgrade: true\n" +
		"  other:\n    hgx-baseboard: {version: 1.5.0, package: " + pkgSHA + ", policy: update}\n"
	r, diags := Parse("x.yaml", []byte(src))
	if HasErrors(diags) || len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagText(diags))
	}
	want := Firmware{
		BIOS: Pin{Version: "1.7.2"},
		GPU: Pin{Component: "NVIDIA A40", Version: "94.02.5C.00.03", Package: pkgSHA, ApplyTime: ApplyACCycle,
			Policy: FirmwareUpdate, AllowDowngrade: true},
		Other: map[string]Pin{"hgx-baseboard": {Version: "1.5.0", Package: pkgSHA, Policy: FirmwareUpdate}},
	}
	if d := cmp.Diff(want, r.Firmware); d != "" {
		t.Fatalf("decoded (-want +got):\n%s", d)
	}
	if a := r.Firmware.Action("bios"); a != FirmwareBlock {
		t.Errorf("string form policy = %s, want block", a)
	}
	b, err := json.Marshal(r.Firmware)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"bios":"1.7.2"`) {
		t.Errorf("a version-only pin is not written in the string form: %s", b)
	}
	var back Firmware
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r.Firmware, back); d != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", d)
	}
	var keys []string
	for _, p := range r.Firmware.Pins() {
		keys = append(keys, p.Key+"="+string(p.Policy))
	}
	if got := strings.Join(keys, " "); got != "bios=block gpu=update other.hgx-baseboard=update" {
		t.Errorf("Pins() = %s", got)
	}
}

// TestPinDigestUnchanged: a recipe that pins with strings has the JSON it
// had before pins were objects.
func TestPinDigestUnchanged(t *testing.T) {
	b, err := json.Marshal(Firmware{BIOS: Pin{Version: "1.7.2"}, Other: map[string]Pin{"cpld": {Version: "1.0.4"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"bios":"1.7.2","other":{"cpld":"1.0.4"}}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}

// TestPinLint: every field is checked at its file:line.
func TestPinLint(t *testing.T) {
	zero := strings.Repeat("0", 64)
	for name, tc := range map[string]struct {
		src         string
		line        int
		field, want string
		warning     bool
	}{
		"update without package": {"firmware:\n  bmc:\n    version: '7.1'\n    policy: update\n", 6, "firmware.bmc.policy", "policy update needs a package", false},
		"update by policy map":   {"firmware:\n  bmc: '7.1'\n  policy: {bmc: update}\n", 4, "firmware.bmc", "policy update needs a package", false},
		"numeric component":      {"firmware:\n  other:\n    gpu0: {component: '4', version: '1'}\n", 5, "firmware.other.gpu0.component", "never by a vendor's numeric Id", false},
		"empty component":        {"firmware:\n  gpu: {component: '', version: '1'}\n", 4, "firmware.gpu.component", "expected a component name", false},
		"bad package":            {"firmware:\n  gpu: {version: '1', package: abc, policy: update}\n", 4, "firmware.gpu.package", "expected 64 lowercase hex digits", false},
		"placeholder package":    {"firmware:\n  gpu: {version: '1', package: '" + zero + "', policy: update}\n", 4, "firmware.gpu.package", "the all-zero placeholder is not a digest", false},
		"bad apply time":         {"firmware:\n  gpu: {version: '1', apply_time: reboot}\n", 4, "firmware.gpu.apply_time", "expected one of immediate, on-reset, ac-cycle", false},
		"bad apply time other":   {"firmware:\n  other:\n    cpld: {version: '1', apply_time: reboot}\n", 5, "firmware.other.cpld.apply_time", "expected one of immediate, on-reset, ac-cycle", false},
		"bad policy other":       {"firmware:\n  other:\n    cpld: {version: '1', policy: ignore}\n", 5, "firmware.other.cpld.policy", "expected one of update, block, warn", false},
		"empty version":          {"firmware:\n  bios: {version: ''}\n", 4, "firmware.bios.version", "expected a pinned version", false},
		"missing version":        {"firmware:\n  bios: {policy: warn}\n", 4, "firmware.bios.version", `missing required field "version"`, false},
		"number version":         {"firmware:\n  bmc: 7.10\n", 4, "firmware.bmc", `found number 7.10 (quote it if it is a version: "7.10")`, false},
		"list":                   {"firmware:\n  bmc: [1]\n", 4, "firmware.bmc", "expected a version string or a pin mapping", false},
		"policy conflict":        {"firmware:\n  gpu: {version: '1', policy: warn}\n  policy: {gpu: block}\n", 5, "firmware.policy.gpu", "keep one", false},
		"downgrade without update": {"firmware:\n  gpu: {version: '1', allow_downgrade: true}\n", 4, "firmware.gpu.allow_downgrade",
			"allow_downgrade only matters with policy update", true},
		"package without update": {"firmware:\n  gpu: {version: '1', package: " + pkgSHA + "}\n", 4, "firmware.gpu.package", "a package is only applied with policy update", true},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := Parse("x.yaml", []byte("name: x\nversion: '1'\n"+tc.src))
			if len(diags) != 1 {
				t.Fatalf("got %d diagnostics, want 1:\n%s", len(diags), diagText(diags))
			}
			d := diags[0]
			if d.Line != tc.line || d.Field != tc.field || !strings.Contains(d.Message, tc.want) || (d.Severity == SeverityWarning) != tc.warning {
				t.Errorf("got %s:%d %s %s: %s; want line %d field %s warning %v: %s", d.File, d.Line, d.Severity, d.Field, d.Message,
					tc.line, tc.field, tc.warning, tc.want)
			}
		})
	}
}
