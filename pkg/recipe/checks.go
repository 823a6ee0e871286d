package recipe

import (
	"regexp"
	"slices"
)

// Stage says where a check runs.
type Stage string

// The stages of acceptance.
const (
	// StageAgent checks run in the in-RAM agent against its inventory,
	// before the image is written (pkg/agent/checks).
	StageAgent Stage = "agent"
	// StageBurnIn checks run in the installed OS at first boot, with the
	// real driver stack, during the burn-in (acceptance.burn_in).
	StageBurnIn Stage = "burn-in"
)

// CheckSpec describes one acceptance check a recipe may name.
type CheckSpec struct {
	Name  string   `json:"name"`           // as recipes write it: nic-link
	Stage Stage    `json:"stage"`          // where it runs
	Unit  Unit     `json:"unit"`           // what min and max measure
	Doc   string   `json:"doc"`            // what it checks, for people
	Args  []string `json:"args,omitempty"` // the args it reads; any other is a lint error
	// Pairwise: it runs between two nodes of one rollout wave at once,
	// paired by the engine (a wave of one cannot pass it).
	Pairwise bool `json:"pairwise,omitempty"`
}

// checkDef is a spec with what lint needs beyond it: which bounds the
// check reads and how each argument's value is checked.
type checkDef struct {
	spec     CheckSpec
	min, max bool
	minNeeds string // an arg without which min is not read
	args     []argRule
}

// argRule checks one argument's value. enum or pattern also go into the
// JSON Schema; valid is lint's full check (nil: the pattern decides).
type argRule struct {
	name    string
	enum    []string
	pattern string
	expect  string // what a valid value looks like, for messages
	valid   func(string) bool
}

func (a argRule) ok(v string) bool {
	switch {
	case a.valid != nil:
		return a.valid(v)
	case a.enum != nil:
		return slices.Contains(a.enum, v)
	case a.pattern != "":
		return regexp.MustCompile(a.pattern).MatchString(v)
	}
	return v != ""
}

// checkDefs is the registry, agent checks first. pkg/agent/checks
// implements exactly the agent-stage ones (its tests prove it).
func checkDefs() []checkDef {
	agent := func(name string, u Unit, min, max bool, doc string, args ...argRule) checkDef {
		return checkDef{spec: CheckSpec{Name: name, Stage: StageAgent, Unit: u, Doc: doc}, min: min, max: max, args: args}
	}
	burnIn := func(name string, u Unit, min bool, doc string, args ...argRule) checkDef {
		return checkDef{spec: CheckSpec{Name: name, Stage: StageBurnIn, Unit: u, Doc: doc}, min: min, args: args}
	}
	gpuModel := agent("gpu-model", UnitNone, true, false,
		"every hardware.gpus group has its count of GPUs of that vendor and model; with args.model, at least min (default 1) GPUs whose model contains it",
		argRule{name: "model", expect: "a model substring such as H100"})
	gpuModel.minNeeds = "model"
	pairwise := func(d checkDef) checkDef { d.spec.Pairwise = true; return d }
	return []checkDef{
		agent("gpu-count", UnitCount, true, true,
			"the number of GPUs equals the sum of hardware.gpus counts, or lies within min and max when given"),
		gpuModel,
		agent("pcie-link", UnitGeneration, true, false,
			"no GPU PCIe link is degraded: trained at its maximum width and generation and at least hardware.gpus pcie_gen/pcie_width; min (a generation) and args.width override those for every GPU; every NIC port with a PCIe link is held to its own maximum width and generation",
			argRule{name: "width", enum: []string{"1", "2", "4", "8", "16"}, expect: "a lane count: 1, 2, 4, 8 or 16"},
			argRule{name: "idle-downtrain", enum: []string{"ok"}, expect: "ok (idle GPUs may train down to Gen1; the generation is then read from the link's maximum)"}),
		agent("memory-size", UnitBytes, true, true,
			"the memory seen is at least hardware.memory.total (or min), less args.tolerance percent (default 2), and at most max",
			argRule{name: "tolerance", pattern: `^([0-9]{1,2}(\.[0-9]+)?|100(\.0+)?)$`, expect: "a percentage from 0 to 100, e.g. 2"}),
		agent("nic-link", UnitBitsPerSecond, true, false,
			"every hardware.nics group with a speed has its count of ports up at that speed or faster; with min, at least one port up at min"),
		agent("disk-present", UnitCount, true, true,
			"every hardware.disks rule matches its count of disks (default 1); with min or max, the number of disks lies within them"),
		agent("disk-health", UnitNone, false, false,
			"every disk reports healthy (in-band device state; there is no SMART reader in the agent)"),
		burnIn("dcgm-diag", UnitNone, false,
			"NVIDIA DCGM diagnostics (dcgmi diag -r LEVEL) pass on every GPU",
			argRule{name: "level", enum: []string{"1", "2", "3", "4"}, expect: "a dcgmi diag run level: 1, 2, 3 or 4"}),
		burnIn("gpu-burn", UnitFlops, true,
			"gpu-burn sustains at least min on every GPU for the burn-in duration with no errors; gpu-burn reports Gflop/s per GPU"),
		burnIn("nccl-allreduce", UnitBytesPerSecond, true,
			"nccl-tests all_reduce_perf over every GPU reaches at least min bus bandwidth at messages of 1 GiB and more (args.size: the largest message, default 8GiB)",
			argRule{name: "size", pattern: sizePattern, expect: "a message size of at least 1GiB, e.g. 8GiB",
				valid: func(v string) bool { s, err := ParseSize(v); return err == nil && s >= 1<<30 }}),
		burnIn("nvbandwidth", UnitBytesPerSecond, true,
			"nvbandwidth measures at least min for args.testcase (default: device-to-device memcpy)",
			argRule{name: "testcase", pattern: `^[a-z0-9_]+$`, expect: "an nvbandwidth testcase name such as device_to_device_memcpy_read_ce"}),
		// Debian-only burn-in (images/debian-12-nvidia): NVIDIA's CUDA
		// samples built in the image from Debian's nvidia-cuda-samples 11.8,
		// and clpeak on NVIDIA's OpenCL ICD.
		burnIn("cuda-bandwidth", UnitBytesPerSecond, true,
			"bandwidthTest (CUDA sample) on every GPU, pinned memory: host-to-device, device-to-host and device-to-device bandwidth each at least min, or only args.direction's",
			argRule{name: "direction", enum: []string{"htod", "dtoh", "dtod"}, expect: "htod, dtoh or dtod"}),
		burnIn("cuda-p2p", UnitBytesPerSecond, true,
			"p2pBandwidthLatencyTest (CUDA sample): the unidirectional P2P bandwidth of every pair of GPUs at least min (the slowest pair named)"),
		burnIn("gemm-burn", UnitFlops, true,
			"matrixMulCUBLAS (CUDA sample) on every GPU for the burn-in duration: an SGEMM through cuBLAS whose result it compares with the CPU's; every run must print PASS, and with min, reach at least min on every GPU"),
		burnIn("clpeak", UnitFlops, true,
			"clpeak on every OpenCL GPU device (NVIDIA's ICD): single-precision compute at least min"),
		burnIn("stress-ng", UnitNone, false,
			"stress-ng loads CPUs and memory for the burn-in duration without errors"),
		burnIn("fio", UnitBytesPerSecond, true,
			"fio reaches at least min throughput on every data disk"),
		pairwise(burnIn("iperf3", UnitBitsPerSecond, true,
			"iperf3 between two nodes of the class in burn-in at once, paired by the engine, reaches at least min (each side judges what it measured); args.interface: the port whose address the peer connects to (default: the one ingot is reached over)",
			argRule{name: "interface", pattern: `^[a-zA-Z0-9._-]{1,15}$`, expect: "an interface name such as ens3np0"})),
		pairwise(burnIn("ib-write-bw", UnitBitsPerSecond, true,
			"ib_write_bw (perftest) between two nodes of the class in burn-in at once, paired by the engine, reaches at least min; args.interface as iperf3's, args.device the RDMA device (default the first), args.cuda the GPU whose memory it uses (GPUDirect RDMA; default GPU 0 on a node with GPUs and nvidia_peermem loaded, else host memory)",
			argRule{name: "interface", pattern: `^[a-zA-Z0-9._-]{1,15}$`, expect: "an interface name such as ens3np0"},
			argRule{name: "device", pattern: `^[a-zA-Z0-9._-]{1,64}$`, expect: "an RDMA device such as mlx5_0"},
			argRule{name: "cuda", pattern: `^[0-9]{1,2}$`, expect: "a GPU index such as 0"})),
	}
}

func (d checkDef) withArgs() CheckSpec {
	s := d.spec
	for _, a := range d.args {
		s.Args = append(s.Args, a.name)
	}
	return s
}

// Checks lists every check recipes may name, agent checks first.
func Checks() []CheckSpec {
	defs := checkDefs()
	out := make([]CheckSpec, len(defs))
	for i, d := range defs {
		out[i] = d.withArgs()
	}
	return out
}

// LookupCheck returns the named check's spec.
func LookupCheck(name string) (CheckSpec, bool) {
	d, ok := lookupDef(name)
	return d.withArgs(), ok
}

func lookupDef(name string) (checkDef, bool) {
	for _, d := range checkDefs() {
		if d.spec.Name == name {
			return d, true
		}
	}
	return checkDef{}, false
}

// checkNames lists the registered names of one stage.
func checkNames(st Stage) []string {
	var out []string
	for _, d := range checkDefs() {
		if d.spec.Stage == st {
			out = append(out, d.spec.Name)
		}
	}
	return out
}

// DriverKeys lists the drivers a recipe may pin (drivers:), each a version
// the installed OS reports at first boot and the engine compares exactly:
//
//	nvidia                the NVIDIA kernel module (sys/module/nvidia/version)
//	cuda-driver           the CUDA version the driver supports (nvidia-smi's "CUDA Version", e.g. 12.2)
//	cuda-toolkit          the installed toolkit (/usr/local/cuda/version.json or nvcc, e.g. 12.2.140)
//	nvidia-fabricmanager  nv-fabricmanager --version
//	ofed                  MLNX_OFED / DOCA OFED (ofed_info -s, else the mlx5_core module version)
//	amdgpu                the amdgpu kernel module (sys/module/amdgpu/version)
func DriverKeys() []string {
	return []string{"nvidia", "cuda-driver", "cuda-toolkit", "nvidia-fabricmanager", "ofed", "amdgpu"}
}

// describeBounds says which of min and max a check reads, for messages.
func (d checkDef) describeBounds() string {
	switch {
	case d.min && d.max:
		return "min and max"
	case d.min:
		return "only min"
	}
	return "no min or max"
}

func (d checkDef) argNames() []string { return d.withArgs().Args }

func (d checkDef) arg(name string) (argRule, bool) {
	for _, a := range d.args {
		if a.name == name {
			return a, true
		}
	}
	return argRule{}, false
}
