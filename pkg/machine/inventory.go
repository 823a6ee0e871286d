package machine

import "time"

// Inventory is the normalized hardware picture of one machine. Out-of-band
// (Redfish) and in-band (agent) readers both fill it; fields a source cannot
// see stay zero. Problems records parts a source answered badly: the rest of
// the inventory is still kept.
type Inventory struct {
	Source   string     `json:"source"` // "redfish", "agent"
	Taken    time.Time  `json:"taken"`
	System   System     `json:"system"`
	CPUs     []CPU      `json:"cpus,omitempty"`
	DIMMs    []DIMM     `json:"dimms,omitempty"`
	GPUs     []GPU      `json:"gpus,omitempty"`
	NICs     []NIC      `json:"nics,omitempty"`
	Disks    []Disk     `json:"disks,omitempty"`
	PSUs     []PSU      `json:"psus,omitempty"`
	Power    Power      `json:"power,omitempty"`
	Thermal  Thermal    `json:"thermal,omitempty"`
	Firmware []Firmware `json:"firmware,omitempty"`
	Software Software   `json:"software,omitempty"` // first boot of the installed OS
	// Measurements are the acceptance and burn-in numbers of the job that
	// verified the machine (Source "verified"): kept in its history so a
	// node's bus bandwidth or Gflop/s can be followed across reimages.
	Measurements []Measurement `json:"measurements,omitempty"`
	Problems     []Problem     `json:"problems,omitempty"`
	Extra        interface{}   `json:"-"`
}

// System identifies the box.
type System struct {
	Vendor      string `json:"vendor,omitempty"`
	Model       string `json:"model,omitempty"`
	Serial      string `json:"serial,omitempty"`
	UUID        string `json:"uuid,omitempty"`
	BIOSVersion string `json:"bios_version,omitempty"`
	BMCVersion  string `json:"bmc_version,omitempty"`
	PowerState  string `json:"power_state,omitempty"`
}

// CPU is one socket.
type CPU struct {
	Socket  string `json:"socket,omitempty"`
	Vendor  string `json:"vendor,omitempty"`
	Model   string `json:"model,omitempty"`
	Cores   int    `json:"cores,omitempty"`
	Threads int    `json:"threads,omitempty"`
	MaxMHz  int    `json:"max_mhz,omitempty"`
}

// DIMM is one memory module.
type DIMM struct {
	Slot     string `json:"slot,omitempty"`
	SizeMiB  int64  `json:"size_mib,omitempty"`
	Type     string `json:"type,omitempty"`
	SpeedMHz int    `json:"speed_mhz,omitempty"`
	Vendor   string `json:"vendor,omitempty"`
	Serial   string `json:"serial,omitempty"`
}

// PCIeLink is a link's generation and width; zero means unknown.
type PCIeLink struct {
	Gen   int `json:"gen,omitempty"`
	Width int `json:"width,omitempty"`
}

// GPU is one accelerator.
type GPU struct {
	Slot        string   `json:"slot,omitempty"`
	Vendor      string   `json:"vendor,omitempty"`
	Model       string   `json:"model,omitempty"`
	VRAMMiB     int64    `json:"vram_mib,omitempty"`
	PCIAddress  string   `json:"pci_address,omitempty"`
	LinkCurrent PCIeLink `json:"link_current,omitempty"`
	LinkMax     PCIeLink `json:"link_max,omitempty"`
	Serial      string   `json:"serial,omitempty"`
	Firmware    string   `json:"firmware,omitempty"`
	Health      string   `json:"health,omitempty"`
}

// NIC is one network port.
type NIC struct {
	Name      string `json:"name,omitempty"`
	MAC       string `json:"mac,omitempty"`
	Vendor    string `json:"vendor,omitempty"`
	Model     string `json:"model,omitempty"`
	SpeedMbps int    `json:"speed_mbps,omitempty"`
	LinkUp    bool   `json:"link_up,omitempty"`
	Firmware  string `json:"firmware,omitempty"`
	// PCIAddress and the PCIe link of the port's device (in-band only;
	// zero for virtual NICs).
	PCIAddress  string   `json:"pci_address,omitempty"`
	LinkCurrent PCIeLink `json:"link_current,omitzero"`
	LinkMax     PCIeLink `json:"link_max,omitzero"`
	// Boot: the agent reached ingot over this port (the network the
	// machine boots on, which recipes call the management network).
	Boot bool `json:"boot,omitempty"`
	// LLDP is what the switch port announced, when it sends LLDP.
	LLDP *LLDPNeighbor `json:"lldp,omitempty"`
}

// LLDPNeighbor is the switch port a NIC is cabled to, from its LLDP frames.
type LLDPNeighbor struct {
	ChassisID  string `json:"chassis_id,omitempty"`
	PortID     string `json:"port_id,omitempty"`
	PortDescr  string `json:"port_descr,omitempty"`
	SystemName string `json:"system_name,omitempty"`
	VLAN       int    `json:"vlan,omitempty"` // port VLAN ID (IEEE 802.1 TLV), 0 when not sent
}

// Disk is one block device.
type Disk struct {
	Name      string `json:"name,omitempty"` // /dev/nvme0n1, or the BMC's id
	Model     string `json:"model,omitempty"`
	Serial    string `json:"serial,omitempty"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
	Media     string `json:"media,omitempty"` // SSD, HDD, NVMe
	Health    string `json:"health,omitempty"`
}

// PSU is one power supply.
type PSU struct {
	Name        string `json:"name,omitempty"`
	Model       string `json:"model,omitempty"`
	Serial      string `json:"serial,omitempty"`
	RatedWatts  int    `json:"rated_watts,omitempty"`
	State       string `json:"state,omitempty"`  // Enabled, Absent, ...
	Health      string `json:"health,omitempty"` // OK, Warning, Critical
	Redundancy  string `json:"redundancy,omitempty"`
	InputWatts  int    `json:"input_watts,omitempty"`
	OutputWatts int    `json:"output_watts,omitempty"`
}

// Power is what the machine draws now.
type Power struct {
	Watts         int `json:"watts,omitempty"`
	CapacityWatts int `json:"capacity_watts,omitempty"`
}

// Thermal holds temperatures and fans.
type Thermal struct {
	Temperatures []Reading `json:"temperatures,omitempty"`
	Fans         []Reading `json:"fans,omitempty"`
}

// Reading is one named sensor value with its unit.
type Reading struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "Cel", "RPM", "%"
}

// Firmware is one component's running firmware version.
type Firmware struct {
	Component string `json:"component"` // "BIOS", "BMC", "GPU0", "NIC eth0"
	Version   string `json:"version"`
}

// Software is what the installed OS reports at first boot.
type Software struct {
	Kernel    string            `json:"kernel,omitempty"`
	OSRelease string            `json:"os_release,omitempty"`
	Drivers   map[string]string `json:"drivers,omitempty"` // nvidia -> 535.309.01
	Hostname  string            `json:"hostname,omitempty"`
	// CloudInit is cloud-init's outcome when it ran: "done", or "error:
	// ..." with its errors ("" when cloud-init is not installed).
	CloudInit string `json:"cloud_init,omitempty"`
}

// Measurement is one check's outcome and numbers, in the check's unit
// (recipe.CheckSpec: bytes/s, flop/s, bits/s, ...).
type Measurement struct {
	Check   string             `json:"check"`
	OK      bool               `json:"ok"`
	Waived  bool               `json:"waived,omitempty"`
	Value   float64            `json:"value"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Detail  string             `json:"detail,omitempty"`
}

// Problem records a part that could not be read.
type Problem struct {
	Part   string `json:"part"`   // "Systems/1/Storage/1/Drives/M.2-2"
	Detail string `json:"detail"` // the error, as the source gave it
}
