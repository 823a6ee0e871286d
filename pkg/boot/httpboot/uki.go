package httpboot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/uki"
)

// Agent UKIs for UEFI HTTP boot.
//
// The DHCP server sends x86-64 and arm64 HTTP-boot firmware to /uki/MAC.efi
// (the stub follows the architecture of the recipe's agent kernel). The
// answer is one EFI application, systemd's stub with the agent's kernel,
// initrd and command line in it, which the firmware runs itself: no iPXE,
// no TFTP, no script.
//
// Design. A UKI's command line is baked in (systemd's stub ignores the
// firmware's load options under Secure Boot, and HTTP boot passes none),
// so it cannot carry the one-time boot credential the iPXE script puts on
// the kernel command line: a credential in a file that is fetched without
// one would go to whoever asks first, and would make every UKI a build of
// its own for one boot. The UKI carries only what is public: where the
// server and the API are, the CA to pin, the machine's MAC and ID. The
// agent, booted with ingot.mac and no ingot.token, asks the API for its
// boot credential by MAC (POST /api/v1/agent/credential), which pkg/agentauth
// gives under the script's rules: only to the address tied to that MAC
// (lease or neighbour entry), only for a machine in a job. From there on
// the path is the iPXE path's (exchange, task, ...).
//
// Scale. The UKI is per machine only in its command line, a few hundred
// bytes. It is assembled per request and never stored: its headers are
// written anew, the kernel and initrd are read from the artifact store's
// files (pkg/uki). A thousand machines booting at once cost a thousand
// small header writes and the same reads of two files that /artifacts
// would do for the iPXE path; nothing is built, cached or cleaned up, and
// a changed recipe or state takes effect at the next request.
//
// Secure Boot must be off for these UKIs (they are unsigned; OVMF refuses
// them with "Access Denied", see shared/LAB.md). A site that boots with
// Secure Boot needs a signed UKI, which means one per recipe, without the
// MAC: the agent would learn its MAC from the NIC it got its lease on.

// ukiBoot is what a machine's UKI holds: stored artifacts by sha256, and
// the command line.
type ukiBoot struct {
	action         Action
	kernel, initrd string
	cmdline        string
	comment        string
}

// serveUKI answers GET /uki/{file} (file = MAC.efi, the MAC with dashes or
// colons): the agent UKI for a machine the engine is working on, the
// discovery agent for one it does not know (policy discover); 404 for the
// rest, so that the firmware tries its next boot option (the local disk).
func (h *Handler) serveUKI(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	base, ok := strings.CutSuffix(r.PathValue("file"), ".efi")
	mac, err := machine.NormalizeMAC(base)
	if !ok || err != nil {
		http.Error(w, "uki: expected /uki/MAC.efi, e.g. /uki/52-54-00-12-34-56.efi", http.StatusNotFound)
		return
	}
	m, err := h.cfg.Machines.MachineByMAC(ctx, mac)
	if errors.Is(err, store.ErrNotFound) {
		m, err = nil, nil
	}
	if err != nil {
		h.log.Error("uki looking up machine", "mac", mac, "err", err)
		http.Error(w, "uki: looking up machine failed", http.StatusServiceUnavailable)
		return
	}
	log := h.log.With("mac", mac, "client", r.RemoteAddr, "method", r.Method)
	if m != nil {
		log = log.With("machine", m.ID, "state", m.State)
	}
	b, err := h.ukiFor(m, mac)
	if err != nil {
		log.Info("agent uki refused", "action", b.action, "err", err)
		code := http.StatusNotFound
		if b.action == ActionAgent || b.action == ActionDiscovery {
			code = http.StatusServiceUnavailable // something to boot, but it cannot be built
		}
		http.Error(w, "uki: "+err.Error(), code)
		return
	}
	h.sendUKI(w, r, b, log)
}

// ukiFor decides what machine m (nil: unknown) boots, as the iPXE script
// does (Decide), and what its UKI holds; an error for local and exit.
func (h *Handler) ukiFor(m *machine.Machine, mac string) (ukiBoot, error) {
	b := ukiBoot{action: Decide(m, h.cfg.Unknown)}
	switch b.action {
	case ActionExit:
		return b, fmt.Errorf("unknown machine %s, policy ignore", mac)
	case ActionLocal:
		return b, fmt.Errorf("machine %s is %s: boot from local disk", m.Name, m.State)
	case ActionDiscovery:
		var err error
		if b.kernel, err = h.artifactSHA("", h.cfg.Discovery.Kernel); err != nil {
			return b, fmt.Errorf("discovery kernel: %w", err)
		}
		if b.initrd, err = h.artifactSHA("", h.cfg.Discovery.Initrd); err != nil {
			return b, fmt.Errorf("discovery initrd: %w", err)
		}
		b.comment = "discovery agent for " + mac
		b.cmdline = joinArgs("ingot.server="+h.cfg.ServerURL, h.apiArgs(), "ingot.mode=discovery", "ingot.mac="+mac, h.cfg.Discovery.Cmdline)
		return b, nil
	}
	if m.Recipe == "" {
		return b, errors.New("no recipe assigned")
	}
	rc, err := h.cfg.Recipes(m.Recipe)
	if err != nil {
		return b, fmt.Errorf("recipe %s: %w", m.Recipe, err)
	}
	if b.kernel, err = h.artifactSHA(rc.OS.Agent.Kernel.SHA256, rc.OS.Agent.Kernel.Path); err != nil {
		return b, fmt.Errorf("recipe %s os.agent.kernel: %w", rc.Name, err)
	}
	if b.initrd, err = h.artifactSHA(rc.OS.Agent.Initrd.SHA256, rc.OS.Agent.Initrd.Path); err != nil {
		return b, fmt.Errorf("recipe %s os.agent.initrd: %w", rc.Name, err)
	}
	b.comment = fmt.Sprintf("agent for recipe %s %s", rc.Name, rc.Version)
	// No ingot.token: the agent asks for its boot credential by MAC.
	b.cmdline = joinArgs("ingot.server="+h.cfg.ServerURL, h.apiArgs(), "ingot.mac="+mac, "ingot.machine="+m.ID, rc.OS.Agent.Cmdline)
	return b, nil
}

// sendUKI assembles b's UKI and serves it (Range, HEAD; EDK2 asks HEAD
// first for the size and type).
func (h *Handler) sendUKI(w http.ResponseWriter, r *http.Request, b ukiBoot, log *slog.Logger) {
	kernel, err := h.cfg.Artifacts.Open(b.kernel)
	if err != nil {
		log.Error("agent uki: opening the kernel", "sha256", b.kernel, "err", err)
		http.Error(w, "uki: kernel unreadable", http.StatusServiceUnavailable)
		return
	}
	defer kernel.Close()
	// The stub must be of the kernel's architecture, which its PE header
	// names (an arm64 recipe's agent kernel is an arm64 Image): the
	// recipe decides, through its kernel, what the firmware gets.
	stubPath, pin, pkg := h.cfg.Stub, h.cfg.StubSHA256, "systemd-boot-efi"
	if arch, _ := uki.Arch(kernel); arch == uki.ArchARM64 {
		stubPath, pin, pkg = h.cfg.StubARM64, h.cfg.StubARM64SHA256, "systemd-boot-efi:arm64"
	}
	stub, err := uki.ReadStub(stubPath, pin)
	if errors.Is(err, uki.ErrStubChanged) {
		log.Error("agent uki: refusing a changed EFI stub", "stub", stubPath, "err", err)
		http.Error(w, "uki: the server's EFI stub changed since it was pinned", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		log.Error("agent uki: no EFI stub", "stub", stubPath, "err", err)
		http.Error(w, "uki: the server has no EFI stub for this kernel (apt-get install "+pkg+")", http.StatusServiceUnavailable)
		return
	}
	initrd, err := h.cfg.Artifacts.Open(b.initrd)
	if err != nil {
		log.Error("agent uki: opening the initrd", "sha256", b.initrd, "err", err)
		http.Error(w, "uki: initrd unreadable", http.StatusServiceUnavailable)
		return
	}
	defer initrd.Close()
	ks, kerr := kernel.Stat()
	is, ierr := initrd.Stat()
	if err := errors.Join(kerr, ierr); err != nil {
		http.Error(w, "uki: artifact unreadable", http.StatusServiceUnavailable)
		return
	}
	img, err := uki.Assemble(stub, uki.Parts{
		OSRelease: "NAME=\"ingot agent\"\nID=ingot-agent\nPRETTY_NAME=\"ingot " + oneLine(b.comment) + "\"\n",
		Cmdline:   b.cmdline,
		Kernel:    kernel, KernelSize: ks.Size(),
		Initrd: initrd, InitrdSize: is.Size(),
	}.Sections()...)
	if err != nil {
		log.Error("agent uki: assembling", "stub", stubPath, "err", err)
		http.Error(w, "uki: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// The bytes follow from the stub, the two artifacts and the command
	// line: their digest is a strong ETag (If-Range for a resumed download).
	sum := sha256.New()
	fmt.Fprintf(sum, "%x\n%s\n%s\n%s\n", sha256.Sum256(stub), b.kernel, b.initrd, b.cmdline)
	w.Header().Set("ETag", `"uki-`+hex.EncodeToString(sum.Sum(nil))[:32]+`"`)
	// EDK2 takes application/efi as an EFI application whatever the name.
	w.Header().Set("Content-Type", "application/efi")
	w.Header().Set("Cache-Control", "no-store") // what it boots follows the machine's state
	cw := &countingWriter{ResponseWriter: w, code: http.StatusOK}
	start := time.Now()
	serveFile(cw, r, img.Reader(), img.Size(), time.Time{})
	log.Info("agent uki", "action", b.action, "stub", stubPath, "code", cw.code, "size", img.Size(), "sent", cw.n,
		"duration", time.Since(start).Round(time.Millisecond), "cmdline", b.cmdline)
}

// artifactSHA resolves a recipe artifact to a stored one's sha256: a pinned
// sha256 must be in the store, a name is resolved there. A UKI is built
// from stored bytes, so a URL (which the iPXE script would use as is) must
// be imported first.
func (h *Handler) artifactSHA(sha, path string) (string, error) {
	switch {
	case sha != "":
		if !h.cfg.Artifacts.Has(sha) {
			return "", fmt.Errorf("sha256 %s is not in the artifact store (import it first)", sha)
		}
		return sha, nil
	case strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://"):
		return "", fmt.Errorf("%s is a URL: a UKI is built from the artifact store (import it and pin its sha256)", path)
	case path != "":
		return h.cfg.Artifacts.Resolve(path)
	default:
		return "", errors.New("neither sha256 nor path is set")
	}
}
