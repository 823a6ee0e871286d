package recipe

import (
	"slices"
	"strings"
	"testing"
)

// TestCheckRegistry: names are unique, each spec's stage and unit are one
// of the documented ones, Args are exactly the args lint checks, and
// LookupCheck finds each.
func TestCheckRegistry(t *testing.T) {
	units := []Unit{UnitNone, UnitCount, UnitGeneration, UnitBytes, UnitBitsPerSecond, UnitBytesPerSecond, UnitFlops}
	seen := map[string]bool{}
	for _, s := range Checks() {
		if seen[s.Name] {
			t.Errorf("check %s registered twice", s.Name)
		}
		seen[s.Name] = true
		if s.Stage != StageAgent && s.Stage != StageBurnIn {
			t.Errorf("%s: stage %q", s.Name, s.Stage)
		}
		if !slices.Contains(units, s.Unit) {
			t.Errorf("%s: unit %q", s.Name, s.Unit)
		}
		if s.Doc == "" {
			t.Errorf("%s: no doc", s.Name)
		}
		got, ok := LookupCheck(s.Name)
		if !ok || got.Name != s.Name || !slices.Equal(got.Args, s.Args) {
			t.Errorf("LookupCheck(%s) = %+v, %v", s.Name, got, ok)
		}
		d, _ := lookupDef(s.Name)
		if d.minNeeds != "" && !slices.Contains(s.Args, d.minNeeds) {
			t.Errorf("%s: min needs arg %s, which it does not take", s.Name, d.minNeeds)
		}
		if s.Unit.Physical() && !d.min && !d.max {
			t.Errorf("%s: a physical unit without a bound to read it", s.Name)
		}
	}
	want := map[string]Unit{
		"gpu-count": UnitCount, "gpu-model": UnitNone, "pcie-link": UnitGeneration, "memory-size": UnitBytes,
		"nic-link": UnitBitsPerSecond, "disk-present": UnitCount, "disk-health": UnitNone,
		"dcgm-diag": UnitNone, "gpu-burn": UnitFlops, "nccl-allreduce": UnitBytesPerSecond, "nvbandwidth": UnitBytesPerSecond,
		"stress-ng": UnitNone, "fio": UnitBytesPerSecond, "iperf3": UnitBitsPerSecond, "ib-write-bw": UnitBitsPerSecond,
		"cuda-bandwidth": UnitBytesPerSecond, "cuda-p2p": UnitBytesPerSecond, "cublas-gemm": UnitFlops, "clpeak": UnitFlops,
	}
	for name, u := range want {
		if s, ok := LookupCheck(name); !ok || s.Unit != u {
			t.Errorf("%s: %+v, want unit %s", name, s, u)
		}
	}
	if len(Checks()) != len(want) {
		t.Errorf("%d checks registered, want %d", len(Checks()), len(want))
	}
	if _, ok := LookupCheck("gpu-burnin"); ok {
		t.Error("LookupCheck found an unknown name")
	}
	if got := checkNames(StageAgent); !slices.Equal(got, []string{"gpu-count", "gpu-model", "pcie-link", "memory-size", "nic-link", "disk-present", "disk-health"}) {
		t.Errorf("agent checks %v", got)
	}
}

// TestCheckLint: cases beyond the broken folders.
func TestCheckLint(t *testing.T) {
	head := "name: x\nversion: '1'\nacceptance:\n  burn_in: {duration: 1h}\n  checks:\n"
	for name, tc := range map[string]struct {
		checks string
		want   string // "" = clean
	}{
		"optional burn-in check": {"    - {name: ib-write-bw, min: 380Gbps, optional: true}\n", ""},
		"all agent checks clean": {"    - {name: gpu-count, min: 8, max: 8}\n    - {name: gpu-model, min: 4, args: {model: H100}}\n" +
			"    - {name: pcie-link, min: 5, args: {width: '16', idle-downtrain: ok}}\n    - {name: memory-size, min: 2TiB, max: 4TiB, args: {tolerance: '2.5'}}\n" +
			"    - {name: nic-link, min: 400Gbps, count: 8}\n    - {name: disk-present, min: 2}\n    - {name: disk-health}\n", ""},
		"all burn-in checks clean": {"    - {name: dcgm-diag, args: {level: '3'}}\n    - {name: gpu-burn, min: 50000Gflop/s}\n" +
			"    - {name: nccl-allreduce, min: 350GB/s, args: {size: 8GiB}}\n    - {name: nvbandwidth, min: 20GiB/s, args: {testcase: device_to_device_memcpy_read_ce}}\n" +
			"    - {name: stress-ng, args: {memory: 64M}}\n    - {name: fio, min: 3GB/s}\n    - {name: iperf3, min: 90Gbps}\n" +
			"    - {name: cuda-bandwidth, min: 20GB/s}\n    - {name: cuda-p2p, min: 20GB/s, args: {matrix: bidirectional}}\n" +
			"    - {name: cublas-gemm, min: 5Tflop/s}\n    - {name: clpeak, min: 80Tflop/s, args: {test: compute-sp}}\n", ""},
		"count on another check":    {"    - {name: gpu-count, min: 8, count: 8}\n", "gpu-count reads no count; remove count"},
		"count without min":         {"    - {name: nic-link, count: 8}\n", "count says how many ports must be up at min: add min"},
		"count of zero":             {"    - {name: nic-link, min: 400Gbps, count: 0}\n", "expected a port count of at least 1, found 0"},
		"nvbandwidth latency":       {"    - {name: nvbandwidth, min: 1GB/s, args: {testcase: device_to_device_latency_sm}}\n", "a latency testcase measures no bandwidth"},
		"cuda-p2p disabled matrix":  {"    - {name: cuda-p2p, min: 1GB/s, args: {matrix: bidirectional-disabled}}\n", "expected unidirectional, unidirectional-read or bidirectional"},
		"clpeak integer test":       {"    - {name: clpeak, min: 1Tflop/s, args: {test: compute-integer}}\n", "expected compute-sp, compute-dp or compute-hp"},
		"min above max":             {"    - {name: memory-size, min: 4TiB, max: 2TiB}\n", "expected max >= min (4TiB), found 2TiB"},
		"fractional count":          {"    - {name: gpu-count, min: 7.5}\n", "expected a whole number (a count), found 7.5"},
		"gpu-model min alone":       {"    - {name: gpu-model, min: 4}\n", "gpu-model reads min only with args.model"},
		"threshold-less check":      {"    - {name: dcgm-diag, min: 1}\n", "dcgm-diag reads no min or max; remove min"},
		"tolerance range":           {"    - {name: memory-size, args: {tolerance: '150'}}\n", `expected a percentage from 0 to 100, e.g. 2, found "150"`},
		"stress-ng memory of 100%":  {"    - {name: stress-ng, args: {memory: 100%}}\n", "expected a percentage of memory from 1% to 99% (75%) or a size with K, M or G (64M, 8G)"},
		"stress-ng memory unitless": {"    - {name: stress-ng, args: {memory: '64'}}\n", "expected a percentage of memory from 1% to 99%"},
		"arg typo":                  {"    - {name: pcie-link, args: {widht: '16'}}\n", `(did you mean "width"?)`},
		"empty name":                {"    - {name: ''}\n", "expected a check name such as gpu-count"},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := Parse("x.yaml", []byte(head+tc.checks))
			got := diagText(diags)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got\n%s\nwant %q", got, tc.want)
			}
		})
	}
}

// TestTemplate: a template may keep placeholders, is never inherited,
// and IsTemplate says so.
func TestTemplate(t *testing.T) {
	zero := strings.Repeat("0", 64)
	base := "name: base\nversion: '1'\ntemplate: true\nos:\n  image: {name: lab, sha256: '" + zero + "'}\n"
	child := "name: child\nversion: '1'\nextends: base\nos:\n  image: {sha256: '" + strings.Repeat("a", 64) + "'}\n"
	inheriting := "name: inheriting\nversion: '1'\nextends: base\n"
	childTemplate := "name: child-template\nversion: '1'\nextends: base\ntemplate: true\n"
	set, diags := Options{}.Build([]File{{"base.yaml", []byte(base)}, {"child.yaml", []byte(child)},
		{"inheriting.yaml", []byte(inheriting)}, {"child-template.yaml", []byte(childTemplate)}})
	if len(diags) != 1 || diags[0].File != "inheriting.yaml" || diags[0].Line != 3 || diags[0].Field != "extends" ||
		!strings.Contains(diags[0].Message, "os.image.sha256 inherited from base (base.yaml:5) is the all-zero placeholder, and inheriting is not a template") {
		t.Errorf("want one error at inheriting.yaml:3, got:\n%s", diagText(diags))
	}
	for name, want := range map[string]bool{"base": true, "child": false, "inheriting": false, "child-template": true} {
		if r, _ := set.Get(name); r.IsTemplate() != want {
			t.Errorf("%s: IsTemplate() = %v, want %v", name, r.IsTemplate(), want)
		}
	}
	var nilRecipe *Recipe
	if nilRecipe.IsTemplate() {
		t.Error("a nil recipe is a template")
	}
}

func TestFirmwarePolicy(t *testing.T) {
	f := Firmware{GPU: Pin{Version: "96.00.74.00.01"}, BMC: Pin{Version: "7.1", Policy: FirmwareUpdate},
		Other:  map[string]Pin{"cpld": {Version: "1.0.4"}},
		Policy: map[string]FirmwareAction{"gpu": FirmwareWarn, "other.cpld": FirmwareWarn, "bios": FirmwareBlock}}
	for c, want := range map[string]FirmwareAction{"gpu": FirmwareWarn, "other.cpld": FirmwareWarn, "bios": FirmwareBlock,
		"bmc": FirmwareUpdate, "nic": FirmwareBlock, "other.hgx": FirmwareBlock} {
		if got := f.Action(c); got != want {
			t.Errorf("Action(%s) = %s, want %s", c, got, want)
		}
	}
	_, diags := Parse("x.yaml", []byte("name: x\nversion: '1'\nfirmware:\n  policy: {gpu: warn}\n"))
	if len(diags) != 1 || diags[0].Severity != SeverityWarning || !strings.Contains(diags[0].Message, "firmware.gpu is not pinned") {
		t.Errorf("policy without a pin:\n%s", diagText(diags))
	}
}

func TestBurnInDeadline(t *testing.T) {
	if d := (BurnIn{Duration: Duration(2 * 3600e9)}).Deadline(); d.String() != "2h30m" {
		t.Errorf("default deadline %s, want 2h30m", d)
	}
	if d := (BurnIn{Duration: Duration(2 * 3600e9), Timeout: Duration(4 * 3600e9)}).Deadline(); d.String() != "4h" {
		t.Errorf("deadline %s, want 4h", d)
	}
}
