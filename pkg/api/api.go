// Package api is the contract between the imaging agent (cmd/ingot-agent,
// running in RAM on the machine) and ingot's server (the engine). It holds
// the paths, the JSON bodies and a small client the agent uses. It is a leaf
// package of plain types: the engine implements the server side.
//
// # Transport
//
// JSON over HTTP. Every request carries `Authorization: Bearer TOKEN`, where
// TOKEN is the machine's one-time token from the kernel command line
// (ingot.token=...). Without a token (the discovery agent of an unknown
// machine, an installed OS without one) requests carry ?mac=MAC instead and
// the server decides what it accepts that way. The server derives the machine from the token; a token
// is valid only for its machine and expires when the machine's job ends.
// Servers answer 401 for a missing or unknown token and 403 for a token of
// another machine; the client never retries those. 5xx, 429 and connection
// errors are retried with exponential backoff.
//
// # Endpoints (all under /api/v1/agent)
//
//	GET  /task       -> Task. 200 with the task; 503 (optionally Retry-After) while the
//	                    engine is not ready to hand one out: the agent retries.
//	POST /inventory  <- machine.Inventory (Source "agent")           -> 204
//	POST /progress   <- Progress (at most every 500 ms while writing) -> 204
//	POST /checks     <- []CheckResult                                -> 204
//	POST /log        <- Log{Lines}                                   -> 204
//	POST /done       <- Done{Step, OK, Reason, ...}                  -> 204
//	POST /firstboot  <- machine.Software (sent by the installed OS)   -> 204
//
// A provisioning run is, in order: task, inventory, progress (many), checks,
// log, done. The agent hands off to the installed OS only after done was
// accepted with OK true; done with OK false means the node must end failed
// (the reason says why, e.g. a sha256 mismatch of the image). Any 2xx status
// is success; bodies of successful POSTs are ignored.
//
// # Server side
//
// Read bodies with DecodeInventory, DecodeProgress, DecodeChecks, DecodeLog,
// DecodeDone and DecodeFirstBoot: they bound the size, refuse trailing data
// and check what the engine relies on (a failed Done always has a Reason).
// BearerToken extracts the token. Serve the task as JSON of Task; an image
// URL may be a path on the same server (/images/...), which the agent
// resolves against ingot.server. The installed OS's first-boot report
// (`ingot-agent firstboot`) uses the same token: after a kexec handoff the
// agent passes ingot.server/ingot.token/ingot.machine on the installed
// kernel's command line; after a reboot it reads /etc/ingot/firstboot.env.
package api

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The agent API paths.
const (
	PathExchange   = "/api/v1/agent/exchange"
	PathPeer       = "/api/v1/agent/peer"
	PathCredential = "/api/v1/agent/credential"
	PathTask       = "/api/v1/agent/task"
	PathInventory  = "/api/v1/agent/inventory"
	PathProgress   = "/api/v1/agent/progress"
	PathChecks     = "/api/v1/agent/checks"
	PathLog        = "/api/v1/agent/log"
	PathDone       = "/api/v1/agent/done"
	PathFirstboot  = "/api/v1/agent/firstboot"
)

// Mode is what the agent is asked to do.
type Mode string

// The modes.
const (
	ModeProvision Mode = "provision" // inventory, write the image, checks, handoff
	ModeInspect   Mode = "inspect"   // inventory and checks, then handoff (no image)
	ModeDiscover  Mode = "discover"  // inventory only, then power off
)

// Handoff is how the agent leaves once its work is done.
type Handoff string

// The handoffs.
const (
	HandoffReboot   Handoff = "reboot"   // reboot(2); the engine set the BMC boot override to disk
	HandoffKexec    Handoff = "kexec"    // kexec_file_load the installed kernel (skips POST); falls back to reboot
	HandoffPoweroff Handoff = "poweroff" // power off
)

// Image formats.
const (
	FormatRaw     = "raw"
	FormatRawZstd = "raw.zst"
)

// Steps named in Progress and Done.
const (
	StepTask      = "task"
	StepInventory = "inventory"
	StepDisk      = "disk"
	StepImage     = "image"
	StepChecks    = "checks"
	StepHandoff   = "handoff"
)

// Task is what the engine wants this machine to do now.
type Task struct {
	MachineID string `json:"machine_id"`
	Recipe    string `json:"recipe,omitempty"`
	// RecipeVersion is the recipe's own version, echoed in logs.
	RecipeVersion string `json:"recipe_version,omitempty"`
	Mode          Mode   `json:"mode"`
	// Image is required in provision mode.
	Image Image `json:"image,omitempty"`
	// Disk is the recipe's boot DiskSpec: it selects the disk the image goes to.
	Disk recipe.DiskSpec `json:"disk,omitempty"`
	// Checks are the recipe's acceptance checks; Expected is the recipe's
	// hardware section they compare against.
	Checks   []recipe.Check  `json:"checks,omitempty"`
	Expected recipe.Hardware `json:"expected,omitempty"`
	Handoff  Handoff         `json:"handoff,omitempty"` // default reboot (poweroff in discover mode)
	// Cmdline is the installed OS's kernel command line, used for kexec.
	Cmdline string `json:"cmdline,omitempty"`
	// FirstBootSecret is the job's first-boot credential: the agent writes
	// it into the installed system (FirstBootEnv) and the installed OS's
	// first-boot report presents it. A report without it is refused.
	FirstBootSecret string `json:"first_boot_secret,omitempty"`
	// BurnIn is the recipe's burn-in block: the agent writes it, with the
	// burn-in checks, into the installed system (BurnInPlanPath), whose
	// first-boot service runs them with the node's real driver stack.
	BurnIn *recipe.BurnIn `json:"burn_in,omitempty"`
	// Hostname is the machine's name from the recipe's network.hostname:
	// the agent writes it to /etc/hostname of the installed system.
	Hostname string `json:"hostname,omitempty"`
	// CloudInit is the recipe's first_boot.cloud_init user data: the agent
	// writes it as a NoCloud seed (CloudInitSeed) into the installed system.
	CloudInit string `json:"cloud_init,omitempty"`
	// Warm is set when the recipe opts in to warm reimages
	// (os.warm_reimage): the agent installs itself and the service's
	// settings (pkg/warm.Config) into the installed system.
	Warm *Warm `json:"warm,omitempty"`
}

// Warm is what the installed system's warm reimage service needs from the
// server: its public key (base64 ed25519), the port to listen on and the
// MAC whose iPXE script it fetches.
type Warm struct {
	Key  string `json:"key"`
	Port int    `json:"port"`
	MAC  string `json:"mac"`
}

// PeerRequest asks the engine for a partner node of a fabric test (POST
// PathPeer, with the first-boot credential): Check is iperf3 or
// ib-write-bw, Address where the partner reaches this node ("": the
// address the request comes from).
type PeerRequest struct {
	Check   string `json:"check"`
	Address string `json:"address,omitempty"`
}

// Peer is the answer: Role "wait" (ask again), "server" (listen for the
// partner at Address) or "client" (connect to Address).
type Peer struct {
	Role    string `json:"role"`
	Address string `json:"address,omitempty"`
}

// CloudInitSeed is the NoCloud seed folder the agent writes (user-data,
// meta-data) in the installed system; cloud-init reads it on first boot.
const CloudInitSeed = "/var/lib/cloud/seed/nocloud"

// BurnInPlanPath is where the agent writes the burn-in plan (burnin.Plan,
// JSON) in the installed system, and AgentInstallPath where it installs
// itself there so the first-boot service can run the burn-in and report:
// `AgentInstallPath firstboot`.
const (
	BurnInPlanPath   = "/etc/ingot/burn-in.json"
	AgentInstallPath = "/usr/local/lib/ingot/ingot-agent"
)

// FirstBootEnv is where the agent writes, in the installed system, the
// first-boot report's settings: INGOT_SERVER=, INGOT_MACHINE= and
// INGOT_FIRSTBOOT= (the secret), mode 0600. The first-boot service deletes
// the file after its report was accepted.
const FirstBootEnv = "/etc/ingot/firstboot.env"

// Exchange is the answer to POST PathExchange: the job's agent credential,
// bound to the address the exchange came from.
type Exchange struct {
	Token     string `json:"token"`
	MachineID string `json:"machine_id"`
	JobID     string `json:"job_id,omitempty"`
}

// Image is the golden image to write.
type Image struct {
	// URL is absolute, or a path (/images/...) on the agent's server.
	URL string `json:"url"`
	// SHA256 is 64 lowercase hex digits of the stream as served (for
	// raw.zst: of the compressed bytes).
	SHA256 string `json:"sha256"`
	Format string `json:"format,omitempty"` // raw (default) or raw.zst
	// Size is the byte count of the stream as served; 0 means unknown.
	Size int64 `json:"size,omitempty"`
}

// Progress reports the image write (or another long step).
type Progress struct {
	Step    string  `json:"step"`
	Bytes   int64   `json:"bytes"`              // bytes of the stream as served received so far
	Total   int64   `json:"total,omitempty"`    // Image.Size when known
	Written int64   `json:"written,omitempty"`  // bytes written to the disk (decompressed)
	RateBps float64 `json:"rate_bps,omitempty"` // received bytes per second, recent
	Message string  `json:"message,omitempty"`
}

// CheckResult is the outcome of one acceptance check.
type CheckResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Skipped is true for a check the agent cannot run (e.g. gpu-burn in the
	// initramfs); OK is then false and the engine decides.
	Skipped bool    `json:"skipped,omitempty"`
	Detail  string  `json:"detail,omitempty"` // for people: what was expected and found
	Value   float64 `json:"value"`            // the measured number, in the check's unit (recipe.CheckSpec)
	// Metrics are the other numbers measured on the way, kept with the job:
	// max_gpu_temp_c, max_gpu_power_w, xid_errors, ...
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Verdict is the kind of the outcome (passed, failed, could-not-run);
	// "" from an agent that predates it. OK is Verdict == passed. A burn-in
	// result that could not run is Skipped; an agent check the agent does
	// not know is could-not-run but Skipped only when optional, so that a
	// required one fails.
	Verdict Verdict `json:"verdict,omitempty"`
	// Evidence is what a burn-in tool measured, for the server to judge
	// again (pkg/burnin/judge); nil for agent-stage checks.
	Evidence *Evidence `json:"evidence,omitempty"`
}

// Log is a batch of the agent's console lines.
type Log struct {
	Lines []string `json:"lines"`
}

// Done ends the agent's work. OK false leaves the machine failed with Reason.
type Done struct {
	Step   string `json:"step"` // the last step attempted
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	// Written image facts, when the image step ran.
	Disk        string  `json:"disk,omitempty"`
	ImageSHA256 string  `json:"image_sha256,omitempty"` // as computed by the agent
	ImageBytes  int64   `json:"image_bytes,omitempty"`  // bytes written to the disk
	Handoff     Handoff `json:"handoff,omitempty"`
}

// FirstBoot is what the installed OS posts to PathFirstboot: what it runs,
// and the burn-in checks it ran with the node's real driver stack (each
// recipe check of stage burn-in; one missing or skipped fails the job
// unless the recipe marks it optional).
type FirstBoot struct {
	machine.Software
	BurnIn []CheckResult `json:"burn_in,omitempty"`
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks a task as the agent needs it and names the first bad field.
func (t *Task) Validate() error {
	switch t.Mode {
	case ModeProvision, ModeInspect, ModeDiscover:
	default:
		return fmt.Errorf("task: mode %q is not one of provision, inspect, discover", t.Mode)
	}
	switch t.Handoff {
	case "", HandoffReboot, HandoffKexec, HandoffPoweroff:
	default:
		return fmt.Errorf("task: handoff %q is not one of reboot, kexec, poweroff", t.Handoff)
	}
	if t.Mode != ModeProvision {
		return nil
	}
	if t.Image.URL == "" {
		return fmt.Errorf("task: image.url is empty (required in provision mode)")
	}
	if !strings.HasPrefix(t.Image.URL, "http://") && !strings.HasPrefix(t.Image.URL, "https://") &&
		!(strings.HasPrefix(t.Image.URL, "/") && !strings.HasPrefix(t.Image.URL, "//")) {
		return fmt.Errorf("task: image.url %q: expected an http:// or https:// URL, or a path on the server (/images/...)", t.Image.URL)
	}
	if !hex64.MatchString(t.Image.SHA256) {
		return fmt.Errorf("task: image.sha256 %q: expected 64 lowercase hex digits", t.Image.SHA256)
	}
	switch t.Image.Format {
	case "", FormatRaw, FormatRawZstd:
	default:
		return fmt.Errorf("task: image.format %q is not one of raw, raw.zst", t.Image.Format)
	}
	if t.Image.Size < 0 {
		return fmt.Errorf("task: image.size %d is negative", t.Image.Size)
	}
	return nil
}

// DecodeTask reads one JSON task and validates it. Unknown fields are
// ignored so a newer engine can add optional fields.
func DecodeTask(r io.Reader) (Task, error) {
	var t Task
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	if err := dec.Decode(&t); err != nil {
		return Task{}, fmt.Errorf("decoding task: %w", err)
	}
	if err := t.Validate(); err != nil {
		return Task{}, err
	}
	return t, nil
}
