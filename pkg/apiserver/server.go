// Package apiserver is ingot's REST API: operator endpoints (machines,
// inventory, recipes, jobs, events, reimage, rollout) behind operator bearer
// tokens, and the agent endpoints of pkg/api behind each machine's one-time
// token. The OpenAPI document (openapi.yaml) is embedded, served at
// /api/v1/openapi.yaml and checked against the routes by a test.
package apiserver

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/api"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/telemetry"
	"github.com/ingot-dev/ingot/pkg/warm"
)

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the embedded OpenAPI document.
func OpenAPI() []byte { return openAPI }

// Config builds a Server.
type Config struct {
	Engine  *engine.Engine
	Fleet   *fleet.Service
	Recipes engine.RecipeSource
	// Images lists the content store's images (GET /api/v1/images); nil:
	// none.
	Images func() ([]wire.Image, error)
	// Version is the server's version, sent on every answer
	// (wire.VersionHeader).
	Version string
	// RecipeNames lists the recipes the server knows.
	RecipeNames func() []string
	// BaseURL is how machines reach the boot listener (http://10.77.0.1:8080):
	// image URLs in agent tasks are built from it. Empty: the URLs are
	// paths, which the agent resolves against its ingot.server.
	BaseURL string
	// ArtifactSize gives the size of a stored artifact, so agents can show
	// progress against a total; nil: sizes unknown.
	ArtifactSize func(sha256 string) (int64, bool)
	// Auth issues and checks machine credentials (who may speak for a
	// machine).
	Auth *agentauth.Auth
	// PublicLimit bounds, per client address, the routes anyone may call
	// without a credential (the by-MAC agent routes, version, the OpenAPI
	// document): over it they get 429 with Retry-After. nil: no limit.
	PublicLimit *ratelimit.Limiter
	// Telemetry answers alerts and readings; nil: none (empty lists).
	Telemetry *telemetry.Service
	// DialBMCLogs opens a machine's BMC to read its event log (SEL) and
	// serial console into evidence bundles (BMCLogsDialer builds one over
	// pkg/bmc); nil: bundles say these were not collected.
	DialBMCLogs DialBMCLogs
	// WarmKey is the server's warm reimage public key (pkg/warm, base64):
	// agents of recipes with os.warm_reimage install it. "" none.
	WarmKey string
	Logger  *slog.Logger
	Now     func() time.Time
}

// Server serves the API.
type Server struct {
	engine       *engine.Engine
	fleet        *fleet.Service
	images       func() ([]wire.Image, error)
	version      string
	recipes      engine.RecipeSource
	recipeNames  func() []string
	artifactSize func(string) (int64, bool)
	baseURL      string
	auth         *agentauth.Auth
	publicLimit  *ratelimit.Limiter
	telemetry    *telemetry.Service
	dialBMCLogs  DialBMCLogs
	warmKey      string
	log          *slog.Logger
	now          func() time.Time
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Fleet == nil || cfg.Auth == nil || cfg.Recipes == nil {
		return nil, errors.New("apiserver: Engine, Fleet, Auth and Recipes are required")
	}
	s := &Server{engine: cfg.Engine, fleet: cfg.Fleet, images: cfg.Images, version: cfg.Version, recipes: cfg.Recipes, recipeNames: cfg.RecipeNames, artifactSize: cfg.ArtifactSize,
		baseURL: strings.TrimRight(cfg.BaseURL, "/"), auth: cfg.Auth, publicLimit: cfg.PublicLimit, telemetry: cfg.Telemetry, dialBMCLogs: cfg.DialBMCLogs, warmKey: cfg.WarmKey, log: cfg.Logger, now: cfg.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.recipeNames == nil {
		s.recipeNames = func() []string { return nil }
	}
	return s, nil
}

type access int

const (
	public    access = iota
	operator         // an operator token
	agent            // the job's agent credential, from its address
	exchange         // a boot credential, from the address it was issued to
	firstBoot        // the job's first-boot credential, from the machine
)

// limited reports whether requests of this access count against the
// per-address public limit before anything else: the routes anyone may
// call, and the exchange, whose boot credential is checked only after (a
// credential seen on the boot network, replayed from elsewhere, is refused
// there and each refusal is a security event).
func (a access) limited() bool { return a == public || a == exchange }

// kinds are the machine credentials each access takes.
func (a access) kinds() []string {
	switch a {
	case agent:
		return []string{agentauth.KindAgent}
	case exchange:
		return []string{agentauth.KindBoot}
	case firstBoot:
		return []string{agentauth.KindFirstBoot}
	}
	return nil
}

type route struct {
	method, pattern string
	access          access
	h               func(w http.ResponseWriter, r *http.Request, p principal) error
	// maxBody bounds the request body (0: defaultBody); a route reads it
	// only after its caller was authenticated or tied to a machine.
	maxBody int64
}

// Request body limits.
const (
	defaultBody   = 1 << 20  // operator requests, checks, logs, first boot
	inventoryBody = 4 << 20  // an agent's inventory (8 GPUs, NICs, disks, DIMMs)
	smallBody     = 64 << 10 // progress, done, peer, exchange
)

func (s *Server) routes() []route {
	return []route{
		{"GET", "/api/v1/openapi.yaml", public, s.getOpenAPI, 0},
		{"GET", "/api/v1/version", public, s.getVersion, 0},
		{"GET", "/api/v1/machines", operator, s.listMachines, 0},
		{"POST", "/api/v1/machines", operator, s.createMachine, 0},
		{"GET", "/api/v1/machines/{id}", operator, s.getMachine, 0},
		{"DELETE", "/api/v1/machines/{id}", operator, s.deleteMachine, 0},
		{"PUT", "/api/v1/machines/{id}/recipe", operator, s.putRecipe, 0},
		{"POST", "/api/v1/machines/{id}/inspect", operator, s.postInspect, 0},
		{"GET", "/api/v1/machines/{id}/inventory", operator, s.getInventory, 0},
		{"GET", "/api/v1/machines/{id}/inventory/diff", operator, s.getInventoryDiff, 0},
		{"GET", "/api/v1/machines/{id}/events", operator, s.getEvents, 0},
		{"POST", "/api/v1/machines/{id}/waivers", operator, s.postWaiver, 0},
		{"DELETE", "/api/v1/machines/{id}/waivers/{check}", operator, s.deleteWaiver, 0},
		{"GET", "/api/v1/recipes", operator, s.listRecipes, 0},
		{"GET", "/api/v1/recipes/{name}", operator, s.getRecipe, 0},
		{"GET", "/api/v1/jobs", operator, s.listJobs, 0},
		{"GET", "/api/v1/jobs/{id}", operator, s.getJob, 0},
		{"POST", "/api/v1/jobs/{id}/cancel", operator, s.postCancel, 0},
		{"GET", "/api/v1/jobs/{id}/evidence", operator, s.getEvidence, 0},
		{"POST", "/api/v1/reimage", operator, s.postReimage, 0},
		{"POST", "/api/v1/rollouts", operator, s.postRollout, 0},
		{"GET", "/api/v1/rollouts/{id}", operator, s.getJob, 0},
		{"GET", "/api/v1/tokens", operator, s.listTokens, 0},
		{"POST", "/api/v1/tokens", operator, s.postToken, 0},
		{"DELETE", "/api/v1/tokens/{id}", operator, s.deleteToken, 0},
		{"GET", "/api/v1/images", operator, s.listImages, 0},
		{"GET", "/api/v1/secrets", operator, s.listSecrets, 0},
		{"PUT", "/api/v1/secrets/{name}", operator, s.putSecret, smallBody},
		{"DELETE", "/api/v1/secrets/{name}", operator, s.deleteSecret, 0},
		{"POST", "/api/v1/secrets/{name}/endpoints", operator, s.postSecretEndpoint, smallBody},
		{"POST", "/api/v1/secrets/rotate-key", operator, s.postRotateKey, smallBody},
		{"POST", "/api/v1/bmc/rotate", operator, s.postBMCRotate, smallBody},
		{"POST", "/api/v1/backup", operator, s.postBackup, smallBody},
		{"GET", "/api/v1/alerts", operator, s.listAlerts, 0},
		{"GET", "/api/v1/alerts/silences", operator, s.listSilences, 0},
		{"POST", "/api/v1/alerts/silences", operator, s.postSilence, smallBody},
		{"GET", "/api/v1/readings", operator, s.listReadings, 0},
		{"GET", "/api/v1/power/report", operator, s.getPowerReport, 0},
		{"GET", "/api/v1/plan/capacity", operator, s.getCapacityPlan, 0},
		{"PUT", "/api/v1/machines/{id}/drill-candidate", operator, s.putDrillCandidate, smallBody},
		{"POST", "/api/v1/drills", operator, s.postDrill, smallBody},
		{"GET", "/api/v1/recipes/readiness", operator, s.listReadiness, 0},
		{"GET", "/api/v1/firmware/plan", operator, s.getFirmwarePlan, 0},
		{"POST", "/api/v1/firmware/apply", operator, s.postFirmwareApply, smallBody},
		{"POST", api.PathCredential, public, s.agentCredential, smallBody},
		{"POST", api.PathExchange, exchange, s.agentExchange, smallBody},
		{"GET", api.PathTask, agent, s.agentTask, 0},
		{"POST", api.PathInventory, public, s.agentInventory, inventoryBody},
		{"POST", api.PathProgress, agent, s.agentProgress, smallBody},
		{"POST", api.PathChecks, agent, s.agentChecks, 0},
		{"POST", api.PathLog, agent, s.agentLog, 0},
		{"POST", api.PathDone, agent, s.agentDone, smallBody},
		{"POST", api.PathFirstboot, firstBoot, s.agentFirstBoot, 0},
		{"POST", api.PathPeer, firstBoot, s.agentPeer, smallBody},
	}
}

// Register mounts every route on mux.
func (s *Server) Register(mux *http.ServeMux) {
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.method+" "+rt.pattern, s.wrap(rt))
	}
}

// Handler returns a mux with only the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.Register(mux)
	return mux
}

// httpError carries a status code with a message for people.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) wrap(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.version != "" {
			w.Header().Set(wire.VersionHeader, s.version)
		}
		limit := rt.maxBody
		if limit == 0 {
			limit = defaultBody
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if rt.access.limited() {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			if ok, wait := s.publicLimit.Allow(host); !ok {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				writeErr(w, http.StatusTooManyRequests, fmt.Sprintf("%s %s: too many requests from %s before a credential is checked; retry in %s", r.Method, r.URL.Path, host, wait.Round(time.Millisecond)))
				return
			}
		}
		var p principal
		if rt.access != public {
			var err error
			if p, err = s.authenticate(r, rt.access.kinds()...); err != nil {
				code := http.StatusUnauthorized
				if errors.Is(err, agentauth.ErrForeign) || errors.Is(err, agentauth.ErrWrongKind) || errors.Is(err, agentauth.ErrNotTied) {
					code = http.StatusForbidden
				}
				s.log.Info("api request refused", "method", r.Method, "path", r.URL.Path, "from", r.RemoteAddr, "err", err)
				writeErr(w, code, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
				return
			}
			switch {
			case rt.access == operator && !p.operator:
				writeErr(w, http.StatusForbidden, "this endpoint needs an operator token")
				return
			case rt.access == operator && p.readOnly && r.Method != http.MethodGet:
				writeErr(w, http.StatusForbidden, fmt.Sprintf("%s %s: token %s is read-only: this needs an operator token", r.Method, r.URL.Path, p.name))
				return
			case rt.access != operator && p.machineID == "":
				writeErr(w, http.StatusForbidden, "this endpoint needs a machine credential, not an operator token")
				return
			}
		}
		if err := rt.h(w, r, p); err != nil {
			code := http.StatusInternalServerError
			var he *httpError
			switch {
			case errors.As(err, &he):
				code = he.code
			case errors.Is(err, fleet.ErrNotFound):
				code = http.StatusNotFound
			case errors.Is(err, fleet.ErrStale):
				code = http.StatusPreconditionFailed
			case errors.Is(err, fleet.ErrInvalid):
				code = http.StatusBadRequest
			case errors.Is(err, fleet.ErrExists), errors.Is(err, fleet.ErrConflict), errors.Is(err, fleet.ErrBusy),
				errors.Is(err, engine.ErrEnded):
				code = http.StatusConflict
			case errors.Is(err, engine.ErrPreflight):
				code = http.StatusUnprocessableEntity
			case errors.Is(err, fleet.ErrNoSecrets):
				code = http.StatusNotImplemented
			case errors.Is(err, credential.ErrRefused):
				code = http.StatusForbidden // a credential's rules refused the BMC dial
			}
			if code >= 500 {
				s.log.Error("api", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeErr(w, code, err.Error())
		}
	}
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads one JSON value from the body (its route's limit applies:
// wrap) and refuses unknown fields and anything after the value.
func decode(r *http.Request, v any) error {
	d := json.NewDecoder(r.Body)
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil && d.More() {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errorf(http.StatusRequestEntityTooLarge, "request body of %s %s: larger than this route's %d bytes", r.Method, r.URL.Path, tooBig.Limit)
	}
	if err != nil {
		return errorf(http.StatusBadRequest, "request body of %s %s: %v", r.Method, r.URL.Path, err)
	}
	return nil
}

// agentCredential gives an agent that booted without an iPXE script (UEFI
// HTTP boot, virtual media) its boot credential, asked for by ?mac=, under
// the rules of the script: only to the address tied to that MAC, only for
// a machine in a job.
func (s *Server) agentCredential(w http.ResponseWriter, r *http.Request, _ principal) error {
	mac, err := machine.NormalizeMAC(r.URL.Query().Get("mac"))
	if err != nil {
		return errorf(http.StatusBadRequest, "%s: query parameter mac: %v", r.URL.Path, err)
	}
	from, err := remoteAddr(r)
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	m, err := s.fleet.ByMAC(r.Context(), mac)
	if err != nil {
		return errorf(http.StatusForbidden, "%s: no machine with MAC %s", r.URL.Path, mac)
	}
	j, err := s.engine.ActiveJob(r.Context(), m.ID)
	if err != nil {
		return errorf(http.StatusForbidden, "%s: machine %s is in no job: nothing to boot for", r.URL.Path, m.Name)
	}
	tok, err := s.auth.IssueBoot(r.Context(), m.ID, mac, j.ID, from)
	if err != nil {
		s.log.Info("boot credential refused", "mac", mac, "machine", m.ID, "from", from, "err", err)
		return errorf(http.StatusForbidden, "%s: %v", r.URL.Path, err)
	}
	writeJSON(w, 200, api.Exchange{Token: tok, MachineID: m.ID, JobID: j.ID})
	return nil
}

// agentExchange trades the boot credential of the iPXE script for the
// job's agent credential, bound to the caller's address.
func (s *Server) agentExchange(w http.ResponseWriter, r *http.Request, _ principal) error {
	secret, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	from, err := remoteAddr(r)
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	tok, t, err := s.auth.Exchange(r.Context(), secret, from)
	if err != nil {
		return errorf(http.StatusForbidden, "%v", err)
	}
	writeJSON(w, 200, api.Exchange{Token: tok, MachineID: agentauth.MachineID(t), JobID: t.JobID})
	return nil
}

func (s *Server) agentTask(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := s.engine.OnTask(r.Context(), p.machineID)
	if err != nil {
		return err
	}
	out := api.Task{MachineID: p.machineID, Mode: api.Mode(t.Mode)}
	if t.JobID != "" && t.Mode == string(api.ModeProvision) {
		if out.FirstBootSecret, err = s.auth.IssueFirstBoot(r.Context(), p.machineID, t.JobID); err != nil {
			return err
		}
	}
	if rc := t.Recipe; rc != nil {
		out.Recipe, out.RecipeVersion = rc.Name, rc.Version
		img := rc.OS.Image
		url := img.URL
		if url == "" {
			url = s.base(r) + "/artifacts/sha256/" + img.SHA256
		}
		out.Image = api.Image{URL: url, SHA256: img.SHA256, Format: img.Format}
		if s.artifactSize != nil && img.URL == "" {
			out.Image.Size, _ = s.artifactSize(img.SHA256)
		}
		for _, d := range rc.Hardware.Disks {
			if d.Boot {
				out.Disk = d
			}
		}
		out.Checks, out.Expected, out.BurnIn = rc.Acceptance.Checks, rc.Hardware, rc.Acceptance.BurnIn
		out.Hostname = t.Hostname
		if fb := rc.OS.FirstBoot; fb != nil {
			out.CloudInit = fb.CloudInit
		}
		out.Handoff, out.Cmdline = api.Handoff(rc.OS.Handoff), rc.OS.Cmdline
		if rc.OS.WarmReimage && s.warmKey != "" && t.Mode == string(api.ModeProvision) {
			m, err := s.fleet.Get(r.Context(), p.machineID)
			if err != nil {
				return err
			}
			if len(m.MACs) > 0 {
				out.Warm = &api.Warm{Key: s.warmKey, Port: warm.Port, MAC: m.MACs[0]}
			}
		}
	}
	writeJSON(w, 200, out)
	return nil
}

// agentInventory takes the agent's inventory. A provisioning agent sends
// its machine token; a discovery agent (an unknown machine booted with no
// token) sends ?mac=, accepted only from the address ingot's DHCP leased
// to that MAC and only for a machine still in state discovered.
func (s *Server) agentInventory(w http.ResponseWriter, r *http.Request, _ principal) error {
	// Who is asking first: nothing of the body is read for a caller that
	// is neither authenticated nor tied to a machine.
	id, err := s.machineByTokenOrLease(r)
	if err != nil {
		return err
	}
	if r.Header.Get("Authorization") == "" {
		m, err := s.fleet.Get(r.Context(), id)
		if err != nil {
			return err
		}
		if m.State != machine.StateDiscovered {
			return errorf(http.StatusForbidden, "inventory by MAC is for discovered machines; %s is %s: use its machine token", m.Name, m.State)
		}
	}
	var inv machine.Inventory
	if err := decode(r, &inv); err != nil {
		return err
	}
	p := principal{machineID: id}
	if inv.Source == "" {
		inv.Source = "agent"
	}
	if err := s.engine.OnInventory(r.Context(), p.machineID, inv); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) agentProgress(w http.ResponseWriter, r *http.Request, p principal) error {
	var pr api.Progress
	if err := decode(r, &pr); err != nil {
		return err
	}
	if err := s.engine.OnProgress(r.Context(), p.machineID, pr.Step, pr.Bytes, pr.Total, pr.RateBps); err != nil {
		return errorf(http.StatusConflict, "%v", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) agentChecks(w http.ResponseWriter, r *http.Request, p principal) error {
	var in []api.CheckResult
	if err := decode(r, &in); err != nil {
		return err
	}
	if err := s.engine.OnChecks(r.Context(), p.machineID, checkResults(in)); err != nil {
		return errorf(http.StatusConflict, "%v", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkResults carries the agent's results to the engine. A skipped check
// is shown as skipped and is never OK: the engine decides whether the
// recipe required it.
func checkResults(in []api.CheckResult) []engine.CheckResult {
	res := make([]engine.CheckResult, len(in))
	for i, c := range in {
		res[i] = engine.CheckResult{Name: c.Name, OK: c.OK && !c.Skipped, Skipped: c.Skipped, Detail: c.Detail, Value: c.Value, Metrics: c.Metrics,
			Verdict: c.Verdict, Evidence: c.Evidence}
	}
	return res
}

func (s *Server) agentLog(w http.ResponseWriter, r *http.Request, p principal) error {
	var l api.Log
	if err := decode(r, &l); err != nil {
		return err
	}
	if err := s.engine.OnLog(r.Context(), p.machineID, l.Lines); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) agentDone(w http.ResponseWriter, r *http.Request, p principal) error {
	var d api.Done
	if err := decode(r, &d); err != nil {
		return err
	}
	if err := s.engine.OnDone(r.Context(), p.machineID, d.Step, d.OK, d.Reason); err != nil {
		return errorf(http.StatusConflict, "%v", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// agentFirstBoot takes the installed OS's report. It must present the job's
// first-boot credential, which the agent wrote into the installed system
// during the image step, from an address tied to the machine: a report
// without it is refused (401), from elsewhere refused and recorded (403).
func (s *Server) agentFirstBoot(w http.ResponseWriter, r *http.Request, p principal) error {
	var fb api.FirstBoot
	if err := decode(r, &fb); err != nil {
		return err
	}
	if err := s.engine.OnFirstBoot(r.Context(), p.machineID, engine.FirstBoot{Software: fb.Software, BurnIn: checkResults(fb.BurnIn)}); err != nil {
		return errorf(http.StatusConflict, "%v", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// agentPeer pairs a node in burn-in with another of its recipe for a
// fabric test (iperf3, ib_write_bw), asked by the installed OS.
func (s *Server) agentPeer(w http.ResponseWriter, r *http.Request, p principal) error {
	var req api.PeerRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Check != "iperf3" && req.Check != "ib-write-bw" {
		return errorf(http.StatusBadRequest, "%s: check %q: expected iperf3 or ib-write-bw", r.URL.Path, req.Check)
	}
	addr := req.Address
	if addr == "" {
		from, err := remoteAddr(r)
		if err != nil {
			return errorf(http.StatusBadRequest, "%v", err)
		}
		addr = from.String()
	}
	peer, err := s.engine.Pair(r.Context(), p.machineID, req.Check, addr)
	if err != nil {
		return errorf(http.StatusConflict, "%v", err)
	}
	writeJSON(w, 200, api.Peer{Role: peer.Role, Address: peer.Address})
	return nil
}

// machineByTokenOrLease identifies the machine of a request that may carry no
// token: by its agent credential when it has one, else by ?mac= tied to the
// caller's address (its DHCP lease or neighbour entry, see agentauth).
func (s *Server) machineByTokenOrLease(r *http.Request) (string, error) {
	if r.Header.Get("Authorization") != "" {
		p, err := s.authenticate(r, agentauth.KindAgent)
		if err != nil {
			return "", errorf(http.StatusForbidden, "%s: %v", r.URL.Path, err)
		}
		if p.machineID == "" {
			return "", errorf(http.StatusForbidden, "%s: needs a machine token, not an operator token", r.URL.Path)
		}
		return p.machineID, nil
	}
	mac, err := machine.NormalizeMAC(r.URL.Query().Get("mac"))
	if err != nil {
		return "", errorf(http.StatusBadRequest, "%s: query parameter mac: %v", r.URL.Path, err)
	}
	from, err := remoteAddr(r)
	if err != nil {
		return "", errorf(http.StatusBadRequest, "%v", err)
	}
	if err := s.auth.Tie(r.Context(), mac, from); err != nil {
		return "", errorf(http.StatusForbidden, "%s: %v", r.URL.Path, err)
	}
	m, err := s.fleet.ByMAC(r.Context(), mac)
	if err != nil {
		return "", errorf(http.StatusForbidden, "%s: no machine with MAC %s", r.URL.Path, mac)
	}
	return m.ID, nil
}

// base is the URL machines fetch artifacts from: BaseURL, else "" and
// the agent resolves the path against its ingot.server, the boot listener
// (the API's own listener, where the request came in, serves no
// artifacts).
func (s *Server) base(*http.Request) string { return s.baseURL }
