package bmc

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// pciFn builds an HpeServerPciDevice: Systems/1/PCIDevices/id.
func pciFn(id, name string, class, sub, vendor uint32, bus uint32) hpePCIDevice {
	n := func(v uint32) pciNumber { return pciNumber{v: v, ok: true} }
	return hpePCIDevice{ID: "/redfish/v1/Systems/1/PCIDevices/" + id, Name: name, DeviceLocation: "PCI-E Slot " + id,
		ClassCode: n(class), SubclassCode: n(sub), VendorID: n(vendor), DeviceID: n(0x2235),
		SegmentNumber: n(0), BusNumber: n(bus), DeviceNumber: n(0), FunctionNumber: n(0)}
}

// dev builds an HpeServerDevice linking the given PCIDevices ids.
func dev(name, typ, loc, serial string, fns ...string) hpeDevice {
	d := hpeDevice{Name: name, DeviceType: typ, Manufacturer: "NVIDIA", Location: loc, SerialNumber: serial}
	d.FirmwareVersion.Current.VersionString = "94.02"
	d.Status.Health = "OK"
	for _, f := range fns {
		d.DeviceInstances = append(d.DeviceInstances, odataLink{ID: "/redfish/v1/Systems/1/PCIDevices/" + f})
	}
	return d
}

func TestHPEGPUs(t *testing.T) {
	a40 := func(slot, addr, serial string) machine.GPU {
		return machine.GPU{Slot: slot, Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: addr, Serial: serial, Firmware: "94.02", Health: "OK"}
	}
	cases := map[string]struct {
		devices []hpeDevice
		pcis    []hpePCIDevice
		want    []machine.GPU
	}{
		"Device and its PCI function are one GPU": {
			devices: []hpeDevice{dev("NVIDIA A40", "GPU", "PCI-E Slot 1", "S1", "2")},
			pcis:    []hpePCIDevice{pciFn("2", "NVIDIA A40", 3, 2, 0x10de, 0x21)},
			want:    []machine.GPU{a40("PCI-E Slot 1", "0000:21:00.0", "S1")},
		},
		"PCI function without a Device": {
			pcis: []hpePCIDevice{pciFn("5", "NVIDIA A40", 3, 2, 0x10de, 0xc1)},
			want: []machine.GPU{{Slot: "PCI-E Slot 5", Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: "0000:c1:00.0"}},
		},
		"Device without DeviceInstances is kept": {
			devices: []hpeDevice{dev("NVIDIA A40", "GPU", "PCI-E Slot 1", "S1")},
			want:    []machine.GPU{a40("PCI-E Slot 1", "", "S1")},
		},
		"links with a trailing slash": {
			devices: []hpeDevice{dev("NVIDIA A40", "gpu", "PCI-E Slot 1", "S1", "2/")},
			pcis:    []hpePCIDevice{pciFn("2", "NVIDIA A40", 3, 2, 0x10de, 0x21)},
			want:    []machine.GPU{a40("PCI-E Slot 1", "0000:21:00.0", "S1")},
		},
		"HGX baseboard typed GPU, no PCI function": {
			devices: []hpeDevice{dev("HGX A100 8-GPU", "GPU", "System Board", "B1")},
		},
		"baseboard by name": {
			devices: []hpeDevice{dev("NVIDIA GPU Baseboard", "GPU", "System Board", "B1", "2")},
			pcis:    []hpePCIDevice{pciFn("2", "NVIDIA A40", 3, 2, 0x10de, 0x21)},
			want:    []machine.GPU{{Slot: "PCI-E Slot 2", Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: "0000:21:00.0"}},
		},
		"NVSwitch typed GPU with a bridge function": {
			devices: []hpeDevice{dev("NVIDIA Switch", "GPU", "System Board", "N1", "7")},
			pcis:    []hpePCIDevice{pciFn("7", "NVIDIA Switch", 6, 0x80, 0x10de, 0x62)},
		},
		"GPU Device linked to a function of unknown class is kept": {
			devices: []hpeDevice{dev("NVIDIA A40", "GPU", "PCI-E Slot 1", "S1", "2")},
			pcis:    []hpePCIDevice{{ID: "/redfish/v1/Systems/1/PCIDevices/2", Name: "NVIDIA A40"}},
			want:    []machine.GPU{a40("PCI-E Slot 1", "", "S1")},
		},
		"NVSwitch by name with a display class": {
			pcis: []hpePCIDevice{pciFn("7", "NVIDIA NVSwitch", 3, 2, 0x10de, 0x62)},
		},
		"embedded Matrox VGA and an NVIDIA audio function": {
			pcis: []hpePCIDevice{pciFn("1", "Embedded Video Controller", 3, 0, 0x102b, 0x01), pciFn("3", "NVIDIA HD Audio", 4, 3, 0x10de, 0x21)},
		},
		"display 'other' is a GPU for AMD only": {
			pcis: []hpePCIDevice{pciFn("1", "AMD Instinct MI210", 3, 0x80, 0x1002, 0x03), pciFn("2", "NVIDIA odd", 3, 0x80, 0x10de, 0x04)},
			want: []machine.GPU{{Slot: "PCI-E Slot 1", Vendor: "AMD", Model: "AMD Instinct MI210", PCIAddress: "0000:03:00.0"}},
		},
		"a non-GPU Device is ignored": {
			devices: []hpeDevice{dev("Mellanox ConnectX-6", "LOM/NIC", "PCI-E Slot 5", "M1")},
		},
		"the same GPU twice, by serial": {
			devices: []hpeDevice{dev("NVIDIA A40", "GPU", "PCI-E Slot 1", "S1"), dev("NVIDIA A40", "GPU", "", "S1")},
			want:    []machine.GPU{a40("PCI-E Slot 1", "", "S1")},
		},
		"a Device and an unlinked function in the same slot": {
			devices: []hpeDevice{dev("NVIDIA A40", "GPU", "PCI-E Slot 2", "S2")},
			pcis:    []hpePCIDevice{pciFn("2", "NVIDIA A40", 3, 2, 0x10de, 0x41)},
			want:    []machine.GPU{a40("PCI-E Slot 2", "0000:41:00.0", "S2")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, hpeGPUs(tc.devices, tc.pcis)); d != "" {
				t.Errorf("hpeGPUs (-want +got):\n%s", d)
			}
		})
	}
}

func TestPCINumber(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    pciNumber
		wantErr bool
	}{
		"integer (HPE)":   {in: `4318`, want: pciNumber{v: 0x10de, ok: true}},
		"hex string":      {in: `"0x10DE"`, want: pciNumber{v: 0x10de, ok: true}},
		"bare hex string": {in: `"10de"`, want: pciNumber{v: 0x10de, ok: true}},
		"zero is a value": {in: `0`, want: pciNumber{v: 0, ok: true}},
		"null":            {in: `null`, want: pciNumber{}},
		"garbage":         {in: `"slot"`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var n pciNumber
			err := json.Unmarshal([]byte(tc.in), &n)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Unmarshal(%s) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if n != tc.want {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tc.in, n, tc.want)
			}
		})
	}
}

func TestPCIAddressNeedsABus(t *testing.T) {
	p := pciFn("2", "NVIDIA A40", 3, 2, 0x10de, 0x21)
	p.SegmentNumber = pciNumber{v: 1, ok: true}
	if got := p.address(); got != "0001:21:00.0" {
		t.Errorf("address = %q, want 0001:21:00.0", got)
	}
	p.BusNumber = pciNumber{}
	if got := p.address(); got != "" {
		t.Errorf("address without a bus number = %q, want none", got)
	}
}

func TestNameFirmware(t *testing.T) {
	cases := map[string]struct {
		in   []firmwareItem
		want []string
	}{
		"names, not numeric Ids (HPE iLO)": {
			in:   []firmwareItem{{id: "1", name: "iLO 5"}, {id: "2", name: "System ROM"}},
			want: []string{"iLO 5", "System ROM"},
		},
		"Id when there is no name": {
			in:   []firmwareItem{{id: "BMC"}},
			want: []string{"BMC"},
		},
		"shared names told apart by slot": {
			in:   []firmwareItem{{id: "4", name: "NVIDIA A40", context: "PCI-E Slot 1"}, {id: "5", name: "NVIDIA A40", context: "PCI-E Slot 2"}},
			want: []string{"NVIDIA A40 (PCI-E Slot 1)", "NVIDIA A40 (PCI-E Slot 2)"},
		},
		"shared names told apart by Id (Cray)": {
			in:   []firmwareItem{{id: "Node0.AccFPGA0", name: "accFPGA"}, {id: "Node1.AccFPGA0", name: "accFPGA"}},
			want: []string{"accFPGA (Node0.AccFPGA0)", "accFPGA (Node1.AccFPGA0)"},
		},
		"same name and slot: the Id as well": {
			in:   []firmwareItem{{id: "4", name: "GPU", context: "Slot 1"}, {id: "5", name: "GPU", context: "Slot 1"}},
			want: []string{"GPU (Slot 1) [4]", "GPU (Slot 1) [5]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, it := range nameFirmware(tc.in) {
				got = append(got, it.component)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("nameFirmware (-want +got):\n%s", d)
			}
		})
	}
}

func TestMergeFirmwareDropsRepeats(t *testing.T) {
	inv := nameFirmware([]firmwareItem{
		{id: "BMC", name: "Contoso BMC Firmware", version: "1.45"},
		{id: "BIOS", name: "Contoso BIOS Firmware", version: "P79 v1.45"},
		{id: "1", name: "iLO 5", version: "2.72"},
	})
	got := mergeFirmware("P79 v1.45 (12/06/2017)", "1.45", inv)
	want := []machine.Firmware{{Component: "BIOS", Version: "P79 v1.45 (12/06/2017)"}, {Component: "BMC", Version: "1.45"},
		{Component: "Contoso BIOS Firmware", Version: "P79 v1.45"}, {Component: "iLO 5", Version: "2.72"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("mergeFirmware (-want +got):\n%s", d)
	}
}
