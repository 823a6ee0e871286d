package operator

import (
	"fmt"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Steps of a reimage job (Job.Step), in order.
const (
	StepBMC       = "bmc"       // BIOS, boot override, power cycle
	StepBoot      = "boot"      // POST, DHCP, iPXE, the agent starts
	StepInventory = "inventory" // the agent reports what it found
	StepImage     = "image"     // the agent writes the image
	StepChecks    = "checks"    // acceptance checks
	StepHandoff   = "handoff"   // into the installed OS
	StepFirstBoot = "firstboot" // the installed OS reports and burns in
	StepVerify    = "verify"    // BIOS and driver pins checked
)

// ReimageStatus is a reimage job's progress: its phases (time to restore),
// the image being written, what was found and measured.
type ReimageStatus struct {
	Recipe string `json:"recipe,omitempty"`
	// Phases in the order the job went through them; the running one has
	// no End.
	Phases []Phase `json:"phases,omitempty"`
	// RestoreSeconds is the time to restore, once the job is done.
	RestoreSeconds float64 `json:"restore_seconds,omitempty"`
	// Bytes of Total written while the image step runs, at RateBps.
	Bytes    int64         `json:"bytes,omitempty"`
	Total    int64         `json:"total,omitempty"`
	RateBps  float64       `json:"rate_bps,omitempty"`
	Findings []Finding     `json:"findings,omitempty"`
	Checks   []CheckResult `json:"checks,omitempty"`
	// BurnIn are the checks the installed OS ran at first boot.
	BurnIn []CheckResult `json:"burn_in,omitempty"`
	// LoadWatts is the highest node draw the BMC reported during the
	// burn-in, over LoadSamples readings.
	LoadWatts   int               `json:"load_watts,omitempty"`
	LoadSamples int               `json:"load_samples,omitempty"`
	Software    *machine.Software `json:"software,omitempty"`
	// Warm says how a warm reimage's first attempt went: "kexec", or why
	// it fell back to the BMC.
	Warm string `json:"warm,omitempty"`
	// Log holds the agent's last log lines.
	Log []string `json:"log,omitempty"`
}

// Phase is one phase of the time to restore.
type Phase struct {
	Name  string    `json:"name"` // bmc, post+boot, inventory, image, checks, reboot+firstboot, verify, ...
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
}

// Seconds is the phase's length, 0 while it runs.
func (p Phase) Seconds() float64 {
	if p.End.IsZero() {
		return 0
	}
	return p.End.Sub(p.Start).Seconds()
}

// CheckResult is one acceptance or burn-in check's outcome.
type CheckResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Skipped: the check did not run (never OK). Waived: it failed and an
	// operator let this machine past it (who and why in Detail).
	Skipped bool               `json:"skipped,omitempty"`
	Waived  bool               `json:"waived,omitempty"`
	Detail  string             `json:"detail,omitempty"`
	Value   float64            `json:"value,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Verdict is the check's outcome in a word: ok, FAILED, SKIPPED, waived.
func (c CheckResult) Verdict() string {
	switch {
	case c.Skipped:
		return "SKIPPED"
	case c.Waived:
		return "waived"
	case !c.OK:
		return "FAILED"
	}
	return "ok"
}

// Restore is the time to restore as a duration.
func (s ReimageStatus) Restore() time.Duration {
	return time.Duration(s.RestoreSeconds * float64(time.Second))
}

// RestoreLine renders the time to restore by phase:
// "time to restore 1m32s: bmc 2s, post+boot 41s, ...".
func (s ReimageStatus) RestoreLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "time to restore %s:", s.Restore().Round(time.Second))
	sep := " "
	for _, p := range s.Phases {
		if p.End.IsZero() {
			continue
		}
		fmt.Fprintf(&b, "%s%s %s", sep, p.Name, p.End.Sub(p.Start).Round(100*time.Millisecond))
		sep = ", "
	}
	return b.String()
}

// RolloutStatus is a rollout's progress: its waves and what each did.
type RolloutStatus struct {
	Recipe string     `json:"recipe,omitempty"`
	Waves  [][]string `json:"waves"` // machine IDs
	Wave   int        `json:"wave"`  // index of the current wave
	// Jobs maps each machine ID to its reimage job.
	Jobs map[string]string `json:"jobs,omitempty"`
	// Failed maps each failed machine ID to why.
	Failed map[string]string `json:"failed,omitempty"`
	// Stopped says why the rollout stopped before its last wave.
	Stopped string `json:"stopped,omitempty"`
	// Warning is what the operator should know before the first wave (a
	// class that is not scale-ready).
	Warning string       `json:"warning,omitempty"`
	Reports []WaveReport `json:"reports,omitempty"`
}

// WaveReport is what a finished wave's machines did under load.
type WaveReport struct {
	Wave  int        `json:"wave"` // 1-based
	Nodes []WaveNode `json:"nodes"`
}

// WaveNode is one machine's line of a wave report: peaks under load, and
// a failure or the limit it crossed.
type WaveNode struct {
	Machine string  `json:"machine"`
	Rack    string  `json:"rack,omitempty"`
	Watts   float64 `json:"peak_watts,omitempty"`
	InletC  float64 `json:"peak_inlet_c,omitempty"`
	GPUMaxC float64 `json:"peak_gpu_c,omitempty"`
	Failed  string  `json:"failed,omitempty"`
	Problem string  `json:"problem,omitempty"`
}
