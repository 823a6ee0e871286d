// Package httpboot is ingot's HTTP boot side: per-machine iPXE scripts,
// per-machine agent UKIs for UEFI HTTP boot, content-addressed artifacts
// (kernels, initrds, images) with Range and ETag, iPXE binaries, /metrics
// and /healthz.
//
// Routes (Register adds them to a mux; the API mounts its own beside them):
//
//	GET /ipxe?mac=MAC&arch=ARCH      the machine's iPXE script (see Decide)
//	GET /artifacts/sha256/<hex>      an artifact by content (ETag = the hash)
//	GET /artifacts/<name>            an artifact by human name (same ETag)
//	GET /boot/<file>                 iPXE binaries (bootfiles rules)
//	GET /uki/<MAC>.efi               the machine's agent UKI, for UEFI HTTP boot (uki.go)
//	GET /metrics, GET /healthz
//
// GET routes answer HEAD too. All but /metrics and /healthz count against
// the public rate limit per client address (limit.go).
package httpboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/boot/bootfiles"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/ratelimit"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/uki"
)

// Machines is the part of the store the script handler needs.
type Machines interface {
	MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error)
}

// RecipeFunc looks a recipe up by name (resolved, with extends applied).
type RecipeFunc func(name string) (*recipe.Recipe, error)

// Discovery is what unknown machines boot: the agent in discovery mode.
type Discovery struct {
	Kernel  string // artifact name or sha256; default "agent-vmlinuz"
	Initrd  string // artifact name or sha256; default "agent-initrd"
	Cmdline string // extra kernel arguments, e.g. "console=ttyS0"
}

// Config configures a Handler.
type Config struct {
	// ServerURL is how machines reach this server, e.g. http://10.77.0.1:8080.
	ServerURL string
	// APIURL is how agents reach the API when it has its own TLS listener
	// (ingot.api=), and CAFingerprint the certificate they pin there
	// (ingot.ca=, see pkg/tlsca). Empty: the API is at ServerURL.
	APIURL        string
	CAFingerprint string
	// Limit bounds, per client address, the requests of every route here
	// (none needs a credential): /ipxe, /uki/, /boot/, and /artifacts/
	// except Range requests, which continue a download (limit.go). Over
	// it, 429 with Retry-After. nil: no limit.
	Limit     *ratelimit.Limiter
	Machines  Machines
	Recipes   RecipeFunc
	Tokens    TokenIssuer
	Artifacts *artifact.Store
	BootFiles *bootfiles.Dirs // nil: no /boot/ route
	Unknown   string          // UnknownDiscover (default) or UnknownIgnore
	Discovery Discovery
	// Stub is systemd's EFI stub the agent UKIs are assembled on (UEFI
	// HTTP boot); default uki.EFIStub. Missing: /uki answers 503.
	Stub string
	// StubARM64 is the stub for an arm64 agent kernel (the kernel's PE
	// header decides); default uki.EFIStubARM64. Missing: 503 for arm64.
	StubARM64 string
	// StubSHA256 and StubARM64SHA256 pin the stubs' bytes (empty: not
	// checked): a stub whose sha256 differs is refused, /uki answers 503
	// and the log names the file (uki.ReadStub). serve's configuration
	// defaults them to Debian 12's package (uki.DebianStubSHA256).
	StubSHA256, StubARM64SHA256 string
	Logger                      *slog.Logger
	// Registerer receives ingot's HTTP metrics; Gatherer is what /metrics
	// exports (usually the same *prometheus.Registry). No global registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// Handler serves the boot routes.
type Handler struct {
	cfg Config
	log *slog.Logger
	m   *metrics
}

// New checks cfg and builds a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.ServerURL == "" || !strings.HasPrefix(cfg.ServerURL, "http") {
		return nil, fmt.Errorf("httpboot: server URL %q: expected http://IP:PORT that machines can reach", cfg.ServerURL)
	}
	cfg.ServerURL = strings.TrimSuffix(cfg.ServerURL, "/")
	cfg.APIURL = strings.TrimSuffix(cfg.APIURL, "/")
	if cfg.APIURL != "" && (!strings.HasPrefix(cfg.APIURL, "https://") || cfg.CAFingerprint == "") {
		return nil, fmt.Errorf("httpboot: API URL %q: expected https://HOST:PORT with the CA fingerprint agents pin", cfg.APIURL)
	}
	if cfg.Machines == nil || cfg.Recipes == nil || cfg.Tokens == nil || cfg.Artifacts == nil {
		return nil, errors.New("httpboot: Machines, Recipes, Tokens and Artifacts are required")
	}
	switch cfg.Unknown {
	case "":
		cfg.Unknown = UnknownDiscover
	case UnknownDiscover, UnknownIgnore:
	default:
		return nil, fmt.Errorf("httpboot: unknown-machine policy %q: expected %q or %q", cfg.Unknown, UnknownDiscover, UnknownIgnore)
	}
	if cfg.Discovery.Kernel == "" {
		cfg.Discovery.Kernel = "agent-vmlinuz"
	}
	if cfg.Discovery.Initrd == "" {
		cfg.Discovery.Initrd = "agent-initrd"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Stub == "" {
		cfg.Stub = uki.EFIStub
	}
	if cfg.StubARM64 == "" {
		cfg.StubARM64 = uki.EFIStubARM64
	}
	if _, err := os.Stat(cfg.Stub); err != nil {
		cfg.Logger.Warn("no EFI stub for agent UKIs: UEFI HTTP boot clients get 503 (apt-get install systemd-boot-efi)", "stub", cfg.Stub, "err", err)
	}
	checkStubPins(cfg)
	return &Handler{cfg: cfg, log: cfg.Logger, m: newMetrics(cfg.Registerer)}, nil
}

// Register adds the boot routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	route := func(pattern, name string, exempt func(*http.Request) bool, f http.HandlerFunc) {
		mux.Handle(pattern, h.m.instrument(name, Limit(h.cfg.Limit, name, exempt, f)))
	}
	route("GET /ipxe", "ipxe", nil, h.serveScript)
	route("GET /artifacts/sha256/{sha}", "artifact", h.resumes, h.serveArtifactSHA)
	route("GET /artifacts/{name}", "artifact", h.resumes, h.serveArtifactName)
	route("GET /uki/{file}", "uki", nil, h.serveUKI)
	if h.cfg.BootFiles != nil {
		route("GET /boot/{file...}", "boot", nil, h.serveBootFile)
	}
	if h.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(h.cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
}

// serveScript answers /ipxe?mac=&arch=.
func (h *Handler) serveScript(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	mac, err := machine.NormalizeMAC(q.Get("mac"))
	if err != nil {
		http.Error(w, "ipxe: query parameter mac: "+err.Error(), http.StatusBadRequest)
		return
	}
	arch := q.Get("arch")
	m, err := h.cfg.Machines.MachineByMAC(ctx, mac)
	if errors.Is(err, store.ErrNotFound) {
		m, err = nil, nil
	}
	if err != nil {
		h.log.Error("ipxe looking up machine", "mac", mac, "err", err)
		http.Error(w, "ipxe: looking up machine failed", http.StatusServiceUnavailable)
		return
	}
	from, _ := remoteAddr(r)
	action, script := h.script(ctx, m, mac, arch, from)
	h.m.scripts.WithLabelValues(string(action)).Inc()
	log := h.log.With("mac", mac, "arch", arch, "action", action)
	if m != nil {
		log = log.With("machine", m.ID, "state", m.State)
	}
	log.Info("ipxe script")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, script)
}

// script decides and renders; failures render an error script (logged).
func (h *Handler) script(ctx context.Context, m *machine.Machine, mac, arch string, from netip.Addr) (Action, string) {
	action := Decide(m, h.cfg.Unknown)
	switch action {
	case ActionExit:
		return action, RenderExit(fmt.Sprintf("unknown machine %s, policy ignore", mac))
	case ActionLocal:
		return action, RenderLocal(fmt.Sprintf("machine %s is %s: boot from local disk", m.Name, m.State), IsUEFI(arch, m.Arch))
	case ActionDiscovery:
		b, err := h.discoveryBoot(m, mac)
		if err != nil {
			h.log.Error("ipxe discovery script", "mac", mac, "err", err)
			return "error", RenderError("cannot boot discovery agent: " + err.Error())
		}
		return action, RenderAgent(b)
	default:
		b, err := h.agentBoot(ctx, m, mac, from)
		if err != nil {
			h.log.Error("ipxe agent script", "mac", mac, "machine", m.ID, "from", from, "err", err)
			return "error", RenderError(fmt.Sprintf("cannot boot machine %s: %v", m.Name, err))
		}
		return action, RenderAgent(b)
	}
}

func (h *Handler) agentBoot(ctx context.Context, m *machine.Machine, mac string, from netip.Addr) (AgentBoot, error) {
	if m.Recipe == "" {
		return AgentBoot{}, errors.New("no recipe assigned")
	}
	rc, err := h.cfg.Recipes(m.Recipe)
	if err != nil {
		return AgentBoot{}, fmt.Errorf("recipe %s: %w", m.Recipe, err)
	}
	kernel, err := h.artifactURL(rc.OS.Agent.Kernel.SHA256, rc.OS.Agent.Kernel.Path)
	if err != nil {
		return AgentBoot{}, fmt.Errorf("recipe %s os.agent.kernel: %w", rc.Name, err)
	}
	initrd, err := h.artifactURL(rc.OS.Agent.Initrd.SHA256, rc.OS.Agent.Initrd.Path)
	if err != nil {
		return AgentBoot{}, fmt.Errorf("recipe %s os.agent.initrd: %w", rc.Name, err)
	}
	tok, err := h.cfg.Tokens.IssueBootCredential(ctx, m, mac, from)
	if err != nil {
		return AgentBoot{}, fmt.Errorf("no boot credential for %s: %w", from, err)
	}
	return AgentBoot{
		Comment:   fmt.Sprintf("machine %s (%s) is %s: agent for recipe %s %s", m.Name, m.ID, m.State, rc.Name, rc.Version),
		KernelURL: kernel,
		InitrdURL: initrd,
		Cmdline: joinArgs("ingot.server="+h.cfg.ServerURL, h.apiArgs(), "ingot.token="+tok, "ingot.machine="+m.ID,
			rc.OS.Agent.Cmdline),
	}, nil
}

func (h *Handler) discoveryBoot(m *machine.Machine, mac string) (AgentBoot, error) {
	kernel, err := h.artifactURL("", h.cfg.Discovery.Kernel)
	if err != nil {
		return AgentBoot{}, fmt.Errorf("discovery kernel: %w", err)
	}
	initrd, err := h.artifactURL("", h.cfg.Discovery.Initrd)
	if err != nil {
		return AgentBoot{}, fmt.Errorf("discovery initrd: %w", err)
	}
	comment := fmt.Sprintf("unknown machine %s: discovery agent", mac)
	if m != nil {
		comment = fmt.Sprintf("machine %s (%s) discovered, not enrolled: discovery agent", mac, m.ID)
	}
	return AgentBoot{
		Comment:   comment,
		KernelURL: kernel,
		InitrdURL: initrd,
		Cmdline:   joinArgs("ingot.server="+h.cfg.ServerURL, h.apiArgs(), "ingot.mode=discovery", "ingot.mac="+mac, h.cfg.Discovery.Cmdline),
	}, nil
}

// artifactURL turns a recipe artifact into a URL: a pinned sha256 must be in
// the store; a URL path is used as is; a name is resolved in the store.
// Served by hash either way, so a renamed artifact cannot change under a
// booting machine.
func (h *Handler) artifactURL(sha, path string) (string, error) {
	switch {
	case strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://"):
		return path, nil
	case sha != "":
		if !h.cfg.Artifacts.Has(sha) {
			return "", fmt.Errorf("sha256 %s is not in the artifact store (import it first)", sha)
		}
		return h.cfg.ServerURL + "/artifacts/sha256/" + sha, nil
	case path != "":
		got, err := h.cfg.Artifacts.Resolve(path)
		if err != nil {
			return "", err
		}
		return h.cfg.ServerURL + "/artifacts/sha256/" + got, nil
	default:
		return "", errors.New("neither sha256 nor path is set")
	}
}

// remoteAddr is the IP a request came from.
func remoteAddr(r *http.Request) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr().Unmap(), nil
}

// apiArgs tells the agent where the TLS API is and which certificate to
// pin there; "" when the API shares the boot listener.
func (h *Handler) apiArgs() string {
	if h.cfg.APIURL == "" {
		return ""
	}
	return joinArgs("ingot.api="+h.cfg.APIURL, "ingot.ca="+h.cfg.CAFingerprint)
}

func joinArgs(args ...string) string {
	var out []string
	for _, a := range args {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return strings.Join(out, " ")
}

func (h *Handler) serveArtifactSHA(w http.ResponseWriter, r *http.Request) {
	h.serveArtifact(w, r, r.PathValue("sha"))
}

func (h *Handler) serveArtifactName(w http.ResponseWriter, r *http.Request) {
	sha, err := h.cfg.Artifacts.Resolve(r.PathValue("name"))
	if err != nil {
		http.Error(w, "artifact not found", http.StatusNotFound)
		return
	}
	h.serveArtifact(w, r, sha)
}

// serveArtifact serves one stored artifact with Range, HEAD, ETag (the
// sha256) and If-None-Match / If-Range, via http.ServeContent (sendfile).
func (h *Handler) serveArtifact(w http.ResponseWriter, r *http.Request, sha string) {
	f, err := h.cfg.Artifacts.Open(sha)
	if err != nil {
		http.Error(w, "artifact not found", http.StatusNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "artifact unreadable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("ETag", `"`+sha+`"`)
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("Content-Type", "application/octet-stream")
	serveFile(w, r, f, fi.Size(), fi.ModTime())
}

// serveBootFile serves iPXE binaries for UEFI HTTP boot clients.
func (h *Handler) serveBootFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	f, err := h.cfg.BootFiles.Open(name)
	if err != nil {
		logf := h.log.Info
		if errors.Is(err, bootfiles.ErrChanged) {
			logf = h.log.Error
		}
		logf("http boot file refused", "file", name, "client", r.RemoteAddr, "err", err)
		http.Error(w, "boot file not found", http.StatusNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "boot file unreadable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	serveFile(w, r, f, fi.Size(), fi.ModTime())
}

// checkStubPins names, at start, every present stub whose bytes are not
// its pin: /uki/ refuses it at each request (uki.ReadStub) until the pin
// or the stub is put right.
func checkStubPins(cfg Config) {
	for _, st := range []struct{ path, pin, flag string }{
		{cfg.Stub, cfg.StubSHA256, "--efi-stub-sha256"}, {cfg.StubARM64, cfg.StubARM64SHA256, "--efi-stub-arm64-sha256"},
	} {
		if st.pin == "" {
			continue
		}
		if _, err := uki.ReadStub(st.path, st.pin); errors.Is(err, uki.ErrStubChanged) {
			cfg.Logger.Error("EFI stub changed since it was pinned: agent UKIs built on it are refused (503) until "+st.flag+" names its sha256", "stub", st.path, "err", err)
		}
	}
}
