package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/iso"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// VirtualMedia builds and serves the agent's boot CDs, for recipes whose
// agent boots from the BMC's virtual media (os.agent.boot: virtual-media):
// it is the engine's Media. Each job gets its own CD (pkg/iso: isolinux
// for BIOS, a UKI for UEFI) booting the recipe's agent kernel and initrd
// with the command line an iPXE script would give, served from the boot
// listener at /vmedia/TOKEN/ingot-agent.iso until the job ends.
//
// What is on the CD, and why the URL is what it is: an iPXE script carries
// the job's boot credential, issued when the machine fetches it and only
// to the address tied to its MAC. A CD is fetched by the BMC, from the
// management network, before the machine has an address, so no credential
// could be tied to anything at that point, and one baked in would work for
// whoever read the CD. So the CD carries none: it names the machine's MAC
// (ingot.mac=), and the agent asks for its boot credential itself (GET
// /api/v1/agent/credential?mac=), under the same rule as the script: only
// from the address tied to that MAC (pkg/agentauth). What remains on the
// CD is the server's URLs, the CA fingerprint the agent pins, the machine
// ID and MAC: nothing that opens anything. The URL's token (192 random
// bits) and its end with the job are defence in depth: an old CD left in a
// drive stops booting the agent, and nobody enumerates the fleet's CDs.
// The cost: one CD per machine per job on disk (kernel and initrd twice,
// ~2x their size) until the job ends.
type VirtualMedia struct {
	cfg MediaConfig
	log *slog.Logger

	mu     sync.Mutex
	urls   mediaURLs       // set by Run once the listeners are bound
	served map[string]bool // tokens whose CD was fetched at least once
}

// MediaConfig builds a VirtualMedia.
type MediaConfig struct {
	// Dir keeps the CDs and what each is for (serve: DATA/vmedia).
	Dir string
	// Artifacts holds the recipes' agent kernels and initrds.
	Artifacts *artifact.Store
	// Jobs tells whether a CD's job still runs.
	Jobs   JobLookup
	Logger *slog.Logger
}

// JobLookup reads a job (the store).
type JobLookup interface {
	GetJob(ctx context.Context, id string) (*store.Job, error)
}

// mediaURLs are what serve knows once bound: where the BMC fetches the CD
// and what the agent on it is told.
type mediaURLs struct {
	server, api, ca string
}

// cdMeta is the record kept beside each CD (TOKEN.json).
type cdMeta struct {
	Job     string    `json:"job"`
	Machine string    `json:"machine"`
	Key     string    `json:"key"` // digest of what the CD boots
	Created time.Time `json:"created"`
}

// cdFile is the name a CD has in its URL (the BMC shows it as ImageName).
const cdFile = "ingot-agent.iso"

var tokenRE = regexp.MustCompile(`^[0-9a-f]{48}$`)

// NewVirtualMedia checks cfg and makes the folder.
func NewVirtualMedia(cfg MediaConfig) (*VirtualMedia, error) {
	if cfg.Dir == "" || cfg.Artifacts == nil || cfg.Jobs == nil {
		return nil, errors.New("virtual media: Dir, Artifacts and Jobs are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("virtual media: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &VirtualMedia{cfg: cfg, log: log, served: map[string]bool{}}, nil
}

// bind tells the CDs where the server is: serverURL is the boot listener
// (the BMC fetches the CD there; the agent's ingot.server), apiURL and ca
// the TLS API and its fingerprint ("" when the API shares the boot
// listener).
func (v *VirtualMedia) bind(serverURL, apiURL, ca string) {
	v.mu.Lock()
	v.urls = mediaURLs{server: strings.TrimSuffix(serverURL, "/"), api: strings.TrimSuffix(apiURL, "/"), ca: ca}
	v.mu.Unlock()
}

// AgentMedia returns the URL of job's boot CD for machine m under recipe
// r, building it unless the job already has one of the same contents. CDs
// of jobs that ended are deleted first.
func (v *VirtualMedia) AgentMedia(ctx context.Context, m *machine.Machine, r *recipe.Recipe, jobID string) (string, error) {
	v.mu.Lock()
	urls := v.urls
	v.mu.Unlock()
	if urls.server == "" {
		return "", errors.New("virtual media: the boot listener is not up yet")
	}
	kernel, ksha, err := v.artifact(r.OS.Agent.Kernel)
	if err != nil {
		return "", fmt.Errorf("recipe %s os.agent.kernel: %w", r.Name, err)
	}
	initrd, isha, err := v.artifact(r.OS.Agent.Initrd)
	if err != nil {
		return "", fmt.Errorf("recipe %s os.agent.initrd: %w", r.Name, err)
	}
	mac := bootMAC(m)
	if mac == "" {
		return "", fmt.Errorf("machine %s has no MAC: the agent on a boot CD asks for its credential by MAC", m.Name)
	}
	args := []string{"ingot.server=" + urls.server}
	if urls.api != "" {
		args = append(args, "ingot.api="+urls.api, "ingot.ca="+urls.ca)
	}
	args = append(args, "ingot.mac="+mac, "ingot.machine="+m.ID)
	if c := strings.TrimSpace(r.OS.Agent.Cmdline); c != "" {
		args = append(args, c)
	}
	spec := iso.Spec{Kernel: kernel, Initrd: initrd, Cmdline: strings.Join(args, " "),
		Banner: fmt.Sprintf("ingot: booting the agent of job %s for %s from virtual media", jobID, m.Name)}
	sum := sha256.Sum256([]byte(ksha + "\x00" + isha + "\x00" + spec.Cmdline + "\x00" + spec.Banner))
	key := hex.EncodeToString(sum[:])
	if tok := v.existing(ctx, jobID, key); tok != "" {
		return v.url(urls, tok), nil
	}
	tok, err := newToken()
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := iso.Build(ctx, spec, filepath.Join(v.cfg.Dir, tok+".iso")); err != nil {
		return "", err
	}
	b, _ := json.Marshal(cdMeta{Job: jobID, Machine: m.ID, Key: key, Created: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(v.cfg.Dir, tok+".json"), b, 0o600); err != nil {
		os.Remove(filepath.Join(v.cfg.Dir, tok+".iso"))
		return "", fmt.Errorf("virtual media: %w", err)
	}
	v.log.Info("boot CD built", "machine", m.ID, "job", jobID, "took", time.Since(start).Round(time.Millisecond))
	return v.url(urls, tok), nil
}

func (v *VirtualMedia) url(u mediaURLs, tok string) string {
	return u.server + "/vmedia/" + tok + "/" + cdFile
}

// existing returns the token of job's CD with contents key, deleting its
// CDs of other contents and every CD whose job ended ("" none).
func (v *VirtualMedia) existing(ctx context.Context, jobID, key string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	metas, _ := filepath.Glob(filepath.Join(v.cfg.Dir, "*.json"))
	found := ""
	for _, p := range metas {
		tok := strings.TrimSuffix(filepath.Base(p), ".json")
		meta, err := v.meta(tok)
		switch {
		case err == nil && meta.Job == jobID && meta.Key == key && found == "":
			found = tok
		case err == nil && meta.Job != jobID && v.running(ctx, meta.Job):
		default:
			v.remove(tok)
		}
	}
	// A CD whose record was never written (a build cut short) goes after
	// an hour; one being built now is younger.
	cds, _ := filepath.Glob(filepath.Join(v.cfg.Dir, "*.iso"))
	for _, p := range cds {
		fi, err := os.Stat(p)
		if _, merr := os.Stat(strings.TrimSuffix(p, ".iso") + ".json"); err == nil && os.IsNotExist(merr) && time.Since(fi.ModTime()) > time.Hour {
			_ = os.Remove(p)
		}
	}
	return found
}

// artifact returns the file of a pinned agent artifact and its sha256.
func (v *VirtualMedia) artifact(a recipe.Artifact) (string, string, error) {
	if strings.HasPrefix(a.Path, "http://") || strings.HasPrefix(a.Path, "https://") {
		return "", "", fmt.Errorf("%s: a boot CD is built from ingot's artifact store, not a URL (import it and pin its sha256)", a.Path)
	}
	sha := a.SHA256
	if sha == "" {
		got, err := v.cfg.Artifacts.Resolve(a.Path)
		if err != nil {
			return "", "", err
		}
		sha = got
	}
	if !v.cfg.Artifacts.Has(sha) {
		return "", "", fmt.Errorf("sha256 %s is not in the artifact store (import it first)", sha)
	}
	return v.cfg.Artifacts.Path(sha), sha, nil
}

// bootMAC is the MAC the agent asks for its credential with: the first of
// the machine's, as the DHCP lease and neighbour entry bind it.
func bootMAC(m *machine.Machine) string {
	for _, mac := range m.MACs {
		if n, err := machine.NormalizeMAC(mac); err == nil {
			return n
		}
	}
	return ""
}

func (v *VirtualMedia) meta(tok string) (cdMeta, error) {
	var meta cdMeta
	b, err := os.ReadFile(filepath.Join(v.cfg.Dir, tok+".json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	return meta, err
}

func (v *VirtualMedia) running(ctx context.Context, jobID string) bool {
	j, err := v.cfg.Jobs.GetJob(ctx, jobID)
	return err == nil && j.State == store.JobRunning
}

// remove deletes a CD and its record. v.mu held.
func (v *VirtualMedia) remove(tok string) {
	_ = os.Remove(filepath.Join(v.cfg.Dir, tok+".iso"))
	_ = os.Remove(filepath.Join(v.cfg.Dir, tok+".json"))
	delete(v.served, tok)
}

func newToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("virtual media: reading random bytes: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
