package recipe

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedRecipes: every recipe in recipes/ is clean (no errors, no
// warnings) and extends resolves as documented.
func TestShippedRecipes(t *testing.T) {
	root := repoRoot(t)
	set, diags := Options{ImagesDir: filepath.Join(root, "testdata/recipes/images")}.Load(filepath.Join(root, "recipes"))
	if len(diags) > 0 {
		t.Fatalf("shipped recipes have diagnostics:\n%s", diagText(diags))
	}
	for _, n := range []string{"base-gpu", "gpu-train-h100x8", "gpu-infer-l40sx4", "lab-qemu"} {
		if _, ok := set.Get(n); !ok {
			t.Errorf("recipe %s missing from recipes/ (have %v)", n, set.Names())
		}
	}
	h, _ := set.Get("gpu-train-h100x8")
	if h == nil {
		t.Fatal("no gpu-train-h100x8")
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"own version", h.Version, "2.4.0"},
		{"extends", h.Extends, "base-gpu"},
		{"inherited BIOS attribute", h.BIOS.Attributes["SriovGlobalEnable"].Any(), "Enabled"},
		{"inherited bool attribute", h.BIOS.Attributes["ProcessorHyperThreadingDisable"].Any(), false},
		{"own int attribute", h.BIOS.Attributes["PcieMaxPayloadSize"].Any(), int64(512)},
		{"inherited boot mode", h.BIOS.BootMode, "uefi"},
		{"inherited driver", h.Drivers["nvidia"], "535.309.01"},
		{"own driver", h.Drivers["ofed"], "23.10-2.1.3.1"},
		{"inherited agent", h.OS.Agent.Kernel.Path, "agent-vmlinuz"},
		{"own image", h.OS.Image.Name, "debian-12-nvidia-cuda"},
		{"child's list replaces the base's", len(h.Acceptance.Checks), 12},
		{"GPU count", h.Hardware.GPUs[0].Count, 8},
		{"VRAM", h.Hardware.GPUs[0].MinVRAM, Size(79 << 30)},
		{"memory", h.Hardware.Memory.Total, Size(2 << 40)},
		{"NIC speed", h.Hardware.NICs[0].Speed, Speed(400_000)},
		{"burn-in", h.Acceptance.BurnIn.Duration.String(), "2h"},
		{"POST timeout from base", h.Timeouts.POST.String(), "15m"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %#v, want %#v", c.what, c.got, c.want)
		}
	}
	if l, _ := set.Get("gpu-infer-l40sx4"); l.BIOS.Attributes["ProcCStates"].Any() != "Enabled" {
		t.Errorf("l40s ProcCStates = %v, want its own override Enabled", l.BIOS.Attributes["ProcCStates"])
	}
}

// TestShippedRecipesAgainstImages lints recipes/ against the real images/:
// a recipe machines are assigned to is clean (its image locked and
// installing what it needs); the NVIDIA-repository classes stay templates
// whose warnings name the repository and the packages the image lacks
// (this project cannot reach NVIDIA's repositories to lock them).
func TestShippedRecipesAgainstImages(t *testing.T) {
	root := repoRoot(t)
	set, diags := Options{ImagesDir: filepath.Join(root, "images")}.Load(filepath.Join(root, "recipes"))
	byFile := map[string][]string{}
	for _, d := range diags {
		byFile[filepath.Base(d.File)] = append(byFile[filepath.Base(d.File)], d.Message)
		if r, ok := set.Get(strings.TrimSuffix(filepath.Base(d.File), ".yaml")); d.Severity == SeverityError || !ok || !r.IsTemplate() || (d.Field != "os.image.name" && d.Field != "extends") {
			t.Errorf("%s:%d: %s: %s: only a template may have findings, and only about its image", d.File, d.Line, d.Severity, d.Message)
		}
	}
	for _, file := range []string{"gpu-train-h100x8.yaml", "gpu-infer-l40sx4.yaml", "gpu-train-h200x8.yaml"} {
		got := strings.Join(byFile[file], "\n")
		for _, want := range []string{"image debian-12-nvidia-cuda has no packages.lock", "configure and lock its repositories cuda (https://developer.download.nvidia.com/",
			"mlnx-ofed or doca-ofed (drivers.ofed, from NVIDIA's DOCA repository"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: lint says\n%s\nwant %q", file, got, want)
			}
		}
	}
}

// wantDiag is one expected diagnostic: its line, field and a part of its
// message.
type wantDiag struct {
	file  string // base name; "" = the case's own file
	line  int
	field string
	msg   string
}

// TestBrokenRecipes: each folder of testdata/recipes/broken is one broken
// set; every expected diagnostic appears at its line, nothing else does,
// and the full text matches the folder's lint.golden.
func TestBrokenRecipes(t *testing.T) {
	cases := map[string][]wantDiag{
		"unknown-field": {{"", 4, "hardware.gpu", `unknown field "gpu" in hardware; expected one of: gpus, cpu, memory, nics, psus, disks (did you mean "gpus"?)`}},
		"wrong-type": {
			{"", 7, "hardware.gpus[0].count", `expected an integer, found string "eight"`},
			{"", 10, "hardware.memory.dimms", "expected an integer, found a list"},
		},
		"bad-sha256": {
			{"", 6, "os.image.sha256", "expected 64 lowercase hex digits"},
			{"", 9, "os.agent.kernel.sha256", `expected 64 lowercase hex digits, found "abc123" (6 characters)`},
		},
		"vlan-range": {
			{"", 4, "network.management_vlan", "expected 1 to 4094, found 5000"},
			{"", 5, "network.workload_vlan", "expected 1 to 4094, found 0"},
		},
		"negative-count": {
			{"", 7, "hardware.gpus[0].count", "expected a positive number, found -2"},
			{"", 9, "hardware.psus.count", "expected a positive number, found 0"},
		},
		"missing-base": {{"", 3, "extends", `no recipe named "base-gpus" in this set (did you mean "base-gpu"?)`}},
		"extends-cycle": {
			{"cycle-a.yaml", 3, "extends", "extends cycle: cycle-a -> cycle-b -> cycle-a"},
			{"cycle-b.yaml", 3, "extends", "extends cycle: cycle-b -> cycle-a -> cycle-b"},
		},
		"duplicate-name": {{"dup.yaml", 1, "name", `duplicate recipe name "dup": also defined in testdata/recipes/broken/duplicate-name/copy/dup.yaml:2`}},
		"bad-size-unit": {
			{"", 8, "hardware.gpus[0].min_vram", `size "80G": expected a number and a unit`},
			{"", 10, "hardware.memory.total", "expected a size with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 80GiB, found integer 2048"},
		},
		"two-boot-disks": {
			{"", 5, "hardware.disks", "expected exactly one boot disk rule (boot: true), found 2 (disks[0], disks[1])"},
			{"", 9, "hardware.disks[1].max_size", "expected max_size >= min_size (1TB), found 500GB"},
		},
		"bad-pcie": {
			{"", 8, "hardware.gpus[0].pcie_gen", "expected 1 to 6, found 7"},
			{"", 9, "hardware.gpus[0].pcie_width", "expected one of 1, 2, 4, 8, 16, found 12"},
		},
		"image-missing": {{"", 5, "os.image.name", `image "ubuntu-22-04" not found: expected`}},
		"name-mismatch": {{"", 1, "name", `recipe "gpu-train-h100x8" must be in a file named gpu-train-h100x8.yaml, found name-mismatch.yaml`}},
		"unquoted-version": {
			{"", 2, "version", `expected a string, found number 1.0 (quote it if it is a version: "1.0")`},
			{"", 5, "drivers.cuda-driver", `expected a string, found number 12.2`},
			{"", 9, "bios.attributes.LogicalProc", "expected a string, an integer or a boolean, found a list"},
		},
		"bare-number": {
			{"", 8, "acceptance.checks[1].min", "2048 needs a unit for memory-size (bytes), e.g. 2048GiB"},
			{"", 10, "acceptance.checks[2].min", "400 needs a unit for nic-link (bits per second), e.g. 400Gbps"},
			{"", 12, "acceptance.checks[3].min", "350Gbps is in bits per second; nccl-allreduce needs bytes per second, e.g. 350GB/s"},
			{"", 14, "acceptance.checks[4].max", "disk-present takes a plain number (a count), found 8Gbps"},
			{"", 16, "acceptance.checks[5].min", "expected a PCIe generation from 1 to 6, found 7"},
		},
		"unknown-check": {
			{"", 5, "acceptance.checks[0].name", `unknown check "gpu-burnin"; expected one of the agent checks (gpu-count, `},
			{"", 8, "acceptance.checks[1].args.lanes", `unknown argument "lanes" for pcie-link; expected one of: width, idle-downtrain`},
			{"", 11, "acceptance.checks[2].args.level", `expected a dcgmi diag run level: 1, 2, 3 or 4, found "5"`},
			{"", 14, "acceptance.checks[3].max", "nic-link reads only min; remove max"},
			{"", 17, "acceptance.checks[4].args.smart", `unknown argument "smart": disk-health takes no args`},
		},
		"unknown-driver": {
			{"", 5, "drivers.cuda", `unknown driver "cuda"; expected one of the versions first boot reports: nvidia, cuda-driver, cuda-toolkit, nvidia-fabricmanager, ofed, amdgpu (did you mean "cuda-driver"?)`},
			{"", 6, "drivers.mellanox", `unknown driver "mellanox"`},
		},
		"zero-sha256": {
			{"", 4, "extends", "os.agent.kernel.sha256 inherited from base-template (testdata/recipes/broken/zero-sha256/base-template.yaml:9) is the all-zero placeholder, and zero-sha256 is not a template"},
			{"", 8, "os.image.sha256", "the all-zero placeholder is not a digest: pin the artifact's digest (ingot recipe pin"},
		},
		"firmware-policy": {
			{"", 8, "firmware.policy.bios", `expected update, block or warn, found "ignore"`},
			{"", 9, `firmware.policy["other.cpdl"]`, `unknown firmware component "other.cpdl"; expected bios, bmc, gpu, nic, or other.NAME for a key of firmware.other (have: cpld) (did you mean "other.cpld"?)`},
			{"", 10, "firmware.policy.psu", `unknown firmware component "psu"`},
			{"", 15, "hardware.nics[0].firmware", "a per-model firmware pin needs hardware.nics[0].model"},
		},
		"burn-in": {
			{"", 10, "acceptance.burn_in.timeout", "expected a timeout longer than the burn-in duration (2h), found 1h"},
			{"", 11, "acceptance.burn_in.min_tflops", "min_tflops was removed: give the gpu-burn check a min with its unit instead"},
		},
		"burn-in-missing": {
			{"", 5, "acceptance.checks", "nccl-allreduce runs during the burn-in: expected acceptance.burn_in with a duration such as 2h"},
			{"", 9, "acceptance.checks[1].args.size", `expected a message size of at least 1GiB, e.g. 8GiB, found "512MiB"`},
		},
		"many-errors": {
			{"", 1, "version", `missing required field "version" in the recipe`},
			{"", 4, "hardware.gpus[0].model", `missing required field "model"`},
			{"", 4, "hardware.gpus[0].vendor", `expected one of nvidia, amd, intel, found "nvidea"`},
			{"", 7, "hardware.nics[0].role", `expected one of management, workload, found "storage"`},
			{"", 9, "bios.boot_mode", `expected one of uefi, legacy, found "bios"`},
			{"", 11, "os.handoff", `expected one of reboot, kexec, found "pxe"`},
			{"", 13, "network.hostname", "unknown placeholder {row}"},
			{"", 14, "network.pool", `expected an IPv4 CIDR such as 10.20.0.0/22, found "10.0.0.1/33"`},
			{"", 17, "acceptance.burn_in.duration", "expected a duration above zero such as 2h, found 0s"},
			{"", 19, "power.derating_pct", "expected 0 to 50, found 80"},
		},
		"invalid-yaml":       {{"", 4, "", "invalid YAML: did not find expected '-' indicator"}},
		"merge-key":          {{"", 8, "hardware.nics[1]", "YAML merge keys (<<) are not supported in recipes; use extends"}},
		"inherited-required": {{"", 7, "os.image.name", `missing required field "name" in os.image`}, {"", 11, "hardware.gpus[0].vendor", `missing required field "vendor"`}},
		"power-capacity": {
			{"", 5, "hardware.psus.count", "N+N redundancy needs an even number of PSUs, found 5"},
			{"", 9, "power.idle_watts", "expected idle_watts <= load_watts (8000), found 9000"},
			{"", 10, "power.load_watts", "load 8000W exceeds the usable PSU capacity 5400W (2 of 5 PSUs at 3000W, N+N, 10% derating)"},
		},
	}
	root := repoRoot(t)
	opts := Options{ImagesDir: "testdata/recipes/images"}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, "testdata/recipes/broken", name)
			files := withRelNames(t, root, readTree(t, dir))
			if len(files) == 0 {
				t.Fatalf("no recipe files in %s", dir)
			}
			o := opts
			o.ImagesDir = filepath.Join(root, opts.ImagesDir)
			_, diags := o.Build(files)
			if len(diags) != len(want) {
				t.Errorf("got %d diagnostics, want %d:\n%s", len(diags), len(want), diagText(diags))
			}
			for _, w := range want {
				file := w.file
				if file == "" {
					file = name + ".yaml"
				}
				found := false
				for _, d := range diags {
					if filepath.Base(d.File) == file && d.Line == w.line && d.Field == w.field &&
						strings.Contains(d.Message, w.msg) && d.Severity == SeverityError {
						found = true
					}
				}
				if !found {
					t.Errorf("missing error %s:%d: %s: %s\ngot:\n%s", file, w.line, w.field, w.msg, diagText(diags))
				}
			}
			for _, d := range diags {
				if d.Line < 1 || d.Column < 1 {
					t.Errorf("diagnostic without a position: %v", d)
				}
			}
			golden(t, filepath.Join(dir, "lint.golden"), []byte(strings.ReplaceAll(diagText(diags), root+"/", "")))
		})
	}
}

func TestHostnamePattern(t *testing.T) {
	for p, wantErr := range map[string]string{
		"h100-{rack}-{index:02d}": "",
		"lab-{index}":             "",
		"{recipe}-{serial}":       "",
		"gpu-{row}":               "unknown placeholder {row}",
		"gpu-{rack:02d}":          "only {index} takes a width",
		"GPU-{index}":             `found 'G'`,
		"gpu_{index}":             `found '_'`,
		"gpu-{index":              `found '{'`,
		"":                        "found an empty string",
	} {
		err := CheckHostnamePattern(p)
		if (err == nil) != (wantErr == "") || err != nil && !strings.Contains(err.Error(), wantErr) {
			t.Errorf("CheckHostnamePattern(%q) = %v, want error containing %q", p, err, wantErr)
		}
	}
}
