package bmc

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// This file turns gofish resources into machine's normalized types. Every
// function is pure: resource in, value out.

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func normCPU(p *schemas.Processor) machine.CPU {
	return machine.CPU{
		Socket:  firstNonEmpty(p.Socket, p.Location.PartLocation.ServiceLabel, p.ID),
		Vendor:  strings.TrimSpace(p.Manufacturer),
		Model:   strings.TrimSpace(p.Model),
		Cores:   deref(p.TotalCores),
		Threads: deref(p.TotalThreads),
		MaxMHz:  deref(p.MaxSpeedMHz),
	}
}

// normGPU reads what a GPU Processor says of itself: VRAM from
// ProcessorMemory or MemorySummary, the PCIe link from SystemInterface.
func normGPU(p *schemas.Processor) machine.GPU {
	g := machine.GPU{
		Slot:     firstNonEmpty(p.Location.PartLocation.ServiceLabel, p.Socket, p.ID),
		Vendor:   strings.TrimSpace(p.Manufacturer),
		Model:    strings.TrimSpace(p.Model),
		Serial:   strings.TrimSpace(p.SerialNumber),
		Firmware: p.FirmwareVersion,
		Health:   string(p.Status.Health),
	}
	for _, m := range p.ProcessorMemory {
		g.VRAMMiB += int64(deref(m.CapacityMiB))
	}
	if g.VRAMMiB == 0 {
		g.VRAMMiB = int64(deref(p.MemorySummary.TotalMemorySizeMiB))
	}
	if p.SystemInterface.InterfaceType == schemas.PCIeSystemInterfaceType || p.SystemInterface.PCIe.LanesInUse != nil {
		g.LinkCurrent, g.LinkMax = pcieLinks(p.SystemInterface.PCIe)
	}
	return g
}

// pcieLinks returns the current and maximum link of a PCIe interface.
func pcieLinks(pi schemas.PCIeInterface) (cur, max machine.PCIeLink) {
	cur = machine.PCIeLink{Gen: pcieGen(pi.PCIeType), Width: deref(pi.LanesInUse)}
	max = machine.PCIeLink{Gen: pcieGen(pi.MaxPCIeType), Width: deref(pi.MaxLanes)}
	return cur, max
}

// pcieGen reads "Gen4" as 4; anything else as 0 (unknown).
func pcieGen(t schemas.PCIeTypes) int {
	n, err := strconv.Atoi(strings.TrimPrefix(string(t), "Gen"))
	if err != nil {
		return 0
	}
	return n
}

// processorLinks lists the @odata.ids a processor's Links[key] holds.
func processorLinks(raw []byte, key string) []string {
	var doc struct {
		Links map[string]json.RawMessage `json:"Links"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return nil
	}
	v := doc.Links[key]
	var one struct {
		ID string `json:"@odata.id"`
	}
	if json.Unmarshal(v, &one) == nil && one.ID != "" {
		return []string{one.ID}
	}
	var many []struct {
		ID string `json:"@odata.id"`
	}
	_ = json.Unmarshal(v, &many)
	var out []string
	for _, m := range many {
		if m.ID != "" {
			out = append(out, m.ID)
		}
	}
	return out
}

// normDIMM keeps populated system DRAM modules; absent slots, caches and
// GPU HBM (some BMCs list it under the System) are not DIMMs.
func normDIMM(m *schemas.Memory) (machine.DIMM, bool) {
	if m.Status.State == schemas.AbsentState || deref(m.CapacityMiB) == 0 {
		return machine.DIMM{}, false
	}
	if m.MemoryType != "" && m.MemoryType != schemas.DRAMMemoryType {
		return machine.DIMM{}, false
	}
	if strings.HasPrefix(string(m.MemoryDeviceType), "HBM") {
		return machine.DIMM{}, false
	}
	return machine.DIMM{
		Slot:     firstNonEmpty(m.DeviceLocator, m.Location.PartLocation.ServiceLabel, m.ID),
		SizeMiB:  int64(deref(m.CapacityMiB)),
		Type:     string(m.MemoryDeviceType),
		SpeedMHz: deref(m.OperatingSpeedMhz),
		Vendor:   strings.TrimSpace(m.Manufacturer),
		Serial:   strings.TrimSpace(m.SerialNumber),
	}, true
}

func normEthernet(e *schemas.EthernetInterface) machine.NIC {
	mac, err := machine.NormalizeMAC(firstNonEmpty(e.MACAddress, e.PermanentMACAddress))
	if err != nil {
		mac = ""
	}
	return machine.NIC{
		Name:      e.ID,
		MAC:       mac,
		SpeedMbps: deref(e.SpeedMbps),
		LinkUp:    e.LinkStatus == schemas.LinkUpLinkStatus,
	}
}

func normDrive(d *schemas.Drive) machine.Disk {
	media := string(d.MediaType)
	if d.Protocol == schemas.NVMeProtocol {
		media = "NVMe"
	}
	return machine.Disk{
		Name:      d.ID,
		Model:     strings.TrimSpace(d.Model),
		Serial:    strings.TrimSpace(d.SerialNumber),
		SizeBytes: int64(deref(d.CapacityBytes)),
		Media:     media,
		Health:    string(d.Status.Health),
	}
}

// normSimpleDevice keeps present SimpleStorage devices.
func normSimpleDevice(d schemas.Device) (machine.Disk, bool) {
	if d.Status.State == schemas.AbsentState {
		return machine.Disk{}, false
	}
	return machine.Disk{
		Name:      d.Name,
		Model:     strings.TrimSpace(d.Model),
		SizeBytes: int64(deref(d.CapacityBytes)),
		Health:    string(d.Status.Health),
	}, true
}

func normPowerControl(pcs []schemas.PowerControl) machine.Power {
	var pw machine.Power
	for _, pc := range pcs {
		pw.Watts += int(deref(pc.PowerConsumedWatts) + 0.5)
		pw.CapacityWatts += int(deref(pc.PowerCapacityWatts) + 0.5)
	}
	return pw
}

func normLegacyPSU(s schemas.PowerSupply, red []schemas.Redundancy) machine.PSU {
	p := machine.PSU{
		Name:        firstNonEmpty(s.Name, s.MemberID, s.ID),
		Model:       strings.TrimSpace(s.Model),
		Serial:      strings.TrimSpace(s.SerialNumber),
		RatedWatts:  int(deref(s.PowerCapacityWatts) + 0.5),
		State:       string(s.Status.State),
		Health:      string(s.Status.Health),
		InputWatts:  int(deref(s.PowerInputWatts) + 0.5),
		OutputWatts: int(firstFloat(s.PowerOutputWatts, s.LastPowerOutputWatts) + 0.5),
	}
	for _, r := range red {
		if r.Mode != "" {
			p.Redundancy = string(r.Mode)
			break
		}
	}
	return p
}

func firstFloat(vs ...*float32) float32 {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	return 0
}

func normPSU(u *schemas.PowerSupplyUnit, redundancy string) machine.PSU {
	return machine.PSU{
		Name:       firstNonEmpty(u.Name, u.ID),
		Model:      strings.TrimSpace(u.Model),
		Serial:     strings.TrimSpace(u.SerialNumber),
		RatedWatts: int(deref(u.PowerCapacityWatts) + 0.5),
		State:      string(u.Status.State),
		Health:     string(u.Status.Health),
		Redundancy: redundancy,
	}
}

func normThermal(t *schemas.Thermal) machine.Thermal {
	var out machine.Thermal
	for _, s := range t.Temperatures {
		if s.ReadingCelsius != nil && s.Status.State != schemas.AbsentState {
			out.Temperatures = append(out.Temperatures, machine.Reading{Name: firstNonEmpty(s.Name, s.MemberID), Value: *s.ReadingCelsius, Unit: "Cel"})
		}
	}
	for _, f := range t.Fans {
		if f.Reading == nil || f.Status.State == schemas.AbsentState {
			continue
		}
		unit := "RPM"
		if f.ReadingUnits == schemas.PercentReadingUnits {
			unit = "%"
		}
		out.Fans = append(out.Fans, machine.Reading{Name: firstNonEmpty(f.Name, f.FanName, f.MemberID), Value: float64(*f.Reading), Unit: unit})
	}
	return out
}

func sensorName(s schemas.SensorArrayExcerpt) string {
	return firstNonEmpty(s.DeviceName, string(s.PhysicalContext), s.DataSourceURI)
}

// prefixParts names a System's parts "ID/part".
func prefixParts(s *systemPart, prefix string) {
	for i := range s.cpus {
		s.cpus[i].Socket = prefix + s.cpus[i].Socket
	}
	for i := range s.gpus {
		s.gpus[i].Slot = prefix + s.gpus[i].Slot
	}
	for i := range s.dimms {
		s.dimms[i].Slot = prefix + s.dimms[i].Slot
	}
	for i := range s.nics {
		s.nics[i].Name = prefix + s.nics[i].Name
	}
	for i := range s.disks {
		s.disks[i].Name = prefix + s.disks[i].Name
	}
}

// name prefixes a port or adapter name with the adapter's Chassis when the
// BMC has more than one.
func (a adapter) name(n string) string {
	if a.multi && a.chassis != "" {
		return a.chassis + "/" + n
	}
	return n
}

func normAdapter(na *schemas.NetworkAdapter) adapter {
	a := adapter{id: na.ID, vendor: strings.TrimSpace(na.Manufacturer), model: na.Model}
	for _, c := range na.Controllers {
		if c.FirmwarePackageVersion != "" {
			a.firmware = c.FirmwarePackageVersion
			break
		}
	}
	return a
}

func normNetworkPort(a *adapter, p *schemas.NetworkPort) machine.NIC {
	n := machine.NIC{Name: a.id + "/" + p.ID, Vendor: a.vendor, Model: a.model, Firmware: a.firmware,
		SpeedMbps: deref(p.CurrentLinkSpeedMbps), LinkUp: p.LinkStatus == schemas.UpNetworkPortLinkStatus}
	if len(p.AssociatedNetworkAddresses) > 0 {
		if mac, err := machine.NormalizeMAC(p.AssociatedNetworkAddresses[0]); err == nil {
			n.MAC = mac
		}
	}
	return n
}

func normPort(a *adapter, p *schemas.Port) machine.NIC {
	n := machine.NIC{Name: a.id + "/" + p.ID, Vendor: a.vendor, Model: a.model, Firmware: a.firmware,
		SpeedMbps: int(deref(p.CurrentSpeedGbps)*1000 + 0.5), LinkUp: p.LinkStatus == schemas.LinkUpPortLinkStatus}
	for _, addr := range p.Ethernet.AssociatedMACAddresses {
		if mac, err := machine.NormalizeMAC(addr); err == nil {
			n.MAC = mac
			break
		}
	}
	return n
}

// mergeNICs joins the Systems' EthernetInterfaces with the Chassis'
// NetworkAdapter ports: a port whose MAC matches an interface enriches it;
// an adapter without readable ports enriches the interface of the same Id
// (preferring one under the System named like the adapter's Chassis, as on
// HPE Cray EX blades: Chassis/Node0 holds Systems/Node0's adapters); the
// rest are added. Each interface is enriched at most once.
func mergeNICs(eths []machine.NIC, adapters []adapter) []machine.NIC {
	out := append([]machine.NIC(nil), eths...)
	done := make([]bool, len(out))
	find := func(pred func(machine.NIC) bool) int {
		for i, n := range out {
			if i < len(done) && !done[i] && pred(n) {
				return i
			}
		}
		return -1
	}
	enrich := func(i int, a adapter, p machine.NIC) {
		n := &out[i]
		n.Vendor = firstNonEmpty(n.Vendor, a.vendor)
		n.Model = firstNonEmpty(n.Model, a.model)
		n.Firmware = firstNonEmpty(n.Firmware, a.firmware)
		if n.SpeedMbps == 0 {
			n.SpeedMbps = p.SpeedMbps
		}
		n.LinkUp = n.LinkUp || p.LinkUp
		done[i] = true
	}
	for _, a := range adapters {
		if len(a.ports) == 0 {
			i := find(func(n machine.NIC) bool { return n.Name == a.chassis+"/"+a.id })
			if i < 0 {
				i = find(func(n machine.NIC) bool { return n.Name == a.id || strings.HasSuffix(n.Name, "/"+a.id) })
			}
			if i >= 0 {
				enrich(i, a, machine.NIC{})
			} else {
				out = append(out, machine.NIC{Name: a.name(a.id), Vendor: a.vendor, Model: a.model, Firmware: a.firmware})
			}
			continue
		}
		for _, p := range a.ports {
			i := -1
			if p.MAC != "" {
				i = find(func(n machine.NIC) bool { return n.MAC == p.MAC })
			}
			if i >= 0 {
				enrich(i, a, p)
			} else {
				p.Name = a.name(p.Name)
				out = append(out, p)
			}
		}
	}
	return out
}

// firmwareItem is one FirmwareInventory entry: its Redfish Id, and the
// component it names.
type firmwareItem struct {
	id, name, context, version string
	component                  string // set by nameFirmware

	// read raw for the UpdateService (update.go fill)
	uri, description, manufacturer, softwareID, sha256 string
	updateable                                         bool
	related                                            []string
}

// nameFirmware names each entry for what it is: the resource's Name ("NVIDIA
// A40", "System ROM"), not its Id, which some BMCs number (HPE iLO: "1",
// "2", ...); the Id only when there is no Name. Entries that share a name
// (four GPUs) are told apart by where they sit, then by Id: "NVIDIA A40
// (PCI-E Slot 1)".
func nameFirmware(items []firmwareItem) []firmwareItem {
	count := func(key func(firmwareItem) string) map[string]int {
		n := map[string]int{}
		for _, it := range items {
			n[key(it)]++
		}
		return n
	}
	for i := range items {
		items[i].component = firstNonEmpty(items[i].name, items[i].id)
	}
	byName := count(func(it firmwareItem) string { return it.component })
	for i, it := range items {
		if byName[it.component] > 1 {
			if q := firstNonEmpty(it.context, it.id); q != "" && q != it.component {
				items[i].component = it.component + " (" + q + ")"
			}
		}
	}
	byName = count(func(it firmwareItem) string { return it.component })
	for i, it := range items {
		if byName[it.component] > 1 && it.id != "" {
			items[i].component = it.component + " [" + it.id + "]"
		}
	}
	return items
}

// hpeDeviceContext is HPE iLO's Oem.Hpe.DeviceContext of a firmware entry,
// where the device sits ("PCI-E Slot 1"); "System Board" says nothing.
func hpeDeviceContext(raw []byte) string {
	var doc struct {
		Oem struct {
			Hpe struct {
				DeviceContext string `json:"DeviceContext"`
			} `json:"Hpe"`
		} `json:"Oem"`
	}
	if json.Unmarshal(raw, &doc) != nil || strings.EqualFold(doc.Oem.Hpe.DeviceContext, "System Board") {
		return ""
	}
	return strings.TrimSpace(doc.Oem.Hpe.DeviceContext)
}

// mergeFirmware puts the BIOS and BMC versions first (named "BIOS" and
// "BMC"), then the firmware inventory, less the entries that repeat them
// (Id or Name "BIOS"/"BMC" at the same version).
func mergeFirmware(bios, bmcVersion string, inv []firmwareItem) []machine.Firmware {
	var out []machine.Firmware
	if bios != "" {
		out = append(out, machine.Firmware{Component: "BIOS", Version: bios})
	}
	if bmcVersion != "" {
		out = append(out, machine.Firmware{Component: "BMC", Version: bmcVersion})
	}
	is := func(it firmwareItem, what string) bool { return it.id == what || it.name == what }
	for _, it := range inv {
		if (is(it, "BIOS") && it.version == bios) || (is(it, "BMC") && it.version == bmcVersion) {
			continue
		}
		out = append(out, machine.Firmware{Component: it.component, Version: it.version})
	}
	return out
}

// assemble merges the parts of one read into inv, in Redfish collection
// order so the result is deterministic. When the BMC has more than one
// System (HPE Cray EX blades: Node0, Node1; HGX: host and baseboard), slot
// and port names are prefixed with the System's Id ("Node1/GPU2").
func assemble(inv *machine.Inventory, systems []systemPart, chassis []chassisPart, mgr managerPart, fw []firmwareItem) {
	var eths []machine.NIC
	multi := len(systems) > 1
	for _, s := range systems {
		sys := s.sys
		if multi {
			prefixParts(&s, sys.ID+"/")
		}
		if inv.System.Vendor == "" && inv.System.Model == "" && inv.System.Serial == "" {
			inv.System = machine.System{Vendor: sys.Manufacturer, Model: sys.Model, Serial: sys.SerialNumber,
				UUID: sys.UUID, BIOSVersion: sys.BiosVersion, PowerState: string(sys.PowerState)}
		}
		if inv.System.BIOSVersion == "" {
			inv.System.BIOSVersion = sys.BiosVersion
		}
		if inv.System.PowerState == "" {
			inv.System.PowerState = string(sys.PowerState)
		}
		inv.CPUs = append(inv.CPUs, s.cpus...)
		inv.GPUs = append(inv.GPUs, s.gpus...)
		inv.DIMMs = append(inv.DIMMs, s.dimms...)
		inv.Disks = append(inv.Disks, s.disks...)
		eths = append(eths, s.nics...)
	}
	var adapters []adapter
	for _, c := range chassis {
		for i := range c.adapters {
			c.adapters[i].chassis = c.id
			c.adapters[i].multi = len(chassis) > 1
		}
		inv.PSUs = append(inv.PSUs, c.psus...)
		if inv.Power.Watts == 0 {
			inv.Power.Watts = c.power.Watts
		}
		if inv.Power.CapacityWatts == 0 {
			inv.Power.CapacityWatts = c.power.CapacityWatts
		}
		inv.Thermal.Temperatures = append(inv.Thermal.Temperatures, c.thermal.Temperatures...)
		inv.Thermal.Fans = append(inv.Thermal.Fans, c.thermal.Fans...)
		adapters = append(adapters, c.adapters...)
	}
	inv.NICs = mergeNICs(eths, adapters)
	inv.System.BMCVersion = mgr.version
	inv.Firmware = mergeFirmware(inv.System.BIOSVersion, mgr.version, fw)
}
