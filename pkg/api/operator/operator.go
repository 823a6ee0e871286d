// Package operator is the wire contract of ingot's operator API (the
// /api/v1 routes an operator's token opens): every request and response
// body, apart from the records the server persists. The server
// (pkg/apiserver) maps its core's answers onto these types; the client
// (pkg/client) and anything else that speaks the API read only these.
// openapi.yaml in pkg/apiserver documents the same shapes, and a test holds
// the two together.
//
// Machines, events and inventories travel as pkg/machine's plain types.
package operator

import (
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// VersionHeader carries the server's version on every answer; the CLI warns
// when it differs from its own.
const VersionHeader = "X-Ingot-Version"

// BootstrapTokenFile is the file in the server's data folder that a fresh
// server writes its first operator token's secret to (root only); the CLI
// and the lab read it when nothing else names a token.
const BootstrapTokenFile = "admin.token"

// Error is the body of every answer with a status of 400 or more.
type Error struct {
	Error string `json:"error"`
}

// SetRecipeRequest is the body of PUT /api/v1/machines/{id}/recipe; an
// empty recipe unassigns.
type SetRecipeRequest struct {
	Recipe string `json:"recipe"`
}

// WaiverRequest is the body of POST /api/v1/machines/{id}/waivers.
type WaiverRequest struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

// Finding is one way an inventory differs from its recipe.
type Finding struct {
	Severity string `json:"severity"` // critical, warning, info
	Part     string `json:"part"`
	Message  string `json:"message"`
	Expected string `json:"expected,omitempty"`
	Found    string `json:"found,omitempty"`
	Check    string `json:"check,omitempty"` // the acceptance check that judges the same fact
}

// Inspection is the answer of POST /api/v1/machines/{id}/inspect.
type Inspection struct {
	Machine  string    `json:"machine"`
	Snapshot uint64    `json:"snapshot"`
	Recipe   string    `json:"recipe,omitempty"` // judged against; "" when no drift check ran
	Note     string    `json:"note,omitempty"`   // why no drift check ran
	Findings []Finding `json:"findings"`
	Summary  string    `json:"summary"`
	// Inventory is what the BMC reported.
	Inventory machine.Inventory `json:"inventory"`
}

// Snapshot is one kept inventory of a machine.
type Snapshot struct {
	Seq       uint64            `json:"seq"`
	MachineID string            `json:"machine_id"`
	Taken     time.Time         `json:"taken"`
	Inventory machine.Inventory `json:"inventory"`
}

// InventoryDiff is the answer of GET /api/v1/machines/{id}/inventory/diff.
type InventoryDiff struct {
	Machine string           `json:"machine"`
	From    Snapshot         `json:"from"`
	To      Snapshot         `json:"to"`
	Changes []machine.Change `json:"changes"`
}

// Job is a reimage (kind reimage, a restore drill's too), a rollout or a
// firmware campaign: its progress is Reimage, Rollout or Firmware,
// whichever its kind has.
type Job struct {
	ID       string          `json:"id"`
	Kind     string          `json:"kind"` // reimage, rollout, firmware
	Machines []string        `json:"machines"`
	State    string          `json:"state"` // running, succeeded, failed, cancelled
	Step     string          `json:"step,omitempty"`
	Attempt  int             `json:"attempt,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Reimage  *ReimageStatus  `json:"reimage,omitempty"`
	Rollout  *RolloutStatus  `json:"rollout,omitempty"`
	Firmware *FirmwareStatus `json:"firmware,omitempty"`
	Created  time.Time       `json:"created"`
	Updated  time.Time       `json:"updated"`
	Deadline time.Time       `json:"deadline,omitempty"`
}

// Job states.
const (
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// CancelRequest is the body of POST /api/v1/jobs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// ReimageRequest is the body of POST /api/v1/reimage.
type ReimageRequest struct {
	Machines []string `json:"machines"`
	DryRun   bool     `json:"dry_run,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	// Handoff overrides the recipe's os.handoff for these jobs: reboot or
	// kexec ("" the recipe's).
	Handoff string `json:"handoff,omitempty"`
	// Warm asks each machine's installed OS to kexec into the agent (no
	// POST; the recipe must opt in), falling back to the BMC.
	Warm bool `json:"warm,omitempty"`
}

// Plan is what a reimage would do (dry run), or why it cannot.
type Plan struct {
	Machine  string   `json:"machine"`
	Name     string   `json:"name"`
	Recipe   string   `json:"recipe"`
	Steps    []string `json:"steps"`
	Problems []string `json:"problems,omitempty"`
}

// ReimageResult is one machine's answer to a ReimageRequest.
type ReimageResult struct {
	Machine string `json:"machine"`
	Plan    *Plan  `json:"plan,omitempty"`
	Job     *Job   `json:"job,omitempty"`
	Error   string `json:"error,omitempty"`
}

// RolloutRequest is the body of POST /api/v1/rollouts.
type RolloutRequest struct {
	Recipe      string   `json:"recipe"`
	Machines    []string `json:"machines,omitempty"` // default: every machine of the recipe
	Canary      int      `json:"canary,omitempty"`   // size of the first wave (default 1)
	Batch       int      `json:"batch"`              // size of later waves
	MaxFailures int      `json:"max_failures"`
	PerRack     int      `json:"per_rack,omitempty"`
	Reason      string   `json:"reason,omitempty"`
}

// TokenRequest is the body of POST /api/v1/tokens.
type TokenRequest struct {
	Name  string `json:"name"`
	Scope string `json:"scope,omitempty"` // operator (default) or read-only
	// TTL is a Go duration such as 720h; "" or "0": until revoked.
	TTL string `json:"ttl,omitempty"`
}

// Token is an operator token as listed: never its secret or hash.
type Token struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Scope   string    `json:"scope"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitempty"`
}

// TokenCreated answers POST /api/v1/tokens: the secret is shown this once.
type TokenCreated struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret"`
}

// Image is a golden image (or agent artifact) in the server's content store.
type Image struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Version answers GET /api/v1/version.
type Version struct {
	Version string `json:"version"`
}

// Secret describes a secret ingot keeps sealed (GET /api/v1/secrets): never
// its value.
type Secret struct {
	Name    string    `json:"name"`
	KeyID   string    `json:"key_id"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	UsedBy  []string  `json:"used_by"`
	// Endpoints are the BMC endpoints the secret may be sent to (none:
	// it is bound to the first one it is sent to).
	Endpoints []SecretBinding `json:"endpoints"`
}

// SecretBinding is one endpoint a secret may go to, who bound it and when.
type SecretBinding struct {
	Endpoint string    `json:"endpoint"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// SecretRequest is PUT /api/v1/secrets/{name}. Endpoints, when set, bind
// the secret to exactly those BMC endpoints.
type SecretRequest struct {
	Value     string   `json:"value"`
	Endpoints []string `json:"endpoints,omitempty"`
}

// SecretAllow is POST /api/v1/secrets/{name}/endpoints: let the secret
// also go to Endpoint.
type SecretAllow struct {
	Endpoint string `json:"endpoint"`
}

// KeyRotation answers POST /api/v1/secrets/rotate-key.
type KeyRotation struct {
	KeyID    string `json:"key_id"`
	Resealed int    `json:"resealed"`
}

// BMCRotateRequest is POST /api/v1/bmc/rotate: the named machines, or
// every machine of Recipe, or All (each with a secret: credential).
type BMCRotateRequest struct {
	Machines []string `json:"machines,omitempty"`
	Recipe   string   `json:"recipe,omitempty"`
	All      bool     `json:"all,omitempty"`
}

// BMCRotation is one machine's outcome.
type BMCRotation struct {
	Machine string `json:"machine"`
	Secret  string `json:"secret,omitempty"`
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// BackupKeyHeader names, on a backup's answer (POST /api/v1/backup), the
// ID of the secret key its sealed secrets need; the key is never in it.
const BackupKeyHeader = "X-Ingot-Secret-Key"

// Alert is a pending or firing telemetry alert (GET /api/v1/alerts).
type Alert struct {
	Rule      string    `json:"rule"`
	Machine   string    `json:"machine"`
	Rack      string    `json:"rack,omitempty"`
	Recipe    string    `json:"recipe,omitempty"`
	Severity  string    `json:"severity"`
	State     string    `json:"state"`
	Reading   string    `json:"reading"`
	Threshold string    `json:"threshold"`
	Summary   string    `json:"summary"`
	Action    string    `json:"action"`
	Since     time.Time `json:"since"`
	FiredAt   time.Time `json:"fired_at,omitzero"`
	Silenced  bool      `json:"silenced,omitempty"`
	// SilencedBy and SilencedUntil: an operator silenced it (POST
	// /api/v1/alerts/silences): listed, not delivered to the notifiers.
	SilencedBy    string    `json:"silenced_by,omitempty"`
	SilencedUntil time.Time `json:"silenced_until,omitzero"`
}

// SilenceRequest silences one machine's alert of one rule (POST
// /api/v1/alerts/silences): For is a Go duration, at most 168h.
type SilenceRequest struct {
	Machine string `json:"machine"` // name or ID
	Rule    string `json:"rule"`
	For     string `json:"for"`
	Reason  string `json:"reason,omitempty"`
}

// Silence is a silence in force (GET /api/v1/alerts/silences).
type Silence struct {
	Machine string    `json:"machine"` // name
	Rule    string    `json:"rule"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason,omitempty"`
	Created time.Time `json:"created"`
	Until   time.Time `json:"until"`
}

// Reading is a machine's last BMC poll (GET /api/v1/readings).
type Reading struct {
	Machine           string    `json:"machine"`
	Rack              string    `json:"rack,omitempty"`
	Recipe            string    `json:"recipe,omitempty"`
	Time              time.Time `json:"time"`
	Up                bool      `json:"up"`
	Error             string    `json:"error,omitempty"`
	PowerOn           bool      `json:"power_on"`
	Watts             float64   `json:"watts,omitempty"`
	PSUInputWatts     float64   `json:"psu_input_watts,omitempty"`
	PSUOutputWatts    float64   `json:"psu_output_watts,omitempty"`
	PSURedundancyLost bool      `json:"psu_redundancy_lost,omitempty"`
	InletC            float64   `json:"inlet_c,omitempty"`
	ExhaustC          float64   `json:"exhaust_c,omitempty"`
	CPUMaxC           float64   `json:"cpu_max_c,omitempty"`
	GPUMaxC           float64   `json:"gpu_max_c,omitempty"`
	FansFailed        []string  `json:"fans_failed,omitempty"`
	Path              string    `json:"path,omitempty"`
	PollSeconds       float64   `json:"poll_seconds"`
	Problems          []string  `json:"problems,omitempty"`
}

// PowerReport answers GET /api/v1/power/report.
type PowerReport struct {
	Window string      `json:"window"`
	Nodes  []NodePower `json:"nodes"`
	Racks  []RackPower `json:"racks"`
}

// NodePower is one machine's power and cost over the window.
type NodePower struct {
	Machine        string  `json:"machine"`
	Rack           string  `json:"rack,omitempty"`
	Recipe         string  `json:"recipe,omitempty"`
	GPUs           int     `json:"gpus"`
	Buckets        int     `json:"buckets"`
	MedianWatts    float64 `json:"median_watts"`
	P95Watts       float64 `json:"p95_watts"`
	MeanWatts      float64 `json:"mean_watts"`
	KWhPerDay      float64 `json:"kwh_per_day"`
	CostPerDay     float64 `json:"cost_per_day"`
	CostPerGPUHour float64 `json:"cost_per_gpu_hour"`
	PSUEfficiency  float64 `json:"psu_efficiency,omitempty"`
	WattsPerGPU    float64 `json:"watts_per_gpu,omitempty"`
	Inefficient    string  `json:"inefficient,omitempty"`
}

// RackPower is one rack's draw against its budget.
type RackPower struct {
	Rack        string  `json:"rack"`
	Nodes       int     `json:"nodes"`
	MedianWatts float64 `json:"median_watts"`
	P95Watts    float64 `json:"p95_watts"`
	BudgetWatts float64 `json:"budget_watts"`
	Headroom    float64 `json:"headroom_watts"`
	KWhPerDay   float64 `json:"kwh_per_day"`
	CostPerDay  float64 `json:"cost_per_day"`
	OverBudget  bool    `json:"over_budget"`
	PUE         float64 `json:"pue"`
	Tariff      float64 `json:"tariff"`
}

// CapacityPlan answers GET /api/v1/plan/capacity: what Count more servers
// of a class would draw and cost, and which racks have room.
type CapacityPlan struct {
	Recipe          string     `json:"recipe"`
	Count           int        `json:"count"`
	LoadWatts       float64    `json:"load_watts"`
	IdleWatts       float64    `json:"idle_watts"`
	Measured        bool       `json:"measured"` // false: the recipe's power section, an estimate
	Nodes           int        `json:"nodes"`    // machines measured
	Utilization     float64    `json:"utilization"`
	KWhPerMonth     float64    `json:"kwh_per_month"`
	CostPerMonth    float64    `json:"cost_per_month"`
	CostPerGPUHour  float64    `json:"cost_per_gpu_hour"`
	PUE             float64    `json:"pue"`
	Tariff          float64    `json:"tariff"`
	PlannedAtLoadKW float64    `json:"planned_at_load_kw"`
	Racks           []RackRoom `json:"racks"`
}

// RackRoom is how many more servers of the class a rack holds at load.
type RackRoom struct {
	Rack     string  `json:"rack"`
	Headroom float64 `json:"headroom_watts"`
	Fits     int     `json:"fits"`
}

// DrillCandidateRequest is PUT /api/v1/machines/{id}/drill-candidate.
type DrillCandidateRequest struct {
	Candidate bool `json:"candidate"`
}

// DrillRequest is POST /api/v1/drills: a restore drill of Recipe, on
// Machine (or the candidate drilled longest ago); Force allows a machine
// that is not a candidate.
type DrillRequest struct {
	Recipe  string `json:"recipe"`
	Machine string `json:"machine,omitempty"`
	Force   bool   `json:"force,omitempty"`
}

// Drill is a finished restore drill.
type Drill struct {
	Job            string    `json:"job"`
	Machine        string    `json:"machine"`
	At             time.Time `json:"at"`
	RestoreSeconds float64   `json:"restore_seconds"`
	TargetSeconds  float64   `json:"target_seconds,omitempty"`
	Passed         bool      `json:"passed"`
	Why            string    `json:"why,omitempty"`
}

// RecipeReadiness is a class's standing (GET /api/v1/recipes/readiness):
// its last drill against its restore target and whether it may scale.
type RecipeReadiness struct {
	Recipe        string  `json:"recipe"`
	TargetSeconds float64 `json:"target_seconds,omitempty"`
	LastDrill     *Drill  `json:"last_drill,omitempty"`
	LastPassed    *Drill  `json:"last_passed,omitempty"`
	ScaleReady    bool    `json:"scale_ready"`
	Why           string  `json:"why,omitempty"`
}
