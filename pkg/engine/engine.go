// Package engine is ingot's provisioning engine: the per-machine lifecycle
// (enrolled -> inspecting -> provisioning -> verifying -> ready, plus failed
// and reimaging), persisted reimage jobs that survive a restart, and the
// decisions taken on what the BMC and the in-RAM agent report.
//
// The engine never talks to sockets itself: the BMC is reached through the
// BMC interface (cmd/ wires pkg/bmc in), agent reports arrive through the
// On* methods (the API server calls them), and every decision is recorded in
// the store as a job step and an event.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// BMC is what the engine needs from a machine's baseboard management
// controller. pkg/bmc's client satisfies it through a thin adapter in cmd/.
type BMC interface {
	// PowerCycle turns the machine on, or power-cycles it when it is on.
	PowerCycle(ctx context.Context) error
	// SetBootOverride sets the next boot's device: "Pxe", "UefiHttp", "Hdd", "Cd".
	SetBootOverride(ctx context.Context, target, uri string, once bool) error
	// InsertMedia puts an ISO (an http(s) URL the BMC fetches) into the
	// BMC's virtual CD drive; boot it with the override "Cd".
	InsertMedia(ctx context.Context, image string) error
	// EjectMedia empties every virtual CD drive (nothing when empty).
	EjectMedia(ctx context.Context) error
	// ApplyBIOS stages attributes; they take effect at the next reset.
	ApplyBIOS(ctx context.Context, attrs map[string]any) error
	// VerifyBIOS returns the names of attributes that do not hold the wanted value.
	VerifyBIOS(ctx context.Context, want map[string]any) ([]string, error)
	// SetBootMode sets the firmware boot mode: "UEFI" or "Legacy".
	SetBootMode(ctx context.Context, mode string) error
	// BootState reads power, the boot override and the boot mode.
	BootState(ctx context.Context) (BootState, error)
	// Inventory reads what the BMC shows of the machine (Source "redfish").
	Inventory(ctx context.Context) (machine.Inventory, error)
	// NodeWatts reads the machine's power draw now; an error, never 0 W,
	// when the BMC has no reading.
	NodeWatts(ctx context.Context) (int, error)
	Close() error
}

// Reconcile compares the in-band inventory with the BMC's (GPUs by
// serial, PCI address, slot): pkg/drift's ReconcileGPUs.
type Reconcile func(inBand, bmc machine.Inventory) []Finding

// BootState is what a BMC says of a machine's power and boot.
type BootState struct {
	Power   string // On, Off, ...
	Target  string // the boot override target: Pxe, Hdd, None, ...
	Enabled string // Disabled, Once, Continuous
	Mode    string // UEFI, Legacy; "" when the BMC does not report it
}

// DialBMC opens a BMC session for a machine.
type DialBMC func(ctx context.Context, m *machine.Machine) (BMC, error)

// RecipeSource returns a resolved (extends applied) and linted recipe; it
// returns an error that names every problem when the recipe does not lint.
type RecipeSource func(name string) (*recipe.Recipe, error)

// Artifacts says whether a pinned artifact is present in the content store.
type Artifacts interface {
	Has(sha256 string) bool
}

// DriftCheck compares an inventory with a recipe's expected hardware.
type DriftCheck func(inv machine.Inventory, r *recipe.Recipe) []Finding

// Finding is one difference between a machine and its recipe.
type Finding struct {
	Severity string `json:"severity"` // critical, warning, info
	Part     string `json:"part"`     // "gpu 2", "firmware BIOS", "psu", "power", ...
	Message  string `json:"message"`
	// Check is the acceptance check judging the same fact: a waiver of it
	// for the machine covers this finding too.
	Check string `json:"check,omitempty"`
}

// Config builds an Engine.
type Config struct {
	// Machines is the fleet: machine reads and every machine change.
	Machines Machines
	// Jobs keeps the engine's jobs.
	Jobs store.JobStore
	// Leases looks up ingot's DHCP leases (network.pool reservations);
	// nil: none are looked up.
	Leases Leases
	// Credentials deletes a job's machine credentials when it ends or a
	// new boot attempt starts; nil: none are issued.
	Credentials Credentials
	DialBMC     DialBMC
	Recipes     RecipeSource
	Artifacts   Artifacts  // nil skips the artifact preflight (tests)
	Drift       DriftCheck // nil: no drift check
	// Reconcile, when set, has the BMC step read the BMC's inventory and the
	// agent's inventory be reconciled with it.
	Reconcile Reconcile
	Logger    *slog.Logger
	Now       func() time.Time
	// Tick is how often Run looks for steps that timed out (default 1s).
	Tick time.Duration
	// LoadSample is how often the BMC's power draw is read while the
	// installed OS runs its burn-in (default 30s).
	LoadSample time.Duration
	// Defaults for recipes that set no timeouts.
	Defaults recipe.Timeouts
	// DHCP is serve's DHCP, for recipes' network.pool; zero: not known.
	DHCP DHCPInfo
	// Racks is racks.yaml as it stands: rollouts are refused when they
	// would put a rack over its power budget at the recipe's load watts,
	// and waves power on no more machines a rack at once than its
	// start-up margin covers. nil: no power checks.
	Racks func() []rack.Rack
	// WaveCheck judges each machine of a finished rollout wave by what
	// telemetry measured under load; nil: waves gate on failures only.
	WaveCheck WaveCheck
	// DrillMaxAge is how old a class's last passing restore drill may be
	// for it to count as scale-ready (0: any age).
	DrillMaxAge time.Duration
	// Warm asks a ready machine's installed OS to kexec into the agent for
	// job (pkg/warm: a signed request to its warm reimage service); nil:
	// no warm reimages. An error means it did not take the request: the
	// job falls back to the BMC.
	Warm func(ctx context.Context, m *machine.Machine, jobID string) error
	// Media builds and serves the agent's boot CD for recipes whose agent
	// boots from virtual media (os.agent.boot); nil: such jobs fail at the
	// BMC step saying so.
	Media Media
	// BootURL is the boot listener as machines reach it (serve's public
	// URL): UEFI HTTP boot overrides name the agent UKI there.
	BootURL string
	// StartupSettle is how long a power-on counts against its rack's
	// start-up margin (default 2 minutes: a GPU server's fans and inrush
	// settle within its POST).
	StartupSettle time.Duration
	// Firmware sets up firmware campaigns and reimages' firmware step
	// (firmware.go); its zero value refuses them.
	Firmware FirmwareConfig
	// Owner says which instance runs each job where several share one
	// store (owner.go); nil: this instance runs every job (Solo).
	Owner Owner
}

// Engine runs provisioning jobs.
type Engine struct {
	machines  Machines
	jobs      store.JobStore
	leases    Leases
	creds     Credentials
	dial      DialBMC
	recipes   RecipeSource
	artifacts Artifacts
	drift     DriftCheck
	reconcile Reconcile
	log       *slog.Logger
	now       func() time.Time
	tick      time.Duration
	sample    time.Duration
	defaults  recipe.Timeouts
	dhcp      DHCPInfo
	racks     func() []rack.Rack
	waveCheck WaveCheck
	drillAge  time.Duration

	mu       sync.Mutex      // serializes job step changes
	kick     chan string     // job IDs whose BMC step should run now
	rollouts chan string     // rollout job IDs to drive
	running  map[string]bool // jobs with a BMC step in flight
	again    map[string]bool // jobs kicked while their BMC step ran
	waiters  map[string][]chan struct{}
	pairs    pairs // fabric-test pairings of nodes in burn-in
	gate     startGate
	media    Media
	warm     func(ctx context.Context, m *machine.Machine, jobID string) error
	bootURL  string
	fw       *fwState  // firmware jobs (firmware.go)
	own      ownership // owner.go
}

// New builds an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Machines == nil || cfg.Jobs == nil || cfg.DialBMC == nil || cfg.Recipes == nil {
		return nil, errors.New("engine: Machines, Jobs, DialBMC and Recipes are required")
	}
	e := &Engine{
		machines: cfg.Machines, jobs: cfg.Jobs, leases: cfg.Leases, creds: cfg.Credentials, dial: cfg.DialBMC, recipes: cfg.Recipes, artifacts: cfg.Artifacts,
		drift: cfg.Drift, reconcile: cfg.Reconcile, log: cfg.Logger, now: cfg.Now, tick: cfg.Tick, sample: cfg.LoadSample, defaults: cfg.Defaults, dhcp: cfg.DHCP, racks: cfg.Racks, waveCheck: cfg.WaveCheck, drillAge: cfg.DrillMaxAge,
		kick: make(chan string, 1024), rollouts: make(chan string, 64), running: map[string]bool{}, again: map[string]bool{}, waiters: map[string][]chan struct{}{},
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.tick == 0 {
		e.tick = time.Second
	}
	if e.sample == 0 {
		e.sample = 30 * time.Second
	}
	e.own = newOwnership(cfg.Owner)
	e.dial = guardBMC(cfg.DialBMC, e.own.owner, e.log)
	e.warm, e.bootURL = cfg.Warm, strings.TrimRight(cfg.BootURL, "/")
	e.media = cfg.Media
	e.fw = newFWState(cfg.Firmware)
	e.gate.settle = cfg.StartupSettle
	if e.gate.settle <= 0 {
		e.gate.settle = 2 * time.Minute
	}
	d := &e.defaults
	for _, x := range []struct {
		p *recipe.Duration
		v time.Duration
	}{{&d.Power, 5 * time.Minute}, {&d.POST, 15 * time.Minute}, {&d.Provision, 60 * time.Minute}, {&d.Verify, 30 * time.Minute}} {
		if *x.p == 0 {
			*x.p = recipe.Duration(x.v)
		}
	}
	if d.Retries == 0 {
		d.Retries = 2
	}
	return e, nil
}

// Steps of a reimage job, in order. Job.Step holds the current one.
const (
	StepBMC       = "bmc"       // apply BIOS, boot override to network, power cycle
	StepBoot      = "boot"      // POST, DHCP, iPXE, agent start: until the agent asks for its task
	StepInventory = "inventory" // agent reports inventory; drift findings block ready
	StepImage     = "image"     // agent streams, verifies and writes the image
	StepChecks    = "checks"    // acceptance checks
	StepHandoff   = "handoff"   // boot override to disk, reboot into the installed OS
	StepFirstBoot = "firstboot" // the installed OS reports kernel and drivers
	StepVerify    = "verify"    // BIOS attributes stuck, driver pins match
)

// Phases for the time-to-restore report, in the order a job goes through
// them: "firmware" (recipe firmware.apply before-image) comes first.
var Phases = []string{"firmware", "bmc", "post+boot", "inventory", "image", "checks", "reboot+firstboot", "verify"}

// ReimageSpec is the input of a reimage job.
type ReimageSpec struct {
	Machine string `json:"machine"` // machine ID
	Recipe  string `json:"recipe"`
	Reason  string `json:"reason,omitempty"`
	Actor   string `json:"actor,omitempty"`
	// Wave is the rollout wave that started the job ("ROLLOUT/N", N from
	// 1), empty outside a rollout: two-node burn-in tests pair only nodes
	// of one wave, which boot and burn in together.
	Wave string `json:"wave,omitempty"`
	// Drill marks a restore drill (ingot drill): its time to restore is
	// judged against the recipe's timeouts.restore.
	Drill bool `json:"drill,omitempty"`
	// Handoff is an operator's override of the recipe's os.handoff for
	// this job (already applied to Pinned); "" none.
	Handoff string `json:"handoff,omitempty"`
	// Warm: the first attempt asks the installed OS to kexec into the
	// agent (no POST); it falls back to the BMC when the node does not
	// take the request.
	Warm bool `json:"warm,omitempty"`
	// Pinned is the resolved recipe the job started with, and
	// RecipeDigest its digest: the job runs that version to its end,
	// whatever a recipe reload brings meanwhile.
	Pinned       json.RawMessage `json:"pinned_recipe,omitempty"`
	RecipeDigest string          `json:"recipe_digest,omitempty"`
}

// ReimageStatus is a reimage job's progress, persisted with the job.
type ReimageStatus struct {
	Phases   map[string]Phase `json:"phases,omitempty"`
	Bytes    int64            `json:"bytes,omitempty"`
	Total    int64            `json:"total,omitempty"`
	RateBps  float64          `json:"rate_bps,omitempty"`
	Findings []Finding        `json:"findings,omitempty"`
	Checks   []CheckResult    `json:"checks,omitempty"`
	BurnIn   []CheckResult    `json:"burn_in,omitempty"` // reported by the installed OS
	// LoadWatts is the highest node draw the BMC reported while the burn-in
	// ran, over LoadSamples readings: the node's watts under load.
	LoadWatts   int               `json:"load_watts,omitempty"`
	LoadSamples int               `json:"load_samples,omitempty"`
	Software    *machine.Software `json:"software,omitempty"`
	Log         []string          `json:"log,omitempty"` // last agent log lines (evidence)
	Restore     time.Duration     `json:"restore,omitempty"`
	// Warm says how a warm reimage's first attempt went: "kexec" (the
	// node took the request) or why it fell back to the BMC.
	Warm string `json:"warm,omitempty"`
	// Firmware is the firmware step's progress (recipe firmware.apply:
	// before-image), nil without one.
	Firmware *FirmwareNode `json:"firmware,omitempty"`
}

// Phase is when one phase started and ended.
type Phase struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitempty"`
}

// CheckResult is one acceptance check's outcome as the agent reports it.
type CheckResult struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Skipped: the check did not run (never OK). Waived: it failed and an
	// operator let this machine past it (who and why in Detail).
	Skipped bool    `json:"skipped,omitempty"`
	Waived  bool    `json:"waived,omitempty"`
	Detail  string  `json:"detail,omitempty"`
	Value   float64 `json:"value,omitempty"`
	// Metrics are the other numbers measured (max_gpu_temp_c, ...).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Verdict is the server's judgement: passed, failed (the hardware gave
	// wrong or too-slow results, or evidence is missing) or could-not-run
	// (the tool did not measure). The node's own OK is advisory.
	Verdict api.Verdict `json:"verdict,omitempty"`
	// Evidence is what a burn-in tool measured, as the node read it: what
	// the server judged.
	Evidence *api.Evidence `json:"evidence,omitempty"`
}

func decodeStatus(j *store.Job) (ReimageStatus, error) {
	var st ReimageStatus
	if len(j.Status) > 0 {
		if err := json.Unmarshal(j.Status, &st); err != nil {
			return st, fmt.Errorf("job %s: decoding status: %w", j.ID, err)
		}
	}
	if st.Phases == nil {
		st.Phases = map[string]Phase{}
	}
	return st, nil
}

// jobRecipe is the recipe a job runs: the one pinned when it started, or
// (jobs from before pinning) the one in force now.
func (e *Engine) jobRecipe(sp ReimageSpec) (*recipe.Recipe, error) {
	if len(sp.Pinned) == 0 {
		return e.recipes(sp.Recipe)
	}
	var r recipe.Recipe
	if err := json.Unmarshal(sp.Pinned, &r); err != nil {
		return nil, fmt.Errorf("the recipe pinned in the job (%s, digest %s): %w", sp.Recipe, short(sp.RecipeDigest), err)
	}
	return &r, nil
}

func decodeSpec(j *store.Job) (ReimageSpec, error) {
	var sp ReimageSpec
	if err := json.Unmarshal(j.Spec, &sp); err != nil {
		return sp, fmt.Errorf("job %s: decoding spec: %w", j.ID, err)
	}
	return sp, nil
}

func encodeStatus(j *store.Job, st ReimageStatus) error {
	b, err := json.Marshal(st)
	j.Status = b
	return err
}

// Status decodes a reimage job's status for display.
func Status(j *store.Job) (ReimageStatus, error) { return decodeStatus(j) }

// formatPhases renders the time to restore by phase:
// "time to restore 1m32s: bmc 2s, post+boot 41s, ...".
func formatPhases(st ReimageStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "time to restore %s:", st.Restore.Round(time.Second))
	sep := " "
	for _, name := range Phases {
		p, ok := st.Phases[name]
		if !ok || p.End.IsZero() {
			continue
		}
		fmt.Fprintf(&b, "%s%s %s", sep, name, p.End.Sub(p.Start).Round(100*time.Millisecond))
		sep = ", "
	}
	return b.String()
}

// SetWaveCheck sets the rollout wave gate after New (telemetry is built on
// the fleet, which is built after the engine). Call before Run.
func (e *Engine) SetWaveCheck(c WaveCheck) { e.waveCheck = c }

// DrillMaxAge is the age limit of a passing drill (Config.DrillMaxAge).
func (e *Engine) DrillMaxAge() time.Duration { return e.drillAge }
