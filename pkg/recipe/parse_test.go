package recipe

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseCollectsEveryError: one file with many problems reports all of
// them, each at its own line.
func TestParseCollectsEveryError(t *testing.T) {
	src := `name: every-error
version: 1.0.0
hardware:
  gpus:
    - vendor: nvidia
      model: H100
      count: "8"
      pcie_gen: 9
  cpu:
    sockts: 2
network:
  management_vlan: 5000
  pool: 10.0.0.0/40
bogus: true
`
	_, diags := Parse("every-error.yaml", []byte(src))
	var got []string
	for _, d := range diags {
		got = append(got, strings.Join([]string{itoa(d.Line), d.Field}, " "))
	}
	want := []string{"7 hardware.gpus[0].count", "8 hardware.gpus[0].pcie_gen", "10 hardware.cpu.sockts",
		"12 network.management_vlan", "13 network.pool", "14 bogus"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s\n%s", diff, diagText(diags))
	}
	if !strings.Contains(diags[2].Message, `did you mean "sockets"?`) {
		t.Errorf("no suggestion in %q", diags[2].Message)
	}
	if !strings.Contains(diags[0].Message, `expected an integer, found string "8"`) {
		t.Errorf("quoted count message = %q", diags[0].Message)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestValueTyping: the YAML tag decides a BIOS value's type.
func TestValueTyping(t *testing.T) {
	src := `name: typed
version: "1"
bios:
  attributes:
    Quoted: "1"
    Int: 1
    Hex: 0x10
    Bool: true
    Str: Enabled
    On: On
    Empty:
    Float: 1.5
`
	r, diags := Parse("typed.yaml", []byte(src))
	want := map[string]any{"Quoted": "1", "Int": int64(1), "Hex": int64(16), "Bool": true, "Str": "Enabled", "On": "On"}
	got := map[string]any{}
	for k, v := range r.BIOS.Attributes {
		got[k] = v.Any()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
	if len(diags) != 2 || diags[0].Field != "bios.attributes.Empty" || diags[1].Field != "bios.attributes.Float" ||
		!strings.Contains(diags[1].Message, "expected a string, an integer or a boolean, found number 1.5") {
		t.Errorf("diagnostics:\n%s", diagText(diags))
	}
}

func TestParseEdgeCases(t *testing.T) {
	for name, tc := range map[string]struct {
		src       string
		wantLine  int
		wantField string
		wantMsg   string
	}{
		"empty":            {"", 1, "", "empty file"},
		"comment only":     {"# nothing\n", 1, "", "empty file"},
		"not a mapping":    {"- a\n- b\n", 1, "", "expected a mapping, found a list"},
		"two documents":    {"name: x\nversion: '1'\n---\nname: y\n", 3, "", "a second YAML document"},
		"duplicate key":    {"name: x\nversion: '1'\nname: x\n", 3, "name", `field "name" given twice`},
		"int key":          {"name: x\nversion: '1'\ndrivers:\n  1: a\n", 4, "drivers", "expected a string key, found integer 1"},
		"null scalar":      {"name: x\nversion:\n", 2, "version", "expected a string, found an empty value"},
		"tab indentation":  {"name: x\n\tversion: 1\n", 2, "", "invalid YAML"},
		"bad speed":        {"name: x\nversion: '1'\nhardware:\n  nics:\n    - role: workload\n      speed: 400G\n", 6, "hardware.nics[0].speed", `speed "400G"`},
		"bad duration":     {"name: x\nversion: '1'\ntimeouts:\n  post: 15 minutes\n", 4, "timeouts.post", `duration "15 minutes"`},
		"list for mapping": {"name: x\nversion: '1'\nhardware: [a]\n", 3, "hardware", "expected a mapping, found a list"},
		"missing name":     {"version: '1'\n", 1, "name", `missing required field "name"`},
		"bad name":         {"name: GPU_Train\nversion: '1'\n", 1, "name", "expected lowercase letters, digits and dashes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := Parse("x.yaml", []byte(tc.src))
			for _, d := range diags {
				if d.Line == tc.wantLine && d.Field == tc.wantField && strings.Contains(d.Message, tc.wantMsg) {
					return
				}
			}
			t.Errorf("want %d: %s: %s; got:\n%s", tc.wantLine, tc.wantField, tc.wantMsg, diagText(diags))
		})
	}
}

// TestAliases: anchors and aliases decode like the values they name.
func TestAliases(t *testing.T) {
	src := `name: x
version: "1"
hardware:
  nics:
    - &cx7 {model: ConnectX-7, speed: 400Gbps, count: 4, role: workload}
    - *cx7
`
	r, diags := Parse("x.yaml", []byte(src))
	if len(diags) > 0 || len(r.Hardware.NICs) != 2 || r.Hardware.NICs[1].Speed != 400_000 {
		t.Errorf("nics %+v, diags:\n%s", r.Hardware.NICs, diagText(diags))
	}
}

// TestExtends: mappings merge, lists and scalars are replaced, an empty
// value keeps the base's, identity is never inherited.
func TestExtends(t *testing.T) {
	base := `name: base
version: 1.0.0
description: shared
bios:
  boot_mode: uefi
  attributes: {A: one, B: 2}
drivers: {nvidia: 535.309.01, cuda-driver: "12.2"}
acceptance:
  checks: [{name: gpu-count}, {name: nic-link}]
  burn_in: {duration: 1h}
`
	child := `name: child
version: 2.0.0
extends: base
bios:
  attributes: {B: 3, C: true}
drivers:
acceptance:
  checks: [{name: gpu-burn, min: 50000Gflop/s}]
`
	set, diags := Options{}.Build([]File{{"base.yaml", []byte(base)}, {"child.yaml", []byte(child)}})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", diagText(diags))
	}
	r, _ := set.Get("child")
	got := map[string]any{
		"name": r.Name, "version": r.Version, "description": r.Description, "boot_mode": r.BIOS.BootMode,
		"A": r.BIOS.Attributes["A"].Any(), "B": r.BIOS.Attributes["B"].Any(), "C": r.BIOS.Attributes["C"].Any(),
		"nvidia": r.Drivers["nvidia"], "checks": len(r.Acceptance.Checks), "check0": r.Acceptance.Checks[0].Name,
	}
	want := map[string]any{
		"name": "child", "version": "2.0.0", "description": "shared", "boot_mode": "uefi",
		"A": "one", "B": int64(3), "C": true, "nvidia": "535.309.01", "checks": 1, "check0": "gpu-burn",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged child (-want +got):\n%s", diff)
	}
	if set.File("child") != "child.yaml" || set.Len() != 2 {
		t.Errorf("File(child) = %q, Len = %d", set.File("child"), set.Len())
	}
	// The base is untouched by the merge.
	b, _ := set.Get("base")
	if b.BIOS.Attributes["B"].Any() != int64(2) || b.BIOS.Attributes["C"].Any() != nil {
		t.Errorf("base changed by the merge: %v", b.BIOS.Attributes)
	}
}

// TestExtendsErrorsInBase: an error in a base is reported once, in the
// base's file, not again for every child.
func TestExtendsErrorsInBase(t *testing.T) {
	base := "name: base\nversion: '1'\nnetwork:\n  management_vlan: 9999\n"
	a := "name: a\nversion: '1'\nextends: base\n"
	b := "name: b\nversion: '1'\nextends: base\n"
	_, diags := Options{}.Build([]File{{"base.yaml", []byte(base)}, {"a.yaml", []byte(a)}, {"b.yaml", []byte(b)}})
	if len(diags) != 1 || diags[0].File != "base.yaml" || diags[0].Line != 4 {
		t.Errorf("want one diagnostic at base.yaml:4, got:\n%s", diagText(diags))
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]string{
		"80GiB": "80GiB", "2TiB": "2TiB", "1TB": "1TB", "1.92TB": "1920GB", "512MiB": "512MiB", "1536MiB": "1536MiB",
		"3.84TB": "3840GB", "100B": "100B", " 4 GiB ": "4GiB",
	} {
		s, err := ParseSize(in)
		if err != nil || s.String() != want {
			t.Errorf("ParseSize(%q) = %v (%v), want %s", in, s, err, want)
		}
	}
	for _, bad := range []string{"80G", "80", "GiB", "-1GiB", "NaNGiB", "InfGiB", "1e30PiB", "80 gib"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"400Gbps": "400Gbps", "1000Mbps": "1Gbps", "1.6Tbps": "1600Gbps", "25Gbps": "25Gbps"} {
		s, err := ParseSpeed(in)
		if err != nil || s.String() != want {
			t.Errorf("ParseSpeed(%q) = %v (%v), want %s", in, s, err, want)
		}
	}
	for in, want := range map[string]string{"2h": "2h", "90s": "1m30s", "1h30m": "1h30m", "15m": "15m", "0s": "0s", "2h0m5s": "2h0m5s"} {
		d, err := ParseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseDuration(%q) = %v (%v), want %s", in, d, err, want)
		}
	}
}

// TestExtendsIntoCycle: a recipe whose base chain ends in a cycle names the
// whole chain.
func TestExtendsIntoCycle(t *testing.T) {
	f := func(name, base string) File {
		return File{name + ".yaml", []byte("name: " + name + "\nversion: '1'\nextends: " + base + "\n")}
	}
	_, diags := Options{}.Build([]File{f("a", "b"), f("b", "c"), f("c", "b"), f("self", "self")})
	var got []string
	for _, d := range diags {
		got = append(got, d.File+": "+d.Message)
	}
	want := []string{
		"a.yaml: extends cycle: a -> b -> c -> b",
		"b.yaml: extends cycle: b -> c -> b",
		"c.yaml: extends cycle: c -> b -> c",
		"self.yaml: extends cycle: self -> self",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
