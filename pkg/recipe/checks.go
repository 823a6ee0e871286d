package recipe

import (
	"regexp"
	"slices"
	"strings"
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
	count    bool   // reads count (nic-link)
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
	nicLink := agent("nic-link", UnitBitsPerSecond, true, false,
		"every hardware.nics group with a speed has its count of ports up at that speed or faster, each port named; with min, count ports (default: the ports of hardware.nics groups at min or faster, else 1) up at min or faster")
	nicLink.count = true
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
		nicLink,
		agent("disk-present", UnitCount, true, true,
			"every hardware.disks rule matches its count of disks (default 1); with min or max, the number of disks lies within them"),
		agent("disk-health", UnitNone, false, false,
			"every disk reports healthy (in-band device state; there is no SMART reader in the agent)"),
		burnIn("dcgm-diag", UnitNone, false,
			"NVIDIA DCGM diagnostics (dcgmi diag -r LEVEL) pass on every GPU",
			argRule{name: "level", enum: []string{"1", "2", "3", "4"}, expect: "a dcgmi diag run level: 1, 2, 3 or 4"}),
		burnIn("gpu-burn", UnitFlops, true,
			"gpu-burn runs on every GPU of the node for the burn-in duration: no GPU FAULTY, dead or idle (0 iterations), each at least min at its best; gpu-burn reports Gflop/s per GPU"),
		burnIn("nccl-allreduce", UnitBytesPerSecond, true,
			"nccl-tests all_reduce_perf over every GPU: no wrong or out of bounds values, and every message of args.size (the largest, default 8GiB; the run goes up to it) reaches at least min bus bandwidth",
			argRule{name: "size", pattern: sizePattern, expect: "a message size of at least 1GiB, e.g. 8GiB",
				valid: func(v string) bool { s, err := ParseSize(v); return err == nil && s >= 1<<30 }}),
		burnIn("nvbandwidth", UnitBytesPerSecond, true,
			"nvbandwidth's args.testcase (default device_to_device_memcpy_read_ce): no data-pattern miscompare, and every cell of its matrix (each GPU, or each ordered GPU pair) at least min; the slowest cell named",
			argRule{name: "testcase", pattern: `^[a-z0-9_]+$`, expect: "an nvbandwidth bandwidth testcase such as device_to_device_memcpy_read_ce (a latency testcase measures no bandwidth)",
				valid: func(v string) bool {
					return regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(v) && !strings.Contains(v, "latency")
				}}),
		burnIn("cuda-bandwidth", UnitBytesPerSecond, true,
			"the CUDA samples' bandwidthTest (Debian's nvidia-cuda-samples), one GPU at a time: host-to-device and device-to-host bandwidth of every GPU, pinned memory, each at least min"),
		burnIn("cuda-p2p", UnitBytesPerSecond, true,
			"the CUDA samples' p2pBandwidthLatencyTest: every ordered GPU pair of args.matrix (unidirectional, the default: P2P writes; unidirectional-read; bidirectional) at least min; the slowest pair named",
			argRule{name: "matrix", enum: []string{"unidirectional", "unidirectional-read", "bidirectional"}, expect: "unidirectional, unidirectional-read or bidirectional"}),
		burnIn("cublas-gemm", UnitFlops, true,
			"the CUDA samples' matrixMulCUBLAS on every GPU at once, repeated for the burn-in duration: every product equals the CPU's, and each GPU at least min at its best (small matrices: a floor from a measured node, not a datasheet)"),
		burnIn("clpeak", UnitFlops, true,
			"clpeak (OpenCL, nvidia-opencl-icd): every NVIDIA GPU's peak rate in args.test (compute-sp, the default; compute-dp; compute-hp) at least min",
			argRule{name: "test", enum: []string{"compute-sp", "compute-dp", "compute-hp"}, expect: "compute-sp, compute-dp or compute-hp"}),
		burnIn("stress-ng", UnitNone, false,
			"stress-ng loads CPUs and memory for the burn-in duration without errors, and each stressor measured work (bogo ops); args.memory is what its two memory workers take together (stress-ng --vm-bytes: a percentage of memory, default 75%, or a size such as 64M): less for a slow machine, whose workers must each finish a pass within the duration",
			argRule{name: "memory", pattern: `^([1-9][0-9]?%|[1-9][0-9]{0,5}[KMG])$`, expect: "a percentage of memory from 1% to 99% (75%) or a size with K, M or G (64M, 8G)"}),
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
