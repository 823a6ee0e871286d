package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// hgxSpec is one simulated HGX H100 8-GPU server: the single truth that
// both its virtual BMC (out-of-band, tree) and its in-RAM agent
// (in-band, inband) report, so a fault is set once and each side shows it
// as it would on the real machine. The defaults (defaultHGX) are a healthy
// node of the gpu-train-h100x8 recipe; it is ingot's own description of
// such a node, not a vendor capture.
type hgxSpec struct {
	hw           platform
	index        int // the node's number: its rack index, and what tells its MACs and serials apart
	serial, uuid string
	bios, bmc    string // BIOS and BMC firmware versions
	cpld, hgx    string // CPLD and HGX baseboard firmware (recipe firmware.other)
	gpus         []hgxGPU
	nics         []hgxNIC // nics[0] is the management port the machine boots over
	disks        []machine.Disk
	dimms, psus  int
	// bootModes are Boot.BootSourceOverrideMode's allowed values, the
	// first the mode the machine is in before ingot sets it; nil: the
	// Boot object has no mode and the BIOS attribute BootMode holds it
	// (the vendor fallback of pkg/bmc).
	bootModes []string
	biosAttrs map[string]any // BIOS attributes before ingot applies the recipe's
	stuckBIOS []string       // attributes the BIOS accepts and silently drops
	// fallenOff GPUs (the last ones) are on the BMC's list but have
	// fallen off the bus: the agent does not see them.
	fallenOff int
	// inbandPSUs: the simulated agent reports the PSUs. The real agent
	// (pkg/agent/inventory) reads none in-band; see the skipped case
	// "in-band inventory without PSUs".
	inbandPSUs bool
}

// platform is what a server model fixes: chassis, CPUs, GPU model, DIMM
// and PSU sizes.
type platform struct {
	sysModel, cpuVendor, cpuMaker, cpuModel string
	cores, threads, mhz                     int
	gpuModel, gpuMem                        string
	vramMiB, gpuMaxGen                      int
	dimmMiB                                 int
	psuModel                                string
	psuWatts                                int
}

// hgxH100 is Supermicro's SYS-821GE-TNHR: 2 Xeon 8480+, 8 H100 SXM5.
var hgxH100 = platform{sysModel: "SYS-821GE-TNHR", cpuVendor: "Intel", cpuMaker: "Intel(R) Corporation",
	cpuModel: "Intel(R) Xeon(R) Platinum 8480+", cores: 56, threads: 112, mhz: 3800,
	gpuModel: "NVIDIA H100 80GB HBM3", gpuMem: "HBM3", vramMiB: 81559, gpuMaxGen: 5,
	dimmMiB: 65536, psuModel: "PWS-3K06G-2R", psuWatts: 3000}

type hgxGPU struct {
	slot, serial, bus, firmware string
	gen, width                  int
}

type hgxNIC struct {
	name, model, mac, firmware string
	mbps                       int
	boot                       bool // the agent reached ingot over this port
	vlan                       int  // the switch port's VLAN (LLDP)
}

// defaultHGX is a healthy node, number i (MACs and serials differ per node).
func defaultHGX(i int) hgxSpec {
	s := hgxSpec{hw: hgxH100, index: i,
		serial: fmt.Sprintf("S821GE%04d", i), uuid: fmt.Sprintf("3a7c1e52-0b6d-4f7e-9a21-%012x", i),
		bios: "1.7.2", bmc: "7.10.30.00", cpld: "1.0.4", hgx: "1.5.0",
		dimms: 32, psus: 6, bootModes: []string{"Legacy", "UEFI"}, inbandPSUs: true,
		// Factory defaults: most differ from the recipe, so a machine whose
		// BIOS ingot did not set cannot pass.
		biosAttrs: map[string]any{
			"SriovGlobalEnable": "Disabled", "ProcVirtualization": "Disabled", "MmioAbove4Gb": "Disabled",
			"ProcessorHyperThreadingDisable": true, "SysProfile": "PerfPerWattOptimizedOs", "PcieAspmL1": "Enabled",
			"NumLock": "On", "BootSeqRetry": "Disabled", "ProcCStates": "Enabled", "ProcC1E": "Enabled",
			"SubNumaCluster": "Enabled", "PcieMaxPayloadSize": 256, "QuietBoot": true,
		},
	}
	for g, bus := range []string{"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"} {
		s.gpus = append(s.gpus, hgxGPU{slot: fmt.Sprintf("SXM%d", g+1), serial: fmt.Sprintf("16523%04d%04d", i, g),
			bus: "0000:" + bus + ":00.0", firmware: "96.00.74.00.01", gen: 5, width: 16})
	}
	s.nics = append(s.nics, hgxNIC{name: "eno1np0", model: "ConnectX-6 Lx", mac: fmt.Sprintf("52:54:00:%02x:00:00", i),
		firmware: "26.36.1010", mbps: 25000, boot: true, vlan: 110})
	for p := 1; p <= 8; p++ {
		s.nics = append(s.nics, hgxNIC{name: fmt.Sprintf("ens%dnp0", p), model: "ConnectX-7", mac: fmt.Sprintf("52:54:00:%02x:00:%02x", i, p),
			firmware: "28.39.1002", mbps: 400000, vlan: 210})
	}
	s.disks = append(s.disks, machine.Disk{Name: "/dev/nvme0n1", Model: "Micron_7450_MTFDKBA960TFR", Serial: fmt.Sprintf("M7450%04d", i),
		SizeBytes: 960_197_124_096, Media: "NVMe", Health: "OK"})
	for d := 1; d <= 8; d++ {
		s.disks = append(s.disks, machine.Disk{Name: fmt.Sprintf("/dev/nvme%dn1", d), Model: "SAMSUNG MZQL23T8HCLS-00A07",
			Serial: fmt.Sprintf("S64H%04d%02d", i, d), SizeBytes: 3_840_755_982_336, Media: "NVMe", Health: "OK"})
	}
	return s
}

func (s hgxSpec) bootMAC() string { return s.nics[0].mac }

// inband is what the agent reports from /sys, /proc, SMBIOS and
// nvidia-smi, in the shape pkg/agent/inventory gives it, with two
// differences the skipped cases keep track of: the PSUs (inbandPSUs), and
// the ConnectX-6 Lx's model, which the real agent cannot name yet.
func (s hgxSpec) inband() machine.Inventory {
	inv := machine.Inventory{Source: "agent",
		System: machine.System{Vendor: "Supermicro", Model: s.hw.sysModel, Serial: s.serial, UUID: s.uuid,
			BIOSVersion: s.bios, PowerState: "On"}}
	for c := range 2 {
		inv.CPUs = append(inv.CPUs, machine.CPU{Socket: fmt.Sprintf("CPU%d", c), Vendor: s.hw.cpuVendor,
			Model: s.hw.cpuModel, Cores: s.hw.cores, Threads: s.hw.threads, MaxMHz: s.hw.mhz})
	}
	for d := range s.dimms {
		inv.DIMMs = append(inv.DIMMs, machine.DIMM{Slot: hgxDIMMSlot(d), SizeMiB: int64(s.hw.dimmMiB), Type: "DDR5", SpeedMHz: 4800, Vendor: "Samsung"})
	}
	for _, g := range s.gpus[:len(s.gpus)-s.fallenOff] {
		link := machine.PCIeLink{Gen: g.gen, Width: g.width}
		inv.GPUs = append(inv.GPUs, machine.GPU{Vendor: "NVIDIA", Model: s.hw.gpuModel, VRAMMiB: int64(s.hw.vramMiB),
			PCIAddress: g.bus, LinkCurrent: link, LinkMax: machine.PCIeLink{Gen: s.hw.gpuMaxGen, Width: 16}, Serial: g.serial, Firmware: g.firmware})
	}
	for _, n := range s.nics {
		inv.NICs = append(inv.NICs, machine.NIC{Name: n.name, MAC: n.mac, Vendor: "Mellanox", Model: n.model,
			SpeedMbps: n.mbps, LinkUp: n.mbps > 0, Boot: n.boot,
			LLDP: &machine.LLDPNeighbor{ChassisID: "b8:59:9f:00:10:07", PortID: "Eth1/" + n.name, SystemName: "leaf-r07", VLAN: n.vlan}})
	}
	inv.Disks = append(inv.Disks, s.disks...)
	if s.inbandPSUs {
		inv.PSUs = s.psuList()
	}
	inv.Firmware = append(inv.Firmware, machine.Firmware{Component: "BIOS", Version: s.bios})
	for i, g := range inv.GPUs {
		inv.Firmware = append(inv.Firmware, machine.Firmware{Component: fmt.Sprintf("GPU%d", i), Version: g.Firmware})
	}
	return inv
}

func (s hgxSpec) psuList() []machine.PSU {
	var out []machine.PSU
	for p := range s.psus {
		out = append(out, machine.PSU{Name: fmt.Sprintf("PSU%d", p+1), Model: s.hw.psuModel, Serial: fmt.Sprintf("P3K%s%d", s.serial[6:], p),
			RatedWatts: s.hw.psuWatts, State: "Enabled", Health: "OK"})
	}
	return out
}

func hgxDIMMSlot(d int) string { return fmt.Sprintf("P%d_DIMM%c%d", d/16, 'A'+rune(d%16/2), d%2+1) }

// tree is the Redfish tree the node's virtual BMC serves, keyed by the
// path under /redfish/v1: one ComputerSystem with Boot, Bios (and its
// settings object), Processors (2 CPUs, the GPUs), Memory and Storage; one
// Chassis with the PSUs (Power) and the NICs (NetworkAdapters); the BMC's
// Manager; UpdateService/FirmwareInventory. It holds what pkg/bmc's
// Inventory reads (see pkg/bmc/inventory.go, normalize.go).
func (s hgxSpec) tree() map[string]map[string]any {
	const sys, ch = "/redfish/v1/Systems/1", "/redfish/v1/Chassis/1"
	t := map[string]map[string]any{
		"": {"@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "Id": "RootService", "Name": "ingot HGX H100 BMC",
			"RedfishVersion": "1.15.0", "UUID": s.uuid, "Systems": hgxRef("/redfish/v1/Systems"), "Chassis": hgxRef("/redfish/v1/Chassis"),
			"Managers": hgxRef("/redfish/v1/Managers"), "UpdateService": hgxRef("/redfish/v1/UpdateService"),
			"AccountService": hgxRef("/redfish/v1/AccountService"), "SessionService": hgxRef("/redfish/v1/SessionService"),
			"Links": map[string]any{"Sessions": hgxRef("/redfish/v1/SessionService/Sessions")}},
		"AccountService": {"@odata.type": "#AccountService.v1_13_0.AccountService", "Id": "AccountService", "Name": "Account Service",
			"Accounts": hgxRef("/redfish/v1/AccountService/Accounts")},
		"AccountService/Accounts/1": {"@odata.type": "#ManagerAccount.v1_10_0.ManagerAccount", "Id": "1", "Name": "User Account",
			"UserName": "admin", "RoleId": "Administrator", "Enabled": true},
		"Managers/1": {"@odata.type": "#Manager.v1_19_0.Manager", "Id": "1", "Name": "BMC", "ManagerType": "BMC",
			"FirmwareVersion": s.bmc, "Status": hgxOK()},
		"UpdateService": {"@odata.type": "#UpdateService.v1_11_0.UpdateService", "Id": "UpdateService", "Name": "Update Service",
			"FirmwareInventory": hgxRef("/redfish/v1/UpdateService/FirmwareInventory")},
	}
	boot := map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
		"BootSourceOverrideTarget@Redfish.AllowableValues": []string{"None", "Pxe", "Hdd", "Cd", "BiosSetup", "UefiHttp"}}
	if s.bootModes != nil {
		boot["BootSourceOverrideMode"] = s.bootModes[0]
		boot["BootSourceOverrideMode@Redfish.AllowableValues"] = s.bootModes
	}
	t["Systems/1"] = map[string]any{"@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": "1", "Name": "System",
		"SystemType": "Physical", "Manufacturer": "Supermicro", "Model": s.hw.sysModel, "SerialNumber": s.serial, "UUID": s.uuid,
		"PowerState": "Off", "BiosVersion": s.bios, "Status": hgxOK(), "Boot": boot,
		"ProcessorSummary": map[string]any{"Count": 2, "Model": s.hw.cpuModel},
		"MemorySummary":    map[string]any{"TotalSystemMemoryGiB": s.dimms * s.hw.dimmMiB / 1024},
		"Bios":             hgxRef(sys + "/Bios"), "Processors": hgxRef(sys + "/Processors"), "Memory": hgxRef(sys + "/Memory"),
		"Storage": hgxRef(sys + "/Storage"),
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{"target": sys + "/Actions/ComputerSystem.Reset",
			"ResetType@Redfish.AllowableValues": []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart", "PowerCycle"}}},
		"Links": map[string]any{"Chassis": []any{hgxRef(ch)}, "ManagedBy": []any{hgxRef("/redfish/v1/Managers/1")}}}
	t["Systems/1/Bios"] = map[string]any{"@odata.type": "#Bios.v1_2_0.Bios", "Id": "Bios", "Name": "BIOS Configuration",
		"AttributeRegistry": "BiosAttributeRegistry.v1_0_0", "Attributes": s.biosAttrs,
		"@Redfish.Settings": map[string]any{"@odata.type": "#Settings.v1_3_5.Settings", "SettingsObject": hgxRef(sys + "/Bios/Settings")}}
	t["Systems/1/Bios/Settings"] = map[string]any{"@odata.type": "#Bios.v1_2_0.Bios", "Id": "Settings", "Name": "BIOS pending settings",
		"Attributes": map[string]any{}}

	procs := []string{}
	for c := range 2 {
		id := fmt.Sprintf("CPU%d", c)
		procs = append(procs, id)
		t["Systems/1/Processors/"+id] = map[string]any{"@odata.type": "#Processor.v1_18_0.Processor", "Id": id, "Name": "Processor",
			"ProcessorType": "CPU", "Socket": id, "Manufacturer": s.hw.cpuMaker, "Model": s.hw.cpuModel,
			"TotalCores": s.hw.cores, "TotalThreads": s.hw.threads, "MaxSpeedMHz": s.hw.mhz, "Status": hgxOK()}
	}
	for _, g := range s.gpus {
		id := "GPU_" + g.slot
		procs = append(procs, id)
		t["Systems/1/Processors/"+id] = map[string]any{"@odata.type": "#Processor.v1_18_0.Processor", "Id": id, "Name": "GPU " + g.slot,
			"ProcessorType": "GPU", "Manufacturer": "NVIDIA", "Model": s.hw.gpuModel, "SerialNumber": g.serial,
			"FirmwareVersion": g.firmware, "Status": hgxOK(),
			"Location":        map[string]any{"PartLocation": map[string]any{"ServiceLabel": g.slot, "LocationType": "Slot"}},
			"ProcessorMemory": []any{map[string]any{"CapacityMiB": s.hw.vramMiB, "MemoryType": s.hw.gpuMem, "IntegratedMemory": true}},
			"SystemInterface": map[string]any{"InterfaceType": "PCIe", "PCIe": map[string]any{
				"PCIeType": fmt.Sprintf("Gen%d", g.gen), "MaxPCIeType": fmt.Sprintf("Gen%d", s.hw.gpuMaxGen), "LanesInUse": g.width, "MaxLanes": 16}}}
	}
	hgxCollection(t, "Systems", "#ComputerSystemCollection.ComputerSystemCollection", "1")
	hgxCollection(t, "Systems/1/Processors", "#ProcessorCollection.ProcessorCollection", procs...)

	var dimms []string
	for d := range s.dimms {
		id := hgxDIMMSlot(d)
		dimms = append(dimms, id)
		t["Systems/1/Memory/"+id] = map[string]any{"@odata.type": "#Memory.v1_17_0.Memory", "Id": id, "Name": id, "DeviceLocator": id,
			"CapacityMiB": s.hw.dimmMiB, "MemoryType": "DRAM", "MemoryDeviceType": "DDR5", "OperatingSpeedMhz": 4800,
			"Manufacturer": "Samsung", "SerialNumber": fmt.Sprintf("%s%02d", s.serial[6:], d), "Status": hgxOK()}
	}
	hgxCollection(t, "Systems/1/Memory", "#MemoryCollection.MemoryCollection", dimms...)

	var drives []any
	for d, disk := range s.disks {
		id := fmt.Sprintf("NVMe%d", d)
		drives = append(drives, hgxRef(sys+"/Storage/NVMe/Drives/"+id))
		t["Systems/1/Storage/NVMe/Drives/"+id] = map[string]any{"@odata.type": "#Drive.v1_17_0.Drive", "Id": id, "Name": id,
			"Model": disk.Model, "SerialNumber": disk.Serial, "CapacityBytes": disk.SizeBytes, "Protocol": "NVMe", "MediaType": "SSD",
			"Status": hgxOK()}
	}
	t["Systems/1/Storage/NVMe"] = map[string]any{"@odata.type": "#Storage.v1_15_0.Storage", "Id": "NVMe", "Name": "NVMe drives",
		"Drives": drives, "Drives@odata.count": len(drives), "Status": hgxOK()}
	hgxCollection(t, "Systems/1/Storage", "#StorageCollection.StorageCollection", "NVMe")

	t["Chassis/1"] = map[string]any{"@odata.type": "#Chassis.v1_23_0.Chassis", "Id": "1", "Name": "Chassis", "ChassisType": "RackMount",
		"Manufacturer": "Supermicro", "Model": s.hw.sysModel, "SerialNumber": s.serial, "Status": hgxOK(),
		"Power": hgxRef(ch + "/Power"), "NetworkAdapters": hgxRef(ch + "/NetworkAdapters"),
		"Links": map[string]any{"ComputerSystems": []any{hgxRef(sys)}, "ManagedBy": []any{hgxRef("/redfish/v1/Managers/1")}}}
	hgxCollection(t, "Chassis", "#ChassisCollection.ChassisCollection", "1")
	var psus []any
	for i, p := range s.psuList() {
		psus = append(psus, map[string]any{"@odata.id": fmt.Sprintf("%s/Power#/PowerSupplies/%d", ch, i), "MemberId": fmt.Sprint(i),
			"Name": p.Name, "Model": p.Model, "SerialNumber": p.Serial, "PowerCapacityWatts": p.RatedWatts, "PowerInputWatts": 410,
			"Status": map[string]any{"State": p.State, "Health": p.Health}})
	}
	t["Chassis/1/Power"] = map[string]any{"@odata.type": "#Power.v1_7_1.Power", "Id": "Power", "Name": "Power", "PowerSupplies": psus,
		"PowerControl": []any{map[string]any{"@odata.id": ch + "/Power#/PowerControl/0", "MemberId": "0", "Name": "System Power Control",
			"PowerConsumedWatts": 2450, "PowerCapacityWatts": s.hw.psuWatts * s.psus}}}
	var adapters []string
	for i, n := range s.nics {
		id := fmt.Sprintf("NIC%d", i)
		adapters = append(adapters, id)
		base := "Chassis/1/NetworkAdapters/" + id
		na := map[string]any{"@odata.type": "#NetworkAdapter.v1_9_0.NetworkAdapter", "Id": id, "Name": n.model,
			"Manufacturer": "NVIDIA", "Model": n.model, "Status": hgxOK(), "Ports": hgxRef("/redfish/v1/" + base + "/Ports")}
		// Each NIC model runs its own firmware line (ConnectX-7 28.x,
		// ConnectX-6 Lx 26.x): the recipe pins each model's.
		if n.firmware != "" {
			na["Controllers"] = []any{map[string]any{"FirmwarePackageVersion": n.firmware}}
		}
		t[base] = na
		link := "LinkDown"
		if n.mbps > 0 {
			link = "LinkUp"
		}
		t[base+"/Ports/1"] = map[string]any{"@odata.type": "#Port.v1_9_0.Port", "Id": "1", "Name": n.name,
			"CurrentSpeedGbps": n.mbps / 1000, "LinkStatus": link, "Ethernet": map[string]any{"AssociatedMACAddresses": []string{n.mac}}}
		hgxCollection(t, base+"/Ports", "#PortCollection.PortCollection", "1")
	}
	hgxCollection(t, "Chassis/1/NetworkAdapters", "#NetworkAdapterCollection.NetworkAdapterCollection", adapters...)

	hgxCollection(t, "Managers", "#ManagerCollection.ManagerCollection", "1")
	hgxCollection(t, "AccountService/Accounts", "#ManagerAccountCollection.ManagerAccountCollection", "1")
	fw := []struct{ id, name, version string }{{"BIOS", "BIOS", s.bios}, {"BMC", "BMC", s.bmc},
		// Named as the recipe's firmware.other keys: pkg/drift matches
		// them exactly against the entry's Name.
		{"CPLD_Motherboard", "cpld", s.cpld}, {"HGX_FW_Baseboard", "hgx-baseboard", s.hgx}}
	for _, g := range s.gpus {
		fw = append(fw, struct{ id, name, version string }{"HGX_FW_GPU_" + g.slot, "GPU " + g.slot, g.firmware})
	}
	var items []string
	for _, f := range fw {
		items = append(items, f.id)
		t["UpdateService/FirmwareInventory/"+f.id] = map[string]any{"@odata.type": "#SoftwareInventory.v1_9_0.SoftwareInventory",
			"Id": f.id, "Name": f.name, "Version": f.version, "Updateable": true, "Status": hgxOK()}
	}
	hgxCollection(t, "UpdateService/FirmwareInventory", "#SoftwareInventoryCollection.SoftwareInventoryCollection", items...)
	for p, doc := range t {
		doc["@odata.id"] = strings.TrimSuffix("/redfish/v1/"+p, "/")
	}
	return t
}

func hgxRef(id string) map[string]any { return map[string]any{"@odata.id": id} }

func hgxOK() map[string]any { return map[string]any{"State": "Enabled", "Health": "OK"} }

func hgxCollection(t map[string]map[string]any, path, typ string, ids ...string) {
	ms := make([]any, len(ids))
	for i, id := range ids {
		ms[i] = hgxRef("/redfish/v1/" + path + "/" + id)
	}
	t[path] = map[string]any{"@odata.type": typ, "Name": "Collection", "Members": ms, "Members@odata.count": len(ms)}
}

// writeHGXTree writes the spec's tree into dir in the DMTF mockup layout
// (dir/redfish/v1/.../index.json) that pkg/vbmc serves.
func writeHGXTree(dir string, s hgxSpec) error {
	for p, body := range s.tree() {
		d := filepath.Join(dir, "redfish", "v1", filepath.FromSlash(p))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		b, err := json.MarshalIndent(body, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "index.json"), b, 0o644); err != nil {
			return fmt.Errorf("writing the HGX BMC tree: %w", err)
		}
	}
	return nil
}
