package drift

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// inband is a GPU as the agent reports it (sysfs slot name, nvidia-smi
// model and serial); bmcGPU the same card as an HPE iLO reports it.
func inband(slot, addr, serial string) machine.GPU {
	return machine.GPU{Slot: slot, Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: addr, Serial: serial}
}

func bmcGPU(slot, addr, serial string) machine.GPU {
	return machine.GPU{Slot: slot, Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: addr, Serial: serial, Health: "OK"}
}

func TestReconcileGPUs(t *testing.T) {
	cases := map[string]struct {
		inBand, bmc []machine.GPU
		want        []Finding
	}{
		"both empty": {},
		"all agree, matched by serial": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "S1"), inband("2", "0000:41:00.0", "S2")},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 2", "", "S2"), bmcGPU("PCI-E Slot 1", "", "S1")},
		},
		"matched by PCI address in other forms": {
			inBand: []machine.GPU{inband("", "00000000:AF:00.0", ""), inband("", "0000:18:00.0", "")},
			bmc:    []machine.GPU{bmcGPU("", "18:00.0", ""), bmcGPU("", "0000:af:00", "")},
		},
		"matched by slot": {
			inBand: []machine.GPU{inband("1", "", "")},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 1", "", "")},
		},
		"the BMC shows no GPUs: one info, not a critical each": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "S1"), inband("2", "0000:41:00.0", "S2"), inband("3", "0000:a1:00.0", "S3")},
			want: []Finding{{Severity: Info, Part: "gpu",
				Message:  "the BMC shows no GPUs (some BMCs cannot); the in-band GPUs were not cross-checked",
				Expected: "the 3 GPUs seen in-band", Found: "none from the BMC"}},
		},
		"a GPU the BMC does not show": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "S1"), inband("2", "0000:41:00.0", "S2")},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 1", "0000:21:00.0", "S1")},
			want: []Finding{{Severity: Critical, Part: "gpu 2",
				Message:  "GPU in the in-band inventory only; the BMC does not show it",
				Expected: "in both inventories", Found: "in-band: NVIDIA A40, serial S2, pci 0000:41:00.0, slot 2"}},
		},
		"a GPU fallen off the bus: the BMC sees it, the OS does not": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "S1")},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 1", "0000:21:00.0", "S1"), bmcGPU("PCI-E Slot 4", "0000:c1:00.0", "S4")},
			want: []Finding{{Severity: Critical, Part: "gpu PCI-E Slot 4",
				Message:  "GPU in the BMC inventory only; the machine does not see it in-band",
				Expected: "in both inventories", Found: "BMC: NVIDIA A40, serial S4, pci 0000:c1:00.0, slot PCI-E Slot 4"}},
		},
		"the OS sees no GPU at all": {
			bmc: []machine.GPU{bmcGPU("PCI-E Slot 1", "", "S1")},
			want: []Finding{{Severity: Critical, Part: "gpu PCI-E Slot 1",
				Message:  "GPU in the BMC inventory only; the machine does not see it in-band",
				Expected: "in both inventories", Found: "BMC: NVIDIA A40, serial S1, slot PCI-E Slot 1"}},
		},
		"same PCI address, different serial": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "S1")},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 1", "0000:21:00.0", "S9")},
			want: []Finding{{Severity: Warning, Part: "gpu 1",
				Message:  "in-band and BMC serial numbers differ for the same GPU",
				Expected: "in-band S1", Found: "BMC S9"}},
		},
		"same serial, different model": {
			inBand: []machine.GPU{{Slot: "1", Model: "NVIDIA L40S", Serial: "S1"}},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 1", "", "S1")},
			want: []Finding{{Severity: Warning, Part: "gpu 1",
				Message:  "in-band and BMC models differ for the same GPU",
				Expected: "in-band NVIDIA L40S", Found: "BMC NVIDIA A40"}},
		},
		"model names that differ only in form agree": {
			inBand: []machine.GPU{{Serial: "A", Model: "NVIDIA A100-SXM4-40GB"}, {Serial: "B", Model: "NVIDIA B200"},
				{Serial: "C", Model: "Tesla V100-PCIE-16GB"}, {Serial: "D", Model: "AMD Instinct MI300X"}},
			bmc: []machine.GPU{{Serial: "A", Model: "NVIDIA_A100-SXM4-40GB"}, {Serial: "B", Model: "B200 180GB HBM3e"},
				{Serial: "C", Model: "NVIDIA Tesla V100 16GB PCIE"}, {Serial: "D", Model: "MI300X"}},
		},
		"placeholder serials do not pair GPUs": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "[N/A]")},
			bmc:    []machine.GPU{bmcGPU("PCI-E Slot 3", "0000:a1:00.0", "N/A")},
			want: []Finding{
				{Severity: Critical, Part: "gpu 1", Message: "GPU in the in-band inventory only; the BMC does not show it",
					Expected: "in both inventories", Found: "in-band: NVIDIA A40, serial [N/A], pci 0000:21:00.0, slot 1"},
				{Severity: Critical, Part: "gpu PCI-E Slot 3", Message: "GPU in the BMC inventory only; the machine does not see it in-band",
					Expected: "in both inventories", Found: "BMC: NVIDIA A40, serial N/A, pci 0000:a1:00.0, slot PCI-E Slot 3"},
			},
		},
		"serial pairs before address: a swapped pair of cards": {
			inBand: []machine.GPU{inband("1", "0000:21:00.0", "S1"), inband("2", "0000:41:00.0", "S2")},
			bmc:    []machine.GPU{bmcGPU("", "0000:41:00.0", "S1"), bmcGPU("", "0000:21:00.0", "S2")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ReconcileGPUs(tc.inBand, tc.bmc)); d != "" {
				t.Errorf("ReconcileGPUs (-want +got):\n%s", d)
			}
		})
	}
}

func TestNormPCIAddress(t *testing.T) {
	for in, want := range map[string]string{
		"0000:18:00.0":     "0000:18:00.0",
		"18:00.0":          "0000:18:00.0",
		"00000000:AF:00.0": "0000:af:00.0",
		"0000:18:00":       "0000:18:00.0",
		" 0001:3b:1f.7 ":   "0001:3b:1f.7",
		"":                 "",
		"PCI-E Slot 1":     "",
		"0000:18:20.0":     "", // device numbers stop at 0x1f
		"0000:18:00.8":     "", // functions stop at 7
		"18":               "",
	} {
		if got := normPCIAddress(in); got != want {
			t.Errorf("normPCIAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormSlot(t *testing.T) {
	for in, want := range map[string]string{
		"PCI-E Slot 1": "1",
		"PCIe Slot 1":  "1",
		"Slot 1":       "1",
		"1":            "1",
		"SXM1":         "sxm1",
		"Node1/GPU2":   "node1gpu2",
		"":             "",
	} {
		if got := normSlot(in); got != want {
			t.Errorf("normSlot(%q) = %q, want %q", in, got, want)
		}
	}
}

func ExampleReconcileGPUs() {
	inBand := []machine.GPU{
		{Slot: "1", Model: "NVIDIA A40", PCIAddress: "00000000:21:00.0", Serial: "1650221000101"},
		{Slot: "2", Model: "NVIDIA A40", PCIAddress: "00000000:41:00.0", Serial: "1650221000102"},
	}
	bmc := []machine.GPU{
		{Slot: "PCI-E Slot 1", Model: "NVIDIA A40", PCIAddress: "0000:21:00.0", Serial: "1650221000101"},
		{Slot: "PCI-E Slot 2", Model: "NVIDIA A40", PCIAddress: "0000:41:00.0", Serial: "1650221000102"},
		{Slot: "PCI-E Slot 3", Model: "NVIDIA A40", PCIAddress: "0000:a1:00.0", Serial: "1650221000103"},
	}
	for _, f := range ReconcileGPUs(inBand, bmc) {
		fmt.Println(f)
	}
	fmt.Println(ReconcileGPUs(inBand, nil)[0].Severity)
	// Output:
	// critical gpu PCI-E Slot 3: GPU in the BMC inventory only; the machine does not see it in-band (expected in both inventories, found BMC: NVIDIA A40, serial 1650221000103, pci 0000:a1:00.0, slot PCI-E Slot 3)
	// info
}
