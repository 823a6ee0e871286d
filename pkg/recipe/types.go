// Package recipe defines a server class (a recipe): the reproducible unit
// every server of that class must be. Recipes are YAML files in recipes/,
// reviewed in pull requests; this package parses them strictly, lints them,
// resolves `extends`, diffs two versions and produces a JSON Schema.
package recipe

// Recipe is one server class. The YAML keys are the json tags; a field
// without omitempty is required when its mapping is given. The tags enum
// (allowed values), min, max and pattern are checked by lint and copied
// into the JSON Schema, so the two cannot disagree.
type Recipe struct {
	Name        string `json:"name" doc:"unique class name, e.g. gpu-train-h100x8"`
	Version     string `json:"version" doc:"the recipe's own version, bumped on every change"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty" doc:"team or person answering for this class"`
	Extends     string `json:"extends,omitempty" doc:"name of one base recipe whose fields this one overrides"`

	Hardware   Hardware          `json:"hardware,omitempty"`
	Firmware   Firmware          `json:"firmware,omitempty"`
	BIOS       BIOS              `json:"bios,omitempty"`
	OS         OS                `json:"os,omitempty"`
	Drivers    map[string]string `json:"drivers,omitempty" doc:"pinned driver versions verified at first boot: nvidia, cuda, ofed"`
	Network    Network           `json:"network,omitempty"`
	Acceptance Acceptance        `json:"acceptance,omitempty"`
	Power      Power             `json:"power,omitempty"`
	Timeouts   Timeouts          `json:"timeouts,omitempty"`
}

// Hardware is what every machine of the class must have.
type Hardware struct {
	GPUs   []GPUSpec  `json:"gpus,omitempty"`
	CPU    *CPUSpec   `json:"cpu,omitempty"`
	Memory *MemSpec   `json:"memory,omitempty"`
	NICs   []NICSpec  `json:"nics,omitempty"`
	PSUs   *PSUSpec   `json:"psus,omitempty"`
	Disks  []DiskSpec `json:"disks,omitempty"`
}

// GPUSpec is one group of identical GPUs.
type GPUSpec struct {
	Vendor    string `json:"vendor" doc:"nvidia, amd, intel" enum:"nvidia,amd,intel"`
	Model     string `json:"model" doc:"substring matched against the reported model, e.g. H100"`
	Count     int    `json:"count" min:"1"`
	MinVRAM   Size   `json:"min_vram,omitempty" doc:"e.g. 80GiB"`
	PCIeGen   int    `json:"pcie_gen,omitempty" doc:"expected PCIe generation, 1-6" min:"1" max:"6"`
	PCIeWidth int    `json:"pcie_width,omitempty" doc:"expected lanes: 1, 2, 4, 8 or 16" enum:"1,2,4,8,16"`
}

// CPUSpec describes the processors.
type CPUSpec struct {
	Model    string `json:"model,omitempty" doc:"regular expression matched against the model string"`
	Sockets  int    `json:"sockets,omitempty" min:"1"`
	MinCores int    `json:"min_cores,omitempty" doc:"cores per socket, at least" min:"1"`
}

// MemSpec describes system memory.
type MemSpec struct {
	Total Size `json:"total" doc:"at least this much, e.g. 2TiB"`
	DIMMs int  `json:"dimms,omitempty" doc:"populated DIMM count" min:"1"`
}

// NICSpec is one group of identical network ports.
type NICSpec struct {
	Model string `json:"model,omitempty" doc:"substring of the model, e.g. ConnectX-7"`
	Speed Speed  `json:"speed,omitempty" doc:"e.g. 400Gbps"`
	Count int    `json:"count,omitempty" min:"1"`
	Role  string `json:"role" doc:"management or workload" enum:"management,workload"`
}

// PSUSpec describes the power supplies.
type PSUSpec struct {
	Count      int    `json:"count" min:"1"`
	RatedWatts int    `json:"rated_watts,omitempty" min:"1"`
	Redundancy string `json:"redundancy,omitempty" doc:"N, N+1, N+N" pattern:"^N(\\+([0-9]+|N))?$"`
}

// DiskSpec selects disks. Exactly one entry has Boot: true.
type DiskSpec struct {
	Boot    bool   `json:"boot,omitempty" doc:"this rule selects the disk the image is written to"`
	MinSize Size   `json:"min_size,omitempty"`
	MaxSize Size   `json:"max_size,omitempty"`
	Model   string `json:"model,omitempty" doc:"substring of the model"`
	Serial  string `json:"serial,omitempty"`
	Path    string `json:"path,omitempty" doc:"device path, e.g. /dev/nvme0n1 or /dev/disk/by-path/..."`
	Media   string `json:"media,omitempty" doc:"ssd, hdd, nvme" enum:"ssd,hdd,nvme"`
	Count   int    `json:"count,omitempty" min:"1"`
}

// Firmware pins versions.
type Firmware struct {
	BIOS  string            `json:"bios,omitempty"`
	BMC   string            `json:"bmc,omitempty"`
	GPU   string            `json:"gpu,omitempty"`
	NIC   string            `json:"nic,omitempty"`
	Other map[string]string `json:"other,omitempty" doc:"component name -> version"`
}

// BIOS holds the boot mode and Redfish BIOS attributes.
type BIOS struct {
	BootMode   string           `json:"boot_mode,omitempty" doc:"uefi or legacy" enum:"uefi,legacy"`
	Attributes map[string]Value `json:"attributes,omitempty" doc:"Redfish attribute name -> string, int or bool"`
}

// OS is what the machine boots and installs.
type OS struct {
	Image     ImageRef   `json:"image,omitempty"`
	Agent     AgentBoot  `json:"agent,omitempty"`
	Cmdline   string     `json:"cmdline,omitempty" doc:"extra kernel command line for the installed OS"`
	FirstBoot *FirstBoot `json:"first_boot,omitempty"`
	Handoff   string     `json:"handoff,omitempty" doc:"how the agent hands over to the installed OS: reboot or kexec" enum:"reboot,kexec"`
}

// ImageRef pins a golden image.
type ImageRef struct {
	Name   string `json:"name" doc:"a folder name in images/"`
	SHA256 string `json:"sha256" doc:"64 lowercase hex digits of the compressed artifact" pattern:"^[0-9a-f]{64}$"`
	Format string `json:"format,omitempty" doc:"raw, raw.zst" enum:"raw,raw.zst"`
	URL    string `json:"url,omitempty" doc:"where to fetch it; default: ingot's content store"`
}

// Artifact is a pinned file: a kernel or an initrd.
type Artifact struct {
	Path   string `json:"path,omitempty" doc:"name in ingot's artifact store or a URL"`
	SHA256 string `json:"sha256" doc:"64 lowercase hex digits" pattern:"^[0-9a-f]{64}$"`
}

// AgentBoot is the in-RAM agent the machine network-boots.
type AgentBoot struct {
	Kernel  Artifact `json:"kernel,omitempty"`
	Initrd  Artifact `json:"initrd,omitempty"`
	Cmdline string   `json:"cmdline,omitempty" doc:"extra kernel arguments for the agent, e.g. console=ttyS0"`
}

// FirstBoot is the first-boot configuration of the installed OS.
type FirstBoot struct {
	CloudInit string `json:"cloud_init,omitempty" doc:"cloud-init user-data (YAML text)"`
}

// Network is the class's addressing.
type Network struct {
	ManagementVLAN int    `json:"management_vlan,omitempty" doc:"1-4094" min:"1" max:"4094"`
	WorkloadVLAN   int    `json:"workload_vlan,omitempty" doc:"1-4094" min:"1" max:"4094"`
	Hostname       string `json:"hostname,omitempty" doc:"pattern, e.g. h100-{rack}-{index:02d}"`
	Pool           string `json:"pool,omitempty" doc:"IPv4 CIDR the machines' addresses come from"`
}

// Acceptance is what proves a machine before it is sold.
type Acceptance struct {
	Checks []Check `json:"checks,omitempty"`
	BurnIn *BurnIn `json:"burn_in,omitempty"`
}

// Check is one acceptance check and its threshold.
type Check struct {
	Name string            `json:"name" doc:"gpu-count, gpu-model, pcie-link, memory-size, nic-link, disk-health, gpu-burn, nccl-allreduce, ..."`
	Min  float64           `json:"min,omitempty"`
	Max  float64           `json:"max,omitempty"`
	Args map[string]string `json:"args,omitempty"`
}

// BurnIn is the sustained-load test.
type BurnIn struct {
	Duration     Duration `json:"duration" doc:"e.g. 2h"`
	MaxGPUTempC  int      `json:"max_gpu_temp_c,omitempty" min:"1" max:"120"`
	MaxXidErrors int      `json:"max_xid_errors,omitempty" min:"0"`
	MinTFLOPS    float64  `json:"min_tflops,omitempty"`
}

// Power is the expected draw and PSU margin.
type Power struct {
	IdleWatts   int     `json:"idle_watts,omitempty" min:"1"`
	LoadWatts   int     `json:"load_watts,omitempty" min:"1"`
	DeratingPct int     `json:"derating_pct,omitempty" doc:"PSU margin kept free, percent" min:"0" max:"50"`
	CostPerKWh  float64 `json:"cost_per_kwh,omitempty" doc:"currency units per kWh, for cost reports" min:"0"`
}

// Timeouts bound each lifecycle step; zero means the engine's default.
type Timeouts struct {
	Power     Duration `json:"power,omitempty" doc:"BMC power actions"`
	POST      Duration `json:"post,omitempty" doc:"power-on to first DHCP; GPU servers take 5-15m"`
	Provision Duration `json:"provision,omitempty" doc:"agent start to image written"`
	Verify    Duration `json:"verify,omitempty" doc:"acceptance and first boot"`
	Retries   int      `json:"retries,omitempty" doc:"attempts per step before failed" min:"0"`
}
