package bmc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// HPE iLO 5 fallback for GPUs. iLO 5 does not list GPUs as Processors; it
// shows them only in two OEM resources (HPE iLO 5 Redfish reference,
// HpeServerDevice and HpeServerPciDevice):
//   - Chassis/{id}/Devices/{n}, #HpeServerDevice, linked from the Chassis at
//     Oem.Hpe.Links.Devices: a FRU with DeviceType "GPU", Name, Location,
//     SerialNumber, FirmwareVersion.Current.VersionString and DeviceInstances
//     (links to its PCI functions);
//   - Systems/{id}/PCIDevices/{n}, #HpeServerPciDevice, linked from the System
//     at Oem.Hpe.Links.PCIDevices: one PCI function with integer ClassCode,
//     SubclassCode, VendorID, DeviceID and Segment/Bus/Device/Function numbers.
//
// On HGX systems the baseboard and the NVSwitches can be typed "GPU" too (or
// carry NVIDIA's vendor id); they are not GPUs. inventory.go calls this only
// when no System's Processors list a GPU.

// hpeLinks reads Oem.Hpe.Links[key].@odata.id from a resource's raw JSON.
func hpeLinks(raw []byte, key string) string {
	var doc struct {
		Oem struct {
			Hpe struct {
				Links map[string]json.RawMessage `json:"Links"`
			} `json:"Hpe"`
		} `json:"Oem"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	var l struct {
		ID string `json:"@odata.id"`
	}
	if json.Unmarshal(doc.Oem.Hpe.Links[key], &l) != nil {
		return ""
	}
	return l.ID
}

// odataLink is {"@odata.id": URI}.
type odataLink struct {
	ID string `json:"@odata.id"`
}

// hpeCollection is an HPE OEM collection: only its members are read.
type hpeCollection struct {
	Members []odataLink `json:"Members"`
}

// hpeDevice is an HpeServerDevice (Chassis/{id}/Devices/{n}).
type hpeDevice struct {
	ID              string      `json:"@odata.id"`
	Name            string      `json:"Name"`
	DeviceType      string      `json:"DeviceType"`
	Manufacturer    string      `json:"Manufacturer"`
	Location        string      `json:"Location"`
	SerialNumber    string      `json:"SerialNumber"`
	DeviceInstances []odataLink `json:"DeviceInstances"`
	FirmwareVersion struct {
		Current struct {
			VersionString string `json:"VersionString"`
		} `json:"Current"`
	} `json:"FirmwareVersion"`
	Status struct {
		Health string `json:"Health"`
	} `json:"Status"`
}

// hpePCIDevice is an HpeServerPciDevice (Systems/{id}/PCIDevices/{n}).
type hpePCIDevice struct {
	ID             string    `json:"@odata.id"`
	Name           string    `json:"Name"`
	DeviceLocation string    `json:"DeviceLocation"`
	LocationString string    `json:"LocationString"`
	StructuredName string    `json:"StructuredName"`
	ClassCode      pciNumber `json:"ClassCode"`
	SubclassCode   pciNumber `json:"SubclassCode"`
	VendorID       pciNumber `json:"VendorID"`
	DeviceID       pciNumber `json:"DeviceID"`
	SegmentNumber  pciNumber `json:"SegmentNumber"`
	BusNumber      pciNumber `json:"BusNumber"`
	DeviceNumber   pciNumber `json:"DeviceNumber"`
	FunctionNumber pciNumber `json:"FunctionNumber"`
}

// pciNumber is an integer PCI field. HPE documents integers (VendorID 4318
// is 0x10de); a "0x10de" string is read too. ok is false when absent/null.
type pciNumber struct {
	v  uint32
	ok bool
}

func (n *pciNumber) UnmarshalJSON(b []byte) error {
	s := strings.Trim(strings.TrimSpace(string(b)), `"`)
	if s == "" || s == "null" {
		*n = pciNumber{}
		return nil
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		if v, err = strconv.ParseUint(s, 16, 32); err != nil {
			return fmt.Errorf("expected a PCI number, got %s", b)
		}
	}
	*n = pciNumber{v: uint32(v), ok: true}
	return nil
}

// PCI ids and classes the fallback knows (PCI-SIG class codes: 0x03 display
// controller, subclass 0x00 VGA, 0x02 3D controller, 0x80 other).
const (
	pciVendorNVIDIA  = 0x10de
	pciVendorAMD     = 0x1002
	pciClassDisplay  = 0x03
	pciSubclassVGA   = 0x00
	pciSubclass3D    = 0x02
	pciSubclassOther = 0x80
)

var gpuVendorNames = map[uint32]string{pciVendorNVIDIA: "NVIDIA", pciVendorAMD: "AMD"}

// isGPUFunction: an NVIDIA or AMD display controller (VGA or 3D; AMD
// Instinct cards also use "other"), the same rule as the in-band agent.
// An NVSwitch is a bridge (class 0x06), so it never passes.
func (p hpePCIDevice) isGPUFunction() bool {
	if _, ok := gpuVendorNames[p.VendorID.v]; !ok || p.ClassCode.v != pciClassDisplay || notAGPU(p.Name) {
		return false
	}
	switch p.SubclassCode.v {
	case pciSubclassVGA, pciSubclass3D:
		return true
	case pciSubclassOther:
		return p.VendorID.v == pciVendorAMD
	}
	return false
}

// address is the function's PCI address in the in-band form, 0000:21:00.0.
func (p hpePCIDevice) address() string {
	if !p.BusNumber.ok {
		return ""
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", p.SegmentNumber.v, p.BusNumber.v, p.DeviceNumber.v, p.FunctionNumber.v)
}

func (p hpePCIDevice) slot() string {
	return firstNonEmpty(p.DeviceLocation, p.LocationString, p.StructuredName)
}

// notAGPU names the NVIDIA parts that HPE types "GPU" but are not:
// NVSwitches and HGX baseboards.
func notAGPU(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "nvswitch") || strings.Contains(n, "baseboard") || strings.Contains(n, "base board")
}

// hpeGPUs picks the GPUs out of HPE's Devices and PCIDevices. A Device of
// type GPU is one unless it is an NVSwitch or a baseboard by name, its
// linked PCI functions are no GPU and not all of unknown class (an NVSwitch
// is a bridge), or it is an "HGX" entry without any PCI function (the
// baseboard has none). A Device claims the functions it links; GPU
// functions no Device claims are GPUs too. Each GPU is listed once, matched
// by PCI address, then serial, then slot.
func hpeGPUs(devices []hpeDevice, pcis []hpePCIDevice) []machine.GPU {
	byURI := make(map[string]hpePCIDevice, len(pcis))
	for _, p := range pcis {
		byURI[cleanURI(p.ID)] = p
	}
	set := gpuSet{seen: map[string]int{}}
	claimed := map[string]bool{}
	for _, d := range devices {
		if g, ok := deviceGPU(d, byURI, claimed); ok {
			set.add(g)
		}
	}
	for _, p := range pcis {
		if !claimed[cleanURI(p.ID)] && p.isGPUFunction() {
			set.add(machine.GPU{Slot: p.slot(), Vendor: gpuVendorNames[p.VendorID.v], Model: firstNonEmpty(p.Name), PCIAddress: p.address()})
		}
	}
	return set.gpus
}

// deviceGPU is the GPU an HpeServerDevice describes, if it is one; it marks
// the PCI functions the Device links as claimed.
func deviceGPU(d hpeDevice, byURI map[string]hpePCIDevice, claimed map[string]bool) (machine.GPU, bool) {
	if !strings.EqualFold(strings.TrimSpace(d.DeviceType), "GPU") || notAGPU(d.Name) {
		return machine.GPU{}, false
	}
	var fn *hpePCIDevice
	linked, otherClass := 0, false
	for _, l := range d.DeviceInstances {
		p, ok := byURI[cleanURI(l.ID)]
		if !ok {
			continue
		}
		linked++
		claimed[cleanURI(l.ID)] = true
		switch {
		case p.isGPUFunction():
			if fn == nil {
				fn = &p
			}
		case p.ClassCode.ok && p.ClassCode.v != pciClassDisplay:
			otherClass = true
		}
	}
	if fn == nil && (otherClass || linked == 0 && strings.Contains(strings.ToUpper(d.Name), "HGX")) {
		return machine.GPU{}, false
	}
	g := machine.GPU{Slot: firstNonEmpty(d.Location), Vendor: firstNonEmpty(d.Manufacturer), Model: firstNonEmpty(d.Name),
		Serial: firstNonEmpty(d.SerialNumber), Firmware: firstNonEmpty(d.FirmwareVersion.Current.VersionString), Health: d.Status.Health}
	if fn != nil {
		g.PCIAddress = fn.address()
		g.Slot = firstNonEmpty(g.Slot, fn.slot())
		g.Vendor = firstNonEmpty(g.Vendor, gpuVendorNames[fn.VendorID.v])
	}
	return g, true
}

// gpuSet lists GPUs once each, by PCI address, serial and slot.
type gpuSet struct {
	gpus []machine.GPU
	seen map[string]int // gpuKeys -> index in gpus
}

// add appends g, or, when a GPU already listed shares one of its keys, fills
// what that one lacks (a Device without a PCI link meets its function).
func (s *gpuSet) add(g machine.GPU) {
	for _, k := range gpuKeys(g) {
		if i, ok := s.seen[k]; ok {
			s.gpus[i].PCIAddress = firstNonEmpty(s.gpus[i].PCIAddress, g.PCIAddress)
			s.gpus[i].Vendor = firstNonEmpty(s.gpus[i].Vendor, g.Vendor)
			s.index(i)
			return
		}
	}
	s.gpus = append(s.gpus, g)
	s.index(len(s.gpus) - 1)
}

func (s *gpuSet) index(i int) {
	for _, k := range gpuKeys(s.gpus[i]) {
		s.seen[k] = i
	}
}

// hpeGPUFirmware fills the firmware of GPUs known only from a PCI function
// from the FirmwareInventory entry of the same name in the same slot (HPE
// iLO puts the slot in Oem.Hpe.DeviceContext).
func hpeGPUFirmware(gpus []machine.GPU, fw []firmwareItem) {
	for i, g := range gpus {
		for _, it := range fw {
			if g.Firmware == "" && g.Slot != "" && strings.EqualFold(it.context, g.Slot) && strings.EqualFold(it.name, g.Model) {
				gpus[i].Firmware = it.version
			}
		}
	}
}

// gpuKeys are the identities one GPU may not share with another.
func gpuKeys(g machine.GPU) []string {
	var ks []string
	for _, k := range [][2]string{{"pci", g.PCIAddress}, {"serial", g.Serial}, {"slot", g.Slot}} {
		if k[1] != "" {
			ks = append(ks, k[0]+" "+strings.ToLower(k[1]))
		}
	}
	return ks
}

// cleanURI drops the trailing slash iLO puts on some links.
func cleanURI(u string) string { return strings.TrimSuffix(u, "/") }

// readHPEGPUs is the HPE iLO 5 fallback described at the top of this file:
// it reads every Chassis' Devices and every System's PCIDevices and gives
// each System the GPUs whose PCI functions it holds (the first System those
// known only from a Device). A BMC without these OEM links costs nothing.
func readHPEGPUs(api schemas.Client, systems []systemPart, chassis []chassisPart, r *reading) {
	if len(systems) == 0 {
		return
	}
	devsByChassis := make([][]hpeDevice, len(chassis))
	pcisBySys := make([][]hpePCIDevice, len(systems))
	pciLinks := make([]string, len(systems))
	var fns []func()
	for i, ch := range chassis {
		if ch.devices != "" {
			fns = append(fns, func() { devsByChassis[i] = readMembers[hpeDevice](api, ch.devices, r) })
		}
	}
	for i, s := range systems {
		if pciLinks[i] = hpeLinks(s.sys.RawData, "PCIDevices"); pciLinks[i] != "" {
			fns = append(fns, func() { pcisBySys[i] = readMembers[hpePCIDevice](api, pciLinks[i], r) })
		}
	}
	if len(fns) == 0 {
		return
	}
	parallel(fns...)
	devsBySys := make([][]hpeDevice, len(systems))
	for _, devs := range devsByChassis {
		for _, d := range devs {
			i := ownerSystem(d, pciLinks)
			devsBySys[i] = append(devsBySys[i], d)
		}
	}
	for i := range systems {
		systems[i].gpus = hpeGPUs(devsBySys[i], pcisBySys[i])
	}
}

// ownerSystem is the index of the System whose PCIDevices collection holds
// one of d's PCI functions, else 0.
func ownerSystem(d hpeDevice, pciLinks []string) int {
	for i, l := range pciLinks {
		if l == "" {
			continue
		}
		for _, inst := range d.DeviceInstances {
			if strings.HasPrefix(cleanURI(inst.ID), cleanURI(l)+"/") {
				return i
			}
		}
	}
	return 0
}

// readMembers reads an OEM collection's members, in collection order. A
// member the BMC answers badly is a problem and is left out.
func readMembers[T any](api schemas.Client, uri string, r *reading) []T {
	var coll hpeCollection
	if _, err := getJSON(api, uri, &coll); err != nil {
		r.problem(uri, err)
		return nil
	}
	docs := make([]T, len(coll.Members))
	ok := make([]bool, len(coll.Members))
	var fns []func()
	for i, m := range coll.Members {
		fns = append(fns, func() {
			_, err := getJSON(api, m.ID, &docs[i])
			r.problem(m.ID, err)
			ok[i] = err == nil
		})
	}
	parallel(fns...)
	var out []T
	for i, d := range docs {
		if ok[i] {
			out = append(out, d)
		}
	}
	return out
}
