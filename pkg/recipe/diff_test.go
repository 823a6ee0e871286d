package recipe

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffSets diffs testdata/diff/old against testdata/diff/new: the
// changes people look for read as they would say them, and the whole
// output matches the golden file.
func TestDiffSets(t *testing.T) {
	oldSet, d1 := LoadDir("testdata/diff/old")
	newSet, d2 := LoadDir("testdata/diff/new")
	if len(d1)+len(d2) > 0 {
		t.Fatalf("diff fixtures have diagnostics:\n%s", diagText(append(d1, d2...)))
	}
	changes := DiffSets(oldSet, newSet)
	var b strings.Builder
	for _, c := range changes {
		b.WriteString(c.Recipe + ": " + c.Text + "\n")
	}
	out := b.String()
	for _, want := range []string{
		"base: BIOS SriovGlobalEnable: Disabled -> Enabled",
		"train: BIOS SriovGlobalEnable: Disabled -> Enabled", // inherited from the base
		"train: image sha256 changed: 1a2b3c4d… -> 9f8e7d6c…",
		"train: GPU count 8 -> 4",
		"base: added BIOS attribute MmioAbove4Gb = Enabled",
		`base: BIOS NumaNodesPerSocket: 1 (int) -> "1" (string)`,
		"base: driver nvidia: 535.129.03 -> 535.309.01",
		"train: burn-in duration 2h -> 4h",
		"train: cloud-init user-data changed",
		"train: BIOS firmware 1.7.2 -> 1.8.0",
		"train: added BIOS firmware package = 9f86d081…",
		"train: added BIOS firmware policy = update",
		"train: removed firmware pin cpld (was 1.0.4)",
		"train: added firmware pin hgx-baseboard apply time = ac-cycle",
		"infer: recipe added",
		"retired: recipe removed",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("diff lacks %q; got:\n%s", want, out)
		}
	}
	golden(t, filepath.Join("testdata", "diff", "diff.golden"), []byte(out))
}

func TestDiffSame(t *testing.T) {
	set, _ := LoadDir(filepath.Join(repoRoot(t), "recipes"))
	if c := DiffSets(set, set); len(c) != 0 {
		t.Errorf("a set differs from itself: %v", c)
	}
	if c := Diff(nil, nil); c != nil {
		t.Errorf("Diff(nil, nil) = %v", c)
	}
}

func TestDiffFields(t *testing.T) {
	for name, tc := range map[string]struct {
		old, new *Recipe
		want     string
	}{
		"removed attribute": {
			&Recipe{Name: "r", BIOS: BIOS{Attributes: map[string]Value{"X": StringValue("Y")}}},
			&Recipe{Name: "r"}, "removed BIOS attribute X (was Y)"},
		"added cpu": {&Recipe{Name: "r"}, &Recipe{Name: "r", Hardware: Hardware{CPU: &CPUSpec{Sockets: 2}}},
			"added CPU sockets = 2"},
		"memory": {&Recipe{Name: "r", Hardware: Hardware{Memory: &MemSpec{Total: 1 << 40}}},
			&Recipe{Name: "r", Hardware: Hardware{Memory: &MemSpec{Total: 2 << 40}}}, "memory 1TiB -> 2TiB"},
		"removed GPU group": {&Recipe{Name: "r", Hardware: Hardware{GPUs: []GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 8}}}},
			&Recipe{Name: "r"}, "removed hardware.gpus[0]: vendor=nvidia model=H100 count=8"},
		"second NIC group": {
			&Recipe{Name: "r", Hardware: Hardware{NICs: []NICSpec{{Role: "workload"}, {Role: "management", Speed: 10_000}}}},
			&Recipe{Name: "r", Hardware: Hardware{NICs: []NICSpec{{Role: "workload"}, {Role: "management", Speed: 25_000}}}},
			"NIC[1] speed 10Gbps -> 25Gbps"},
		"agent initrd": {&Recipe{Name: "r", OS: OS{Agent: AgentBoot{Initrd: Artifact{SHA256: strings.Repeat("a", 64)}}}},
			&Recipe{Name: "r", OS: OS{Agent: AgentBoot{Initrd: Artifact{SHA256: strings.Repeat("b", 64)}}}},
			"agent initrd sha256 changed: aaaaaaaa… -> bbbbbbbb…"},
	} {
		t.Run(name, func(t *testing.T) {
			got := Diff(tc.old, tc.new)
			if len(got) != 1 || got[0].Text != tc.want {
				t.Errorf("Diff = %+v, want one change %q", got, tc.want)
			}
		})
	}
}
