package machine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// h100 returns a GPU as Redfish reports one in an HGX board.
func h100(slot, serial string) GPU {
	return GPU{Slot: slot, Vendor: "NVIDIA", Model: "H100 80GB HBM3", VRAMMiB: 81920, Serial: serial,
		LinkCurrent: PCIeLink{Gen: 5, Width: 16}, LinkMax: PCIeLink{Gen: 5, Width: 16}, Firmware: "96.00.5E.00.01", Health: "OK"}
}

func dimms(n int) []DIMM {
	out := make([]DIMM, n)
	for i := range out {
		out[i] = DIMM{Slot: "DIMM" + string(rune('A'+i)), SizeMiB: 65536, Type: "DDR5", SpeedMHz: 4800}
	}
	return out
}

func baseInventory() Inventory {
	return Inventory{
		Source: "redfish",
		System: System{Vendor: "Supermicro", Model: "SYS-821GE-TNHR", Serial: "S1", BIOSVersion: "2.1", BMCVersion: "1.02"},
		CPUs:   []CPU{{Socket: "CPU0", Model: "Xeon 8480+", Cores: 56}, {Socket: "CPU1", Model: "Xeon 8480+", Cores: 56}},
		DIMMs:  dimms(4),
		GPUs:   []GPU{h100("SXM1", "G1"), h100("SXM2", "G2"), h100("SXM3", "G3")},
		NICs:   []NIC{{Name: "eth0", MAC: "52:54:00:00:00:01", Model: "ConnectX-7", SpeedMbps: 400000, LinkUp: true, Firmware: "28.39"}},
		Disks:  []Disk{{Name: "nvme0n1", Model: "PM1743", Serial: "D1", SizeBytes: 3_840_000_000_000, Health: "OK"}},
		PSUs: []PSU{{Name: "PSU1", Model: "PWS-3K", RatedWatts: 3000, State: "Enabled", Health: "OK"},
			{Name: "PSU2", Model: "PWS-3K", RatedWatts: 3000, State: "Enabled", Health: "OK"}},
		Firmware: []Firmware{{Component: "BIOS", Version: "2.1"}, {Component: "BMC", Version: "1.02"}},
		Software: Software{Kernel: "6.1.0", Drivers: map[string]string{"nvidia": "535.129.03"}},
		Power:    Power{Watts: 900},
		Thermal:  Thermal{Temperatures: []Reading{{Name: "CPU0", Value: 40, Unit: "Cel"}}},
	}
}

func TestDiffInventory(t *testing.T) {
	tests := map[string]struct {
		edit func(*Inventory)
		want []Change
	}{
		"identical": {edit: func(*Inventory) {}},
		"volatile readings are ignored": {edit: func(i *Inventory) {
			i.Power.Watts = 2500
			i.Thermal.Temperatures[0].Value = 80
			i.Source = "agent"
			i.Problems = []Problem{{Part: "x", Detail: "y"}}
		}},
		"GPU removed": {
			edit: func(i *Inventory) { i.GPUs = i.GPUs[:2] },
			want: []Change{
				{Path: "gpus.count", From: "3", To: "2"},
				{Path: "gpus[SXM3]", From: "NVIDIA H100 80GB HBM3 80 GiB serial G3"},
			},
		},
		"GPU added": {
			edit: func(i *Inventory) { i.GPUs = append(i.GPUs, h100("SXM4", "G4")) },
			want: []Change{
				{Path: "gpus.count", From: "3", To: "4"},
				{Path: "gpus[SXM4]", To: "NVIDIA H100 80GB HBM3 80 GiB serial G4"},
			},
		},
		"GPU swapped in the same slot": {
			edit: func(i *Inventory) { i.GPUs[1].Serial = "G9" },
			want: []Change{{Path: "gpus[SXM2].serial", From: "G2", To: "G9"}},
		},
		"GPU moved to another slot is matched by serial": {
			edit: func(i *Inventory) { i.GPUs[0].Slot, i.GPUs[2].Slot = "SXM3", "SXM1" },
			want: []Change{
				{Path: "gpus[SXM3].slot", From: "SXM1", To: "SXM3"},
				{Path: "gpus[SXM1].slot", From: "SXM3", To: "SXM1"},
			},
		},
		"GPU link width dropped, firmware and health changed": {
			edit: func(i *Inventory) {
				i.GPUs[2].LinkCurrent = PCIeLink{Gen: 4, Width: 8}
				i.GPUs[2].Firmware = "96.00.74.00.01"
				i.GPUs[2].Health = "Warning"
			},
			want: []Change{
				{Path: "gpus[SXM3].link_current", From: "Gen5 x16", To: "Gen4 x8"},
				{Path: "gpus[SXM3].firmware", From: "96.00.5E.00.01", To: "96.00.74.00.01"},
				{Path: "gpus[SXM3].health", From: "OK", To: "Warning"},
			},
		},
		"GPUs without serials are matched by slot": {
			edit: func(i *Inventory) {
				for k := range i.GPUs {
					i.GPUs[k].Serial = ""
				}
			},
			want: []Change{
				{Path: "gpus[SXM1].serial", From: "G1"},
				{Path: "gpus[SXM2].serial", From: "G2"},
				{Path: "gpus[SXM3].serial", From: "G3"},
			},
		},
		"DIMM missing": {
			edit: func(i *Inventory) { i.DIMMs = i.DIMMs[:3] },
			want: []Change{
				{Path: "dimms.count", From: "4", To: "3"},
				{Path: "memory.total", From: "256 GiB", To: "192 GiB"},
				{Path: "dimms[DIMMD]", From: "64 GiB DDR5 4800 MHz"},
			},
		},
		"DIMM running slower": {
			edit: func(i *Inventory) { i.DIMMs[0].SpeedMHz = 4400 },
			want: []Change{{Path: "dimms[DIMMA]", From: "64 GiB DDR5 4800 MHz", To: "64 GiB DDR5 4400 MHz"}},
		},
		"firmware versions": {
			edit: func(i *Inventory) {
				i.System.BIOSVersion = "2.2"
				i.Firmware[0].Version = "2.2"
				i.Firmware = append(i.Firmware, Firmware{Component: "GPU0", Version: "96.00"})
			},
			want: []Change{
				{Path: "system.bios_version", From: "2.1", To: "2.2"},
				{Path: "firmware[BIOS]", From: "2.1", To: "2.2"},
				{Path: "firmware[GPU0]", To: "96.00"},
			},
		},
		"PSU failed and lost redundancy": {
			edit: func(i *Inventory) {
				i.PSUs[1].State = "UnavailableOffline"
				i.PSUs[1].Health = "Critical"
			},
			want: []Change{
				{Path: "psus[PSU2].state", From: "Enabled", To: "UnavailableOffline"},
				{Path: "psus[PSU2].health", From: "OK", To: "Critical"},
			},
		},
		"PSU pulled": {
			edit: func(i *Inventory) { i.PSUs = i.PSUs[:1] },
			want: []Change{
				{Path: "psus.count", From: "2", To: "1"},
				{Path: "psus[PSU2]", From: "PWS-3K 3000 W"},
			},
		},
		"NIC link down at a lower speed": {
			edit: func(i *Inventory) { i.NICs[0].LinkUp = false; i.NICs[0].SpeedMbps = 200000 },
			want: []Change{
				{Path: "nics[eth0].speed", From: "400 Gb/s", To: "200 Gb/s"},
				{Path: "nics[eth0].link", From: "up", To: "down"},
			},
		},
		"disk replaced": {
			edit: func(i *Inventory) { i.Disks[0].Serial = "D2" },
			want: []Change{{Path: "disks[nvme0n1].serial", From: "D1", To: "D2"}},
		},
		"driver upgraded and kernel changed": {
			edit: func(i *Inventory) {
				i.Software.Kernel = "6.1.1"
				i.Software.Drivers = map[string]string{"nvidia": "550.54.15", "mlx5_core": "24.01"}
			},
			want: []Change{
				{Path: "software.kernel", From: "6.1.0", To: "6.1.1"},
				{Path: "software.drivers[mlx5_core]", To: "24.01"},
				{Path: "software.drivers[nvidia]", From: "535.129.03", To: "550.54.15"},
			},
		},
		"CPU socket empty": {
			edit: func(i *Inventory) { i.CPUs = i.CPUs[:1] },
			want: []Change{
				{Path: "cpus.count", From: "2", To: "1"},
				{Path: "cpus[CPU1]", From: "Xeon 8480+ 56 cores"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := baseInventory(), baseInventory()
			tc.edit(&b)
			got := DiffInventory(a, b)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DiffInventory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChangeString(t *testing.T) {
	for _, tc := range []struct {
		c    Change
		want string
	}{
		{Change{"gpus.count", "8", "7"}, "gpus.count: 8 -> 7"},
		{Change{"gpus[SXM4]", "", "NVIDIA H100"}, "gpus[SXM4]: added NVIDIA H100"},
		{Change{"psus[PSU2]", "PWS-3K", ""}, "psus[PSU2]: removed PWS-3K"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.c, got, tc.want)
		}
	}
}
