package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// GPU PCI vendors.
var gpuVendors = map[string]string{"0x10de": "NVIDIA", "0x1002": "AMD", "0x8086": "Intel"}

// Known GPU device IDs (vendor:device) -> model; nvidia-smi's name, when
// present, replaces these.
var gpuModels = map[string]string{
	"10de:2330": "NVIDIA H100 80GB HBM3", "10de:2331": "NVIDIA H100 PCIe", "10de:2335": "NVIDIA H200",
	"10de:2339": "NVIDIA H100 NVL", "10de:233a": "NVIDIA H800 NVL", "10de:2324": "NVIDIA H800",
	"10de:2901": "NVIDIA B200", "10de:20b0": "NVIDIA A100-SXM4-40GB", "10de:20b2": "NVIDIA A100-SXM4-80GB",
	"10de:20b5": "NVIDIA A100 80GB PCIe", "10de:20f1": "NVIDIA A100-PCIE-40GB", "10de:26b9": "NVIDIA L40S",
	"10de:26b5": "NVIDIA L40", "10de:27b8": "NVIDIA L4", "10de:1db4": "Tesla V100-PCIE-16GB",
	"1002:74a1": "AMD Instinct MI300X", "1002:740f": "AMD Instinct MI210", "1002:7408": "AMD Instinct MI250X",
}

// isGPUClass: VGA (0x0300) and 3D controllers (0x0302); AMD Instinct cards
// also show as display controller "other" (0x0380).
func isGPUClass(class, vendor string) bool {
	c := strings.TrimPrefix(class, "0x")
	if len(c) < 4 {
		return false
	}
	switch c[:4] {
	case "0300", "0302":
		return true
	case "0380":
		return vendor == "0x1002"
	}
	return false
}

func readGPUs(root string) ([]machine.GPU, error) {
	dir := filepath.Join(root, "sys/bus/pci/devices")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing PCI devices in %s: %w", dir, err)
	}
	slots := pciSlots(root)
	var gpus []machine.GPU
	for _, e := range ents {
		d := filepath.Join(dir, e.Name())
		vendor := readString(d, "vendor")
		vname, ok := gpuVendors[vendor]
		if !ok || !isGPUClass(readString(d, "class"), vendor) {
			continue
		}
		id := strings.TrimPrefix(vendor, "0x") + ":" + strings.TrimPrefix(readString(d, "device"), "0x")
		model := gpuModels[id]
		if model == "" {
			model = vname + " [" + id + "]"
		}
		addr := e.Name()
		gpus = append(gpus, machine.GPU{
			Slot:        slots[strings.TrimSuffix(addr, addr[strings.LastIndex(addr, "."):])],
			Vendor:      vname,
			Model:       model,
			PCIAddress:  addr,
			LinkCurrent: machine.PCIeLink{Gen: PCIeGen(readString(d, "current_link_speed")), Width: atoi(readString(d, "current_link_width"))},
			LinkMax:     machine.PCIeLink{Gen: PCIeGen(readString(d, "max_link_speed")), Width: atoi(readString(d, "max_link_width"))},
		})
	}
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].PCIAddress < gpus[j].PCIAddress })
	return gpus, nil
}

// pciSlots maps "0000:17:00" to the physical slot name from /sys/bus/pci/slots.
func pciSlots(root string) map[string]string {
	dir := filepath.Join(root, "sys/bus/pci/slots")
	ents, _ := os.ReadDir(dir)
	m := map[string]string{}
	for _, e := range ents {
		if a := readString(filepath.Join(dir, e.Name()), "address"); a != "" {
			m[a] = e.Name()
		}
	}
	return m
}

// PCIeGen turns a sysfs link speed ("16.0 GT/s PCIe", "8 GT/s") into the
// PCIe generation; 0 when unknown.
func PCIeGen(speed string) int {
	f := strings.Fields(speed)
	if len(f) == 0 {
		return 0
	}
	gts, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	for gen, s := range []float64{2.5, 5, 8, 16, 32, 64, 128} {
		if gts >= s-0.01 && gts <= s+0.01 {
			return gen + 1
		}
	}
	return 0
}

func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
