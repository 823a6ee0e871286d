// Package recipe defines a server class (a recipe): the reproducible unit
// every server of that class must be. Recipes are YAML files in recipes/,
// reviewed in pull requests; this package parses them strictly, lints them,
// resolves `extends`, diffs two versions and produces a JSON Schema.
package recipe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Recipe is one server class. The YAML keys are the json tags; a field
// without omitempty or omitzero is required when its mapping is given. The tags enum
// (allowed values), min, max and pattern are checked by lint and copied
// into the JSON Schema, so the two cannot disagree.
type Recipe struct {
	Name        string `json:"name" doc:"unique class name, e.g. gpu-train-h100x8"`
	Version     string `json:"version" doc:"the recipe's own version, bumped on every change"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty" doc:"team or person answering for this class"`
	Extends     string `json:"extends,omitempty" doc:"name of one base recipe whose fields this one overrides"`
	Template    bool   `json:"template,omitempty" doc:"true: this recipe is only extended, never assigned to machines; it may hold all-zero sha256 placeholders. Not inherited: a recipe extending a template is not one unless it says so"`

	Hardware   Hardware          `json:"hardware,omitempty"`
	Firmware   Firmware          `json:"firmware,omitempty"`
	BIOS       BIOS              `json:"bios,omitempty"`
	OS         OS                `json:"os,omitempty"`
	Drivers    map[string]string `json:"drivers,omitempty" doc:"driver versions the installed OS must report at first boot, compared exactly; keys: nvidia (kernel module), cuda-driver (nvidia-smi's CUDA Version), cuda-toolkit (/usr/local/cuda), nvidia-fabricmanager, ofed, amdgpu"`
	Network    Network           `json:"network,omitempty"`
	Acceptance Acceptance        `json:"acceptance,omitempty"`
	Power      Power             `json:"power,omitempty"`
	Alerts     Alerts            `json:"alerts,omitempty"`
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
	// Firmware pins the firmware of the NICs this entry's model matches,
	// for nodes with NICs of several models (a ConnectX-7 and a
	// ConnectX-6 Lx run different firmware); firmware.nic pins the rest.
	Firmware string `json:"firmware,omitempty" doc:"firmware version of the NICs of this model; firmware.nic pins NICs no entry pins; policy key nic"`
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
	// WarmReimage opts in to `ingot reimage --warm` (pkg/warm): the
	// installed system runs ingot's signed-request service on port 9443.
	WarmReimage bool `json:"warm_reimage,omitempty" doc:"run ingot's warm reimage service in the installed OS (port 9443, TLS, requests signed by this server): ingot reimage --warm kexecs into the agent without a POST"`
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

// AgentBoot is the in-RAM agent the machine boots.
type AgentBoot struct {
	Kernel  Artifact `json:"kernel,omitempty"`
	Initrd  Artifact `json:"initrd,omitempty"`
	Cmdline string   `json:"cmdline,omitempty" doc:"extra kernel arguments for the agent, e.g. console=ttyS0"`
	// Boot is how the agent reaches the machine (AgentBootNetwork when
	// empty); see VirtualMedia.
	Boot string `json:"boot,omitempty" doc:"how the machine boots the agent: network (a one-time PXE boot override, then iPXE; the default), http (a one-time UEFI HTTP boot override naming the machine's agent UKI, /uki/MAC.efi: no TFTP, no iPXE) or virtual-media (a boot CD built for the job, inserted through the BMC's Redfish VirtualMedia: where PXE is impossible)" enum:"network,http,virtual-media"`
}

// Values of os.agent.boot.
const (
	AgentBootNetwork      = "network"
	AgentBootHTTP         = "http"
	AgentBootVirtualMedia = "virtual-media"
)

// VirtualMedia reports whether the agent boots from the BMC's virtual CD.
func (a AgentBoot) VirtualMedia() bool { return a.Boot == AgentBootVirtualMedia }

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

// Check is one acceptance check and its threshold. Name is a check of the
// registry (Checks); Min and Max are in the check's unit: plain numbers
// for counts and generations, written with a unit for physical checks
// (nic-link min: 400Gbps). Every check is required unless Optional.
type Check struct {
	Name     string            `json:"name" doc:"a registered check (ingot recipe checks lists them): gpu-count, gpu-model, pcie-link, memory-size, nic-link, disk-present, disk-health; at burn-in dcgm-diag, gpu-burn, nccl-allreduce, nvbandwidth, cuda-bandwidth, cuda-p2p, cublas-gemm, clpeak, stress-ng, fio, iperf3, ib-write-bw"`
	Min      Quantity          `json:"min,omitzero" doc:"lower bound in the check's unit: a plain number for counts and generations, else with its unit (400Gbps, 2TiB, 350GB/s, 600Tflop/s)"`
	Max      Quantity          `json:"max,omitzero" doc:"upper bound, for the checks that read one (gpu-count, memory-size, disk-present)"`
	Count    int               `json:"count,omitempty" min:"1" doc:"nic-link: how many ports must be up at min or faster (count: 8 with 8 fabric ports: 7 up fails)"`
	Args     map[string]string `json:"args,omitempty" doc:"the check's own arguments (only those its spec lists)"`
	Optional bool              `json:"optional,omitempty" doc:"true: a failure is reported but does not fail acceptance"`
}

// BurnIn is the sustained-load test the installed OS runs at first boot;
// its thresholds are the burn-in checks' min (gpu-burn, nccl-allreduce, ...).
type BurnIn struct {
	Duration     Duration `json:"duration" doc:"how long the load runs, e.g. 2h"`
	Timeout      Duration `json:"timeout,omitempty" doc:"deadline of the whole burn-in, apart from timeouts.provision; default duration + 30m"`
	MaxGPUTempC  int      `json:"max_gpu_temp_c,omitempty" min:"1" max:"120"`
	MaxXidErrors int      `json:"max_xid_errors,omitempty" min:"0"`
}

// burnInSlack is what the burn-in may take beyond its duration by default:
// starting the tools, warming up, collecting the results.
const burnInSlack = Duration(30 * time.Minute)

// Deadline is the burn-in's timeout: Timeout, or Duration plus 30 minutes.
func (b BurnIn) Deadline() Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return b.Duration + burnInSlack
}

// IsTemplate reports whether the recipe is a template: extended by other
// recipes, never assigned to a machine.
func (r *Recipe) IsTemplate() bool { return r != nil && r.Template }

// Power is the expected draw and PSU margin.
type Power struct {
	IdleWatts   int     `json:"idle_watts,omitempty" min:"1"`
	LoadWatts   int     `json:"load_watts,omitempty" min:"1"`
	DeratingPct int     `json:"derating_pct,omitempty" doc:"PSU margin kept free, percent" min:"0" max:"50"`
	CostPerKWh  float64 `json:"cost_per_kwh,omitempty" doc:"currency units per kWh, for cost reports" min:"0"`
}

// Alerts are the limits ingot's telemetry holds the class's ready machines
// to (pkg/telemetry); zero takes the default the doc names.
type Alerts struct {
	InletCelsiusMax   int      `json:"inlet_celsius_max,omitempty" doc:"inlet air above this fires inlet-temperature (default 35)" min:"1" max:"80"`
	GPUCelsiusMax     int      `json:"gpu_celsius_max,omitempty" doc:"a GPU above this fires gpu-temperature (default 87)" min:"1" max:"120"`
	WattsMarginPct    int      `json:"watts_margin_pct,omitempty" doc:"node watts more than this percent above power.load_watts fire watts-above-load (default 10)" min:"1" max:"200"`
	CorrectablePerDay int      `json:"correctable_errors_per_day,omitempty" doc:"more correctable memory errors than this in a day fire memory-errors (default 100)" min:"1"`
	For               Duration `json:"for,omitempty" doc:"how long a condition holds before its alert fires, and stays away before it clears (default 5m)"`
}

// Timeouts bound each lifecycle step; zero means the engine's default.
type Timeouts struct {
	Power     Duration `json:"power,omitempty" doc:"BMC power actions"`
	POST      Duration `json:"post,omitempty" doc:"power-on to first DHCP; GPU servers take 5-15m"`
	Provision Duration `json:"provision,omitempty" doc:"agent start to image written"`
	Verify    Duration `json:"verify,omitempty" doc:"acceptance and first boot"`
	Retries   int      `json:"retries,omitempty" doc:"attempts per step before failed" min:"0"`
	Restore   Duration `json:"restore,omitempty" doc:"restore target: a restore drill (ingot drill) slower than this fails, and the class is not scale-ready"`
}

// Digest is the sha256 of the resolved recipe's JSON: two recipes with the
// same digest provision a machine the same way. A job records it with the
// recipe it started with.
func (r *Recipe) Digest() string {
	b, err := json.Marshal(r)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
