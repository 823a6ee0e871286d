package firmware

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// Instances lists a node's firmware component instances: every
// FirmwareInventory entry, classed (bios, bmc, gpu, nic, other) from its
// name, description and the links it has, never from its Id alone (HPE
// iLO numbers them); then, for each class the BMC lists nothing of, what
// the inventory knows (the in-band agent's, or the BMC's normalised
// inventory): the BIOS and BMC versions, each GPU and NIC with firmware.
func Instances(items []bmc.FirmwareItem, inv machine.Inventory) []Instance {
	models := inventoryModels(inv)
	var out []Instance
	for _, it := range items {
		in := Instance{Component: it.Component, Target: it.URI, Source: "redfish", Version: it.Version, Updateable: it.Updateable}
		in.names = nonEmpty(it.Component, it.Name, it.Description)
		if !numeric(it.ID) && it.ID != it.Name {
			in.names = append(in.names, it.ID)
		}
		in.Class, in.Model = classify(it, models)
		if in.Model != "" {
			in.names = append(in.names, in.Model)
		}
		out = append(out, in)
	}
	return append(out, inband(out, inv)...)
}

// inband adds what the inventory knows of the classes the BMC lists none of.
func inband(listed []Instance, inv machine.Inventory) []Instance {
	has := func(class string) bool {
		return slices.ContainsFunc(listed, func(in Instance) bool { return in.Class == class })
	}
	var out []Instance
	add := func(class, component, model, v string) {
		if v != "" {
			out = append(out, Instance{Component: component, Class: class, Model: model, Source: "inband", Version: v,
				names: nonEmpty(component, model)})
		}
	}
	if !has(ClassBIOS) {
		add(ClassBIOS, "BIOS", "", inv.System.BIOSVersion)
	}
	if !has(ClassBMC) {
		add(ClassBMC, "BMC", "", inv.System.BMCVersion)
	}
	if !has(ClassGPU) {
		for i, g := range inv.GPUs {
			add(ClassGPU, "GPU "+firstOf(g.Slot, g.PCIAddress, strconv.Itoa(i)), g.Model, g.Firmware)
		}
	}
	if !has(ClassNIC) {
		for i, n := range inv.NICs {
			add(ClassNIC, "NIC "+firstOf(n.Name, n.MAC, strconv.Itoa(i)), n.Model, n.Firmware)
		}
	}
	return out
}

// models are the inventory's GPU and NIC models, to class a firmware entry
// named after its device ("NVIDIA A40" on HPE iLO).
type models struct{ gpu, nic []string }

func inventoryModels(inv machine.Inventory) models {
	var m models
	for _, g := range inv.GPUs {
		if g.Model != "" && !slices.Contains(m.gpu, g.Model) {
			m.gpu = append(m.gpu, g.Model)
		}
	}
	for _, n := range inv.NICs {
		if n.Model != "" && !slices.Contains(m.nic, n.Model) {
			m.nic = append(m.nic, n.Model)
		}
	}
	return m
}

// classify names an entry's class and, where the inventory has a device
// of that name, its model. The words of its Name, Id (unless a number)
// and Description decide; CamelCase is split ("ManagementEthernet").
func classify(it bmc.FirmwareItem, m models) (class, model string) {
	for _, g := range m.gpu {
		if strings.EqualFold(it.Name, g) {
			return ClassGPU, g
		}
	}
	for _, n := range m.nic {
		if strings.EqualFold(it.Name, n) {
			return ClassNIC, n
		}
	}
	id := it.ID
	if numeric(id) {
		id = ""
	}
	w := words(it.Name + " " + id + " " + it.Description)
	related := strings.Join(it.Related, " ")
	switch {
	case w["vbios"] || w["gpu"] || strings.Contains(related, "/Processors/"):
		return ClassGPU, ""
	case w["bmc"] || w["ilo"] || w["idrac"] || w["xcc"] || strings.Contains(related, "/Managers/") ||
		w["baseboard"] && w["management"] && w["controller"]:
		return ClassBMC, ""
	case w["bios"] || w["uefi"] || w["rom"] && w["system"] || w["systemromactive"]:
		return ClassBIOS, ""
	case w["fpga"] || w["cpld"]:
		// Programmable logic on a board (HPE Cray's mFPGA on the network
		// mezzanine is no NIC).
		return ClassOther, ""
	case w["nic"] || w["ethernet"] || w["connectx"] || w["network"] || w["hpcnet"] || w["infiniband"]:
		// hpcnet: HPE Cray EX's high-speed network NICs (Node0.HPCNet0).
		return ClassNIC, ""
	}
	return ClassOther, ""
}

var wordRE = regexp.MustCompile(`[A-Z]+[a-z]*|[a-z]+|[0-9]+`)

// words splits s into lowercase words at separators, digits and CamelCase:
// "Node0.Acc0.VBIOS" -> node 0 acc 0 vbios; "ManagementEthernet" ->
// management ethernet; "ConnectX-6" -> connect x 6 and connectx.
func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return !isAlnum(r) }) {
		out[strings.ToLower(f)] = true
		for _, w := range wordRE.FindAllString(f, -1) {
			out[strings.ToLower(w)] = true
		}
		letters := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, strings.ToLower(f))
		out[letters] = true
	}
	return out
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func numeric(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
