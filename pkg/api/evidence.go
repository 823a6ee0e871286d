package api

// Verdict is what a check's result means, for the machine and for the
// operator who reads it. The three are kept apart because they send people
// to different places: failed to the hardware, could-not-run to the tool or
// the setup.
type Verdict string

// The verdicts of a check.
const (
	// VerdictPassed: the tool measured every device the node has, and every
	// number met the recipe.
	VerdictPassed Verdict = "passed"
	// VerdictFailed: the hardware gave wrong results (a miscompare, NCCL
	// #wrong, a FAULTY GPU, an Xid) or too-slow ones, or the evidence a pass
	// needs is missing (a GPU absent from the results, a zero measurement).
	VerdictFailed Verdict = "failed"
	// VerdictCouldNotRun: the tool is not installed, stopped before it
	// measured, or its peer could not be reached. Rerun after fixing that.
	VerdictCouldNotRun Verdict = "could-not-run"
)

// Evidence is what one burn-in tool measured, read from its output by
// pkg/burnin. It travels with the check's result so the server judges the
// recipe against the same numbers the node did (pkg/burnin/judge), not
// against the node's own OK.
type Evidence struct {
	Tool string `json:"tool"` // "gpu-burn", "nccl", "nvbandwidth", ...
	// Values are the measurements, one per subject (a GPU, a GPU pair, a
	// disk, a message size), in the check's unit. A subject the tool
	// printed but did not measure is present with Value 0.
	Values []Measurement `json:"values,omitempty"`
	// GPUs is how many GPUs the tool says it ran on, where it says so
	// (nccl-tests' device list); 0: the tool does not say.
	GPUs int `json:"gpus,omitempty"`
	// Faults are wrong results the tool itself found: hardware verdicts.
	Faults []Fault `json:"faults,omitempty"`
	// NotRun says why the tool could not measure (not installed, stopped
	// early, peer unreachable); "" when it ran to its end.
	NotRun string `json:"not_run,omitempty"`
	// Load is what was sampled while a GPU load ran (nil: not a GPU load).
	Load *LoadEvidence `json:"load,omitempty"`
	// More counts the values and faults left out to keep the report small.
	More int `json:"more,omitempty"`
}

// Measurement is one subject's number.
type Measurement struct {
	Subject string  `json:"subject"`           // "GPU 3", "GPU 0 -> GPU 5", "GPU 2 host->device", "/dev/nvme1n1", "8GiB"
	Value   float64 `json:"value"`             // in the check's unit (flop/s, bytes/s, bits/s)
	Work    float64 `json:"work,omitempty"`    // the work behind it: iterations, bytes moved; 0 with Value 0 is "measured nothing"
	Size    int64   `json:"size,omitempty"`    // message size in bytes, for tools judged at a size (nccl-tests)
	Note    string  `json:"note,omitempty"`    // what the tool printed where it printed no number ("inf")
	Latency bool    `json:"latency,omitempty"` // a latency in seconds, not a rate: never judged against a bandwidth floor
}

// Fault is one wrong result, naming where it happened.
type Fault struct {
	Subject string `json:"subject"` // "GPU 2", "all_reduce 4GiB", "device_to_device_memcpy_read_ce"
	Detail  string `json:"detail"`  // "FAULTY, 4096 errors", "96 wrong values"
}

// LoadEvidence is the in-band sampling (nvidia-smi) and the kernel log's
// Xid events around one GPU load.
type LoadEvidence struct {
	GPUs []GPULoad `json:"gpus,omitempty"`
	Xids []Xid     `json:"xids,omitempty"` // Xid events the load caused
	// Problems are what could not be read: the kernel log, a line of it,
	// nvidia-smi. Each fails the check: a gate without evidence is no pass.
	Problems []string `json:"problems,omitempty"`
}

// GPULoad is one GPU over the sampling window.
type GPULoad struct {
	PCI           string  `json:"pci"` // "0000:18:00"
	Index         int     `json:"index"`
	Samples       int     `json:"samples"`
	MaxTempC      float64 `json:"max_temp_c,omitempty"`
	MaxPowerWatts float64 `json:"max_power_w,omitempty"`
	Lost          bool    `json:"lost,omitempty"` // nvidia-smi could not reach it
}

// Xid is one NVIDIA driver error from the kernel log.
type Xid struct {
	PCI  string `json:"pci"`
	Code int    `json:"code"`
	Text string `json:"text,omitempty"`
}
