package inventory

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// nvidiaSMIFields are queried in this order.
var nvidiaSMIFields = []string{
	"pci.bus_id", "name", "serial", "memory.total", "vbios_version",
	"pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
}

var nvidiaSMIArgs = []string{"--query-gpu=" + strings.Join(nvidiaSMIFields, ","), "--format=csv,noheader,nounits"}

// ParseNvidiaSMI reads the CSV nvidia-smi prints for nvidiaSMIArgs. Fields
// nvidia-smi cannot read ("[N/A]", "[Not Supported]") stay zero.
func ParseNvidiaSMI(out []byte) ([]machine.GPU, error) {
	r := csv.NewReader(strings.NewReader(string(out)))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi output: %w", err)
	}
	var gpus []machine.GPU
	for i, f := range recs {
		if len(f) == 1 && strings.TrimSpace(f[0]) == "" {
			continue
		}
		if len(f) != len(nvidiaSMIFields) {
			return gpus, fmt.Errorf("nvidia-smi output line %d: %d fields, expected %d (%s)", i+1, len(f), len(nvidiaSMIFields), strings.Join(nvidiaSMIFields, ","))
		}
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
			if strings.HasPrefix(f[j], "[") {
				f[j] = ""
			}
		}
		mem, _ := strconv.ParseInt(f[3], 10, 64)
		gpus = append(gpus, machine.GPU{
			Vendor:      "NVIDIA",
			PCIAddress:  normalizeBusID(f[0]),
			Model:       f[1],
			Serial:      f[2],
			VRAMMiB:     mem,
			Firmware:    f[4],
			LinkCurrent: machine.PCIeLink{Gen: atoi(f[5]), Width: atoi(f[7])},
			LinkMax:     machine.PCIeLink{Gen: atoi(f[6]), Width: atoi(f[8])},
		})
	}
	return gpus, nil
}

// normalizeBusID turns nvidia-smi's "00000000:17:00.0" into sysfs's "0000:17:00.0".
func normalizeBusID(id string) string {
	id = strings.ToLower(id)
	dom, rest, ok := strings.Cut(id, ":")
	if !ok {
		return id
	}
	if len(dom) > 4 {
		dom = dom[len(dom)-4:]
	}
	return dom + ":" + rest
}

// MergeNvidiaSMI adds what nvidia-smi knows (name, serial, VRAM, VBIOS) to
// the GPUs read from sysfs, matched by PCI address. The PCIe link stays
// sysfs's where it has one. GPUs only nvidia-smi lists are appended.
func MergeNvidiaSMI(sys, smi []machine.GPU) []machine.GPU {
	byAddr := map[string]int{}
	for i, g := range sys {
		byAddr[g.PCIAddress] = i
	}
	for _, s := range smi {
		i, ok := byAddr[s.PCIAddress]
		if !ok {
			sys = append(sys, s)
			continue
		}
		g := &sys[i]
		if s.Model != "" {
			g.Model = s.Model
		}
		g.Serial, g.VRAMMiB, g.Firmware = s.Serial, s.VRAMMiB, s.Firmware
		if g.LinkCurrent == (machine.PCIeLink{}) {
			g.LinkCurrent = s.LinkCurrent
		}
		if g.LinkMax == (machine.PCIeLink{}) {
			g.LinkMax = s.LinkMax
		}
	}
	return sys
}
