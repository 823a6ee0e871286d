package drift

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

func h100(slot string, width int) machine.GPU {
	return machine.GPU{Slot: slot, Vendor: "NVIDIA", Model: "NVIDIA H100 80GB HBM3", VRAMMiB: 81559,
		LinkCurrent: machine.PCIeLink{Gen: 5, Width: width}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16},
		Firmware: "96.00.74.00.01", Health: "OK"}
}

func gpus(n int) []machine.GPU {
	var out []machine.GPU
	for i := range n {
		out = append(out, h100(string(rune('0'+i)), 16))
	}
	return out
}

func size(s string) recipe.Size {
	v, err := recipe.ParseSize(s)
	if err != nil {
		panic(err)
	}
	return v
}

func speed(s string) recipe.Speed {
	v, err := recipe.ParseSpeed(s)
	if err != nil {
		panic(err)
	}
	return v
}

func dimms(n int, mib int64) []machine.DIMM {
	var out []machine.DIMM
	for range n {
		out = append(out, machine.DIMM{SizeMiB: mib})
	}
	return out
}

func psu(name string, watts int, state, health string) machine.PSU {
	return machine.PSU{Name: name, RatedWatts: watts, State: state, Health: health}
}

// base is a machine that matches rec exactly.
func base() machine.Inventory {
	return machine.Inventory{
		System: machine.System{BIOSVersion: "2.4b", BMCVersion: "1.9"},
		CPUs: []machine.CPU{{Socket: "CPU0", Model: "Intel Xeon Platinum 8480+", Cores: 56},
			{Socket: "CPU1", Model: "Intel Xeon Platinum 8480+", Cores: 56}},
		DIMMs: dimms(32, 65536),
		GPUs:  gpus(8),
		NICs: []machine.NIC{{Name: "p0", Model: "ConnectX-7", SpeedMbps: 400000, Firmware: "28.39.1002"},
			{Name: "p1", Model: "ConnectX-7", SpeedMbps: 400000, Firmware: "28.39.1002"}},
		PSUs:  []machine.PSU{psu("PSU1", 3000, "Enabled", "OK"), psu("PSU2", 3000, "Enabled", "OK"), psu("PSU3", 3000, "Enabled", "OK"), psu("PSU4", 3000, "Enabled", "OK")},
		Power: machine.Power{Watts: 2100},
	}
}

func rec() *recipe.Recipe {
	return &recipe.Recipe{
		Hardware: recipe.Hardware{
			GPUs:   []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 8, MinVRAM: size("80GiB"), PCIeGen: 5, PCIeWidth: 16}},
			CPU:    &recipe.CPUSpec{Model: "Xeon Platinum 84", Sockets: 2, MinCores: 48},
			Memory: &recipe.MemSpec{Total: size("2TiB"), DIMMs: 32},
			NICs:   []recipe.NICSpec{{Model: "ConnectX-7", Speed: speed("400Gbps"), Count: 2, Role: "workload"}},
			PSUs:   &recipe.PSUSpec{Count: 4, RatedWatts: 3000, Redundancy: "N+1"},
		},
		Firmware: recipe.Firmware{BIOS: recipe.Pin{Version: "2.4b"}, BMC: recipe.Pin{Version: "1.9"}, GPU: recipe.Pin{Version: "96.00.74.00.01"},
			NIC: recipe.Pin{Version: "28.39.1002"}},
		Power: recipe.Power{LoadWatts: 7000, DeratingPct: 10},
	}
}

func TestCheck(t *testing.T) {
	cases := map[string]struct {
		mutate func(*machine.Inventory, *recipe.Recipe)
		want   []Finding
	}{
		"matches": {mutate: func(*machine.Inventory, *recipe.Recipe) {}},
		"missing GPU": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs = i.GPUs[:7] },
			want:   []Finding{{Critical, "gpu", "missing GPU: 7 of 8 H100 found", "8 x nvidia H100", "7", "gpu-count"}},
		},
		"wrong model": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs[3].Model = "NVIDIA A100-SXM4-80GB" },
			want: []Finding{{Critical, "gpu", "missing GPU: 7 of 8 H100 found", "8 x nvidia H100", "7", "gpu-count"},
				{Critical, "gpu", "wrong GPU model: GPUs the recipe does not list", "H100", "NVIDIA NVIDIA A100-SXM4-80GB", ""}},
		},
		"PCIe x16 to x8": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs[2].LinkCurrent.Width = 8 },
			want:   []Finding{{Critical, "gpu 2", "PCIe link trained at x8 instead of x16", "x16", "x8", "pcie-link"}},
		},
		"PCIe gen drop": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs[1].LinkCurrent.Gen = 4 },
			want:   []Finding{{Critical, "gpu 1", "PCIe link at Gen4 instead of Gen5", "Gen5", "Gen4", "pcie-link"}},
		},
		"downtrained without a pinned width": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Hardware.GPUs[0].PCIeWidth = 0
				i.GPUs[0].LinkCurrent.Width = 8
			},
			want: []Finding{{Warning, "gpu 0", "PCIe link trained at x8 below its maximum x16", "x16", "x8", ""}},
		},
		"VRAM below min": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs[4].VRAMMiB = 40960 },
			want:   []Finding{{Critical, "gpu 4", "VRAM below the minimum", ">= 80GiB", "40GiB", ""}},
		},
		"CPU sockets, cores and model": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) {
				i.CPUs = i.CPUs[:1]
				i.CPUs[0].Cores = 32
				i.CPUs[0].Model = "AMD EPYC 9654"
			},
			want: []Finding{{Critical, "cpu", "CPU socket count differs", "2", "1", ""},
				{Critical, "cpu CPU0", "wrong CPU model", "Xeon Platinum 84", "AMD EPYC 9654", ""},
				{Critical, "cpu CPU0", "fewer cores than the minimum", ">= 48", "32", ""}},
		},
		"DIMM missing": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.DIMMs = i.DIMMs[:31] },
			want: []Finding{{Critical, "memory", "less memory than the recipe's total", ">= 2TiB", "1984GiB", "memory-size"},
				{Critical, "memory", "1 DIMM(s) missing", "32 DIMMs", "31", ""}},
		},
		"NIC slow and missing": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) {
				i.NICs = i.NICs[:1]
				i.NICs[0].SpeedMbps = 200000
			},
			want: []Finding{{Critical, "nic workload", "missing NIC port: 1 of 2 ConnectX-7 400Gbps found", "2", "1", "nic-link"},
				{Warning, "nic workload p0", "NIC link slower than the recipe's speed", "400Gbps", "200Gbps", ""}},
		},
		"PSU failed and absent": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) {
				i.PSUs[1].Health = "Critical"
				i.PSUs[3].State = "Absent"
			},
			want: []Finding{{Critical, "power", "power capacity 2700 W (after N+1 reserve and 10% derating) is below the expected load", ">= 7000 W", "2700 W", ""},
				{Critical, "psu", "1 PSU(s) missing", "4", "3", ""},
				{Critical, "psu PSU2", "PSU failed", "Enabled, OK", "Enabled, Critical", ""}},
		},
		"PSU rated low": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.PSUs[0].RatedWatts = 2000 },
			want: []Finding{{Critical, "power", "power capacity 7200 W (after N+1 reserve and 10% derating) is below the expected load", ">= 7000 W", "7200 W", ""},
				{Warning, "psu PSU1", "PSU rated below the recipe", "3000 W", "2000 W", ""}}[1:],
		},
		"load above derated capacity": {
			mutate: func(_ *machine.Inventory, r *recipe.Recipe) { r.Power.DeratingPct = 30 },
			want:   []Finding{{Critical, "power", "power capacity 6300 W (after N+1 reserve and 30% derating) is below the expected load", ">= 7000 W", "6300 W", ""}},
		},
		"firmware drift blocks by default": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) {
				i.System.BIOSVersion = "2.3"
				i.GPUs[5].Firmware = "96.00.61.00.01"
				i.NICs[1].Firmware = ""
			},
			want: []Finding{{Critical, "firmware BIOS", "BIOS firmware not at the pinned version (policy block)", "2.4b", "2.3", ""},
				{Critical, "firmware GPU", "GPU firmware not at the pinned version (policy block)", "96.00.74.00.01", "96.00.61.00.01", ""}},
		},
		"firmware policy warn": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Firmware.Policy = map[string]recipe.FirmwareAction{"gpu": recipe.FirmwareWarn, "bmc": recipe.FirmwareWarn, "bios": recipe.FirmwareBlock}
				i.System.BIOSVersion = "2.3"
				i.System.BMCVersion = "1.8"
				i.GPUs[5].Firmware = "96.00.61.00.01"
				i.NICs[0].Firmware = "28.38.1000"
			},
			want: []Finding{{Critical, "firmware BIOS", "BIOS firmware not at the pinned version (policy block)", "2.4b", "2.3", ""},
				{Critical, "firmware NIC", "NIC firmware not at the pinned version (policy block)", "28.39.1002", "28.38.1000", ""},
				{Warning, "firmware BMC", "BMC firmware not at the pinned version (policy warn)", "1.9", "1.8", ""},
				{Warning, "firmware GPU", "GPU firmware not at the pinned version (policy warn)", "96.00.74.00.01", "96.00.61.00.01", ""}},
		},
		"NICs of two models, each at its own pin": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Hardware.NICs = append(r.Hardware.NICs, recipe.NICSpec{Model: "ConnectX-6 Lx", Count: 1, Role: "management", Firmware: "26.36.1010"})
				i.NICs = append(i.NICs, machine.NIC{Name: "m0", Model: "ConnectX-6 Lx", SpeedMbps: 25000, Firmware: "26.36.1010"})
			},
		},
		"a NIC off its model's pin": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Hardware.NICs = append(r.Hardware.NICs, recipe.NICSpec{Model: "ConnectX-6 Lx", Count: 1, Role: "management", Firmware: "26.36.1010"})
				i.NICs = append(i.NICs, machine.NIC{Name: "m0", Model: "ConnectX-6 Lx", SpeedMbps: 25000, Firmware: "26.35.1012"})
			},
			want: []Finding{{Critical, "firmware NIC ConnectX-6 Lx", "NIC ConnectX-6 Lx firmware not at the pinned version (policy block)", "26.36.1010", "26.35.1012", ""}},
		},
		"a second NIC model without its own pin is held to firmware.nic": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Hardware.NICs = append(r.Hardware.NICs, recipe.NICSpec{Model: "ConnectX-6 Lx", Count: 1, Role: "management"})
				i.NICs = append(i.NICs, machine.NIC{Name: "m0", Model: "ConnectX-6 Lx", SpeedMbps: 25000, Firmware: "26.36.1010"})
			},
			want: []Finding{{Critical, "firmware NIC", "NIC firmware not at the pinned version (policy block)", "28.39.1002", "26.36.1010", ""}},
		},
		"NIC speed not reported counts as slower": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.NICs[1].SpeedMbps = 0 },
			want: []Finding{{Warning, "nic workload p1", "link speed not reported (link down or unknown): counts as slower than the recipe's speed",
				"400Gbps", "unknown", ""}},
		},
		"PCIe width not reported blocks": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs[4].LinkCurrent.Width = 0 },
			want:   []Finding{{Critical, "gpu 4", "PCIe link width not reported: counts as below x16", "x16", "unknown", "pcie-link"}},
		},
		"PCIe generation not reported blocks": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.GPUs[4].LinkCurrent.Gen = 0 },
			want:   []Finding{{Critical, "gpu 4", "PCIe generation not reported: counts as below Gen5", "Gen5", "unknown", "pcie-link"}},
		},
		"BMC version unknown to the BMC: a mismatch": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.System.BMCVersion, i.Source = "", "redfish" },
			want: []Finding{{Critical, "firmware BMC", "BMC firmware version not reported: cannot show the pin holds (policy block)",
				"1.9", "not reported", ""}},
		},
		"BMC version unknown in-band: the BMC's read judges it": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) { i.System.BMCVersion, i.Source = "", "agent" },
			want:   []Finding{{Info, "firmware BMC", "BMC firmware version not reported", "1.9", "unknown", ""}},
		},
		"BMC version unknown, policy warn": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				i.System.BMCVersion, i.Source = "", "redfish"
				r.Firmware.BMC.Policy = recipe.FirmwareWarn
			},
			want: []Finding{{Info, "firmware BMC", "BMC firmware version not reported", "1.9", "unknown", ""}},
		},
		"policy update blocks until updated": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Firmware.BIOS = recipe.Pin{Version: "2.4b", Policy: recipe.FirmwareUpdate, Package: strings.Repeat("a", 64)}
				i.System.BIOSVersion = "2.3"
			},
			want: []Finding{{Critical, "firmware BIOS", "BIOS firmware not at the pinned version (policy update)", "2.4b", "2.3", ""}},
		},
		"vendor version strings: a build date is no mismatch": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Firmware.BMC = recipe.Pin{Version: "2.72"}
				i.System.BMCVersion = "iLO 5 v2.72"
				r.Firmware.Other = map[string]recipe.Pin{"ilo": {Version: "2.72"}}
				i.Firmware = []machine.Firmware{{Component: "iLO 5", Version: "2.72 Sep 04 2022"}}
			},
		},
		"a pin naming its component": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Firmware.Other = map[string]recipe.Pin{"gpu-bundle": {Version: "1.5.0", Component: "HGX_FW_GPU"}}
				i.Firmware = []machine.Firmware{{Component: "HGX_FW_GPU_SXM_1", Version: "1.4.0"}}
			},
			want: []Finding{{Critical, "firmware gpu-bundle", "gpu-bundle firmware not at the pinned version (policy block)", "1.5.0", "1.4.0", ""}},
		},
		"other firmware from the firmware inventory": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Firmware.Other = map[string]recipe.Pin{"CPLD": {Version: "1.2"}, "hgx-baseboard": {Version: "1.5.0"}}
				i.Firmware = []machine.Firmware{{Component: "CPLD", Version: "1.1"}, {Component: "hgx-baseboard", Version: "1.4.0"}}
			},
			want: []Finding{{Critical, "firmware CPLD", "CPLD firmware not at the pinned version (policy block)", "1.2", "1.1", ""},
				{Critical, "firmware hgx-baseboard", "hgx-baseboard firmware not at the pinned version (policy block)", "1.5.0", "1.4.0", ""}},
		},
		"other firmware policy warn": {
			mutate: func(i *machine.Inventory, r *recipe.Recipe) {
				r.Firmware.Other = map[string]recipe.Pin{"cpld": {Version: "1.0.4"}, "hgx-baseboard": {Version: "1.5.0"}}
				r.Firmware.Policy = map[string]recipe.FirmwareAction{"other.cpld": recipe.FirmwareWarn}
				i.Firmware = []machine.Firmware{{Component: "cpld", Version: "1.0.3"}, {Component: "hgx-baseboard", Version: "1.4.0"}}
			},
			want: []Finding{{Critical, "firmware hgx-baseboard", "hgx-baseboard firmware not at the pinned version (policy block)", "1.5.0", "1.4.0", ""},
				{Warning, "firmware cpld", "cpld firmware not at the pinned version (policy warn)", "1.0.4", "1.0.3", ""}},
		},
		"problems become info": {
			mutate: func(i *machine.Inventory, _ *recipe.Recipe) {
				i.Problems = []machine.Problem{{Part: "Chassis/1/Power", Detail: "bad response"}}
			},
			want: []Finding{{Info, "Chassis/1/Power", "the BMC did not answer this part; facts from it are missing", "", "bad response", ""}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inv, r := base(), rec()
			tc.mutate(&inv, r)
			got := Check(inv, r)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("findings (-want +got):\n%s", d)
			}
		})
	}
}

func TestUsableWatts(t *testing.T) {
	cases := []struct {
		ratings    []int
		redundancy string
		want       int
	}{
		{[]int{3000, 3000}, "", 6000},
		{[]int{3000, 3000, 3000}, "N+1", 6000},
		{[]int{3000, 2000, 3000, 3000}, "N+N", 5000},
		{[]int{1100, 1100}, "2N", 1100},
		{nil, "N+1", 0},
	}
	for _, c := range cases {
		if got := usableWatts(append([]int(nil), c.ratings...), c.redundancy); got != c.want {
			t.Errorf("usableWatts(%v, %q) = %d, want %d", c.ratings, c.redundancy, got, c.want)
		}
	}
}

func TestSummaryAndWorst(t *testing.T) {
	fs := []Finding{{Severity: Warning}, {Severity: Critical}, {Severity: Info}, {Severity: Warning}}
	if got := Summary(fs); got != "1 critical, 2 warning, 1 info" {
		t.Errorf("Summary = %q", got)
	}
	if Worst(fs) != Critical || Worst(nil) != "" {
		t.Errorf("Worst = %q", Worst(fs))
	}
}

// TestFirmwareBlocksReady: with the default policy a firmware mismatch is
// the worst finding, as the engine reads it to keep a machine from ready;
// with policy warn it is not.
func TestFirmwareBlocksReady(t *testing.T) {
	inv, r := base(), rec()
	inv.System.BIOSVersion = "2.3"
	if w := Worst(Check(inv, r)); w != Critical {
		t.Errorf("default policy: worst %q, want critical", w)
	}
	r.Firmware.Policy = map[string]recipe.FirmwareAction{"bios": recipe.FirmwareWarn}
	fs := Check(inv, r)
	if w := Worst(fs); w != Warning {
		t.Errorf("policy warn: worst %q, want warning", w)
	}
	if got := fs[0].String(); got != "warning firmware BIOS: BIOS firmware not at the pinned version (policy warn) (expected 2.4b, found 2.3)" {
		t.Errorf("finding reads %q", got)
	}
}
