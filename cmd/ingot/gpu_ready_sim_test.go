package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent/agentsim"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/burnin"
	"github.com/ingot-dev/ingot/pkg/catalog"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/serve"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// hgxRecipes copies the shipped base-gpu and gpu-train-h100x8 into a
// temporary recipes folder, fills a content store with the artifacts they
// name, pins both with `ingot recipe pin` (the agent pins live in base-gpu,
// which stays a template; the image pin in gpu-train-h100x8, made
// assignable by removing its template line), and adds
// gpu-train-h100x8-dcgm: the same class with dcgm-diag required too.
func hgxRecipes(t *testing.T, storeDir string) (dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "recipes")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"base-gpu", "gpu-train-h100x8", "gpu-infer-l40sx4-debian"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "recipes", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if name == "base-gpu" || name == "gpu-infer-l40sx4-debian" {
			b = unpinned(t, b)
		}
		if name == "gpu-train-h100x8" {
			out := regexp.MustCompile(`(?m)^template: true.*\n`).ReplaceAll(b, nil)
			if bytes.Equal(out, b) {
				t.Fatal("recipes/gpu-train-h100x8.yaml has no 'template: true' line to remove; update this test")
			}
			b = out
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arts, err := artifact.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"agent-vmlinuz", "agent-initrd", "debian-12-nvidia-cuda.raw.zst", "debian-12-nvidia.raw.zst"} {
		ref, err := arts.Put(context.Background(), strings.NewReader("test artifact "+name))
		if err != nil {
			t.Fatal(err)
		}
		if err := arts.SetName(name, ref.SHA256); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"base-gpu", "gpu-train-h100x8", "gpu-infer-l40sx4-debian"} {
		// The stand-in images of a site that configured and locked NVIDIA's
		// repositories: this project cannot reach them to lock the real
		// debian-12-nvidia-cuda, whose lint says so.
		out, errOut, err := runIngot(t, "recipe", "pin", "--store", storeDir, "--images", filepath.Join("..", "..", "testdata", "recipes", "images"),
			filepath.Join(dir, name+".yaml"))
		if err != nil {
			t.Fatalf("ingot recipe pin %s: %v\n%s%s", name, err, out, errOut)
		}
		if !strings.Contains(out, "pinned") {
			t.Fatalf("ingot recipe pin %s pinned nothing:\n%s", name, out)
		}
	}
	train, err := os.ReadFile(filepath.Join(dir, "gpu-train-h100x8.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dcgm := strings.Replace(string(train), "name: gpu-train-h100x8\n", "name: gpu-train-h100x8-dcgm\n", 1)
	dcgm = strings.Replace(dcgm, "    - name: gpu-burn\n", "    - name: dcgm-diag\n      args:\n        level: \"3\"\n    - name: gpu-burn\n", 1)
	if !strings.Contains(dcgm, "gpu-train-h100x8-dcgm") || !strings.Contains(dcgm, "dcgm-diag") {
		t.Fatal("could not derive gpu-train-h100x8-dcgm from the shipped recipe; update this test")
	}
	if err := os.WriteFile(filepath.Join(dir, "gpu-train-h100x8-dcgm.yaml"), []byte(dcgm), 0o644); err != nil {
		t.Fatal(err)
	}
	set, diags := recipe.LoadDir(dir)
	if len(diags) > 0 {
		t.Fatalf("pinned recipes do not lint clean:\n%v", diags)
	}
	base, _ := set.Get("base-gpu")
	r, _ := set.Get("gpu-train-h100x8")
	if !base.IsTemplate() || r.IsTemplate() || recipe.IsPlaceholderSHA256(r.OS.Image.SHA256) ||
		recipe.IsPlaceholderSHA256(r.OS.Agent.Kernel.SHA256) || !arts.Has(r.OS.Agent.Initrd.SHA256) {
		t.Fatalf("pinned recipes: base template %v, train template %v, image %s, kernel %s",
			base.IsTemplate(), r.IsTemplate(), r.OS.Image.SHA256, r.OS.Agent.Kernel.SHA256)
	}
	return dir
}

// hgxOS is how a node's installed OS behaves at first boot.
type hgxOS struct {
	software machine.Software  // kernel, OS release, drivers (hostname and cloud-init as the agent set them up)
	tools    map[string]string // program -> fixture file it prints
	missing  map[string]bool   // programs not installed (LookPath fails)
	noSecret bool              // the report lacks the first-boot secret
	oneRun   bool              // repeated tools run once, not for the burn-in's duration
}

// defaultHGXOS is the installed debian-12-nvidia-cuda of a healthy node: the
// drivers the merged recipe pins (base-gpu's nvidia and cuda-driver,
// gpu-train-h100x8's fabric manager and OFED) and burn-in tools that pass.
func defaultHGXOS() hgxOS {
	return hgxOS{
		software: machine.Software{Kernel: "6.1.0-28-amd64", OSRelease: "Debian GNU/Linux 12 (bookworm)",
			Drivers: map[string]string{"nvidia": "535.309.01", "cuda-driver": "12.2", "nvidia-fabricmanager": "535.309.01",
				"ofed": "23.10-2.1.3.1"}},
		tools: map[string]string{
			"gpu_burn":        "testdata/hgx-h100/gpuburn-pass.txt",
			"all_reduce_perf": "testdata/hgx-h100/nccl-pass.txt",
			"nvbandwidth":     "testdata/hgx-h100/nvbandwidth-pass.txt",
			"dcgmi":           "testdata/hgx-h100/dcgm-pass.json",
			"nvidia-smi":      "../../pkg/burnin/testdata/samples/pass.txt",
			"dmesg":           "../../pkg/burnin/testdata/xid/pass.txt",
		},
		missing: map[string]bool{},
	}
}

// hgxNode is one enrolled machine of the lab: its spec, its virtual BMC,
// and what its agent and installed OS did (for assertions and for the
// failure messages).
type hgxNode struct {
	spec hgxSpec
	os   hgxOS
	id   string
	name string
	bmc  *vbmc.BMC
	url  string // the BMC's

	mu    sync.Mutex
	calls []string // programs the burn-in ran
	log   []string
	codes map[string]int // first-boot attempts without the secret: how -> HTTP status
}

func (n *hgxNode) logf(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log = append(n.log, fmt.Sprintf(format, args...))
}

func (n *hgxNode) history() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return "  " + strings.Join(n.log, "\n  ")
}

// hgxLab is `ingot serve`'s engine and API (newProvisioning, first-use
// binding: every simulated machine calls from 127.0.0.1) over HTTP, with
// the pinned recipes and their content store, an operator token, and per
// machine a virtual BMC (real Redfish through pkg/bmc) and a simulated
// agent and installed OS speaking the real agent API.
type hgxLab struct {
	t       *testing.T
	st      store.Store
	prov    *serve.Parts
	recipes func(string) (*recipe.Recipe, error)
	url     string
	op      string // operator token
	cred    string // BMC credential file
	nodes   map[string]*hgxNode

	sim *agentsim.Sim
}

func newHGXLab(ctx context.Context, t *testing.T) *hgxLab {
	t.Helper()
	data := t.TempDir()
	dir := hgxRecipes(t, filepath.Join(data, "artifacts"))
	cat, err := catalog.New(catalog.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	credDir := t.TempDir()
	// Every simulated machine calls from 127.0.0.1: one address for all
	// of them, so no per-address limit (a rack has one address each).
	prov, url := inProcess(ctx, t, data, dir, credDir, func(c *serve.Config) { c.PublicRate = 0 })
	st, recipes := prov.Store, cat.Get
	op, _, err := fleet.CreateToken(ctx, st, "alice", fleet.ScopeOperator, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cred := filepath.Join(credDir, "bmc.cred")
	if err := os.WriteFile(cred, []byte("username=admin\npassword=pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &hgxLab{t: t, st: st, prov: prov, recipes: recipes, url: url, op: op, cred: cred, nodes: map[string]*hgxNode{}}
	l.sim = agentsim.New(agentsim.Config{URL: url, Jobs: prov.Engine, Machines: prov.Fleet, Boot: prov.API, Poll: 5 * time.Millisecond,
		Node: func(id string) (*agentsim.Node, bool) {
			n := l.nodes[id]
			if n == nil {
				return nil, false
			}
			return l.simNode(n), true
		}})
	return l
}

// enrol starts a virtual BMC serving the tree written in root (see
// writeHGXTree) and enrols the machine (rack r07, index i) with recipe rc.
func (l *hgxLab) enrol(ctx context.Context, i int, root string, spec hgxSpec, hos hgxOS, rc string) *hgxNode {
	t := l.t
	t.Helper()
	b, err := vbmc.New(vbmc.Config{Root: root, Username: "admin", Password: "pw", StuckBIOS: spec.stuckBIOS})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	m := &machine.Machine{Name: fmt.Sprintf("gpu%02d", i), MACs: []string{spec.bootMAC()}, Serial: spec.serial, SystemUUID: spec.uuid,
		Recipe: rc, State: machine.StateEnrolled, Rack: "r07", Index: i,
		BMC: machine.BMC{Endpoint: srv.URL, CredentialRef: "file:" + l.cred, Insecure: true}}
	if err := l.st.CreateMachine(ctx, m); err != nil {
		t.Fatal(err)
	}
	n := &hgxNode{spec: spec, os: hos, id: m.ID, name: m.Name, bmc: b, url: srv.URL, codes: map[string]int{}}
	l.nodes[m.ID] = n
	return n
}

// simNode is how the node's agent and installed OS behave in the
// simulation (pkg/agent/agentsim): the agent reports the in-band
// inventory and the checks pkg/agent/checks computes on it, writes the
// image in one report and hands off to the disk; the installed OS runs
// the burn-in (installedOS).
func (l *hgxLab) simNode(n *hgxNode) *agentsim.Node {
	return &agentsim.Node{
		MAC:       n.spec.bootMAC(),
		Inventory: func(api.Task) machine.Inventory { return n.spec.inband() },
		Image: func(task api.Task) []api.Progress {
			return []api.Progress{{Step: api.StepImage, Bytes: task.Image.Size, Total: task.Image.Size, Written: 8 << 30}}
		},
		Done: func(task api.Task) api.Done {
			return api.Done{Step: api.StepChecks, OK: true, Disk: "/dev/nvme0n1", ImageSHA256: task.Image.SHA256, Handoff: task.Handoff}
		},
		InstalledOS: func(ctx context.Context, b agentsim.Boot) { l.installedOS(ctx, n, b) },
		Logf:        n.logf,
	}
}

// installedOS is the first boot of the installed system: the burn-in the
// agent planned, run by the real burnin.Runner on the node's fake tools,
// then the report with the job's first-boot secret (or, for noSecret,
// without it and with the agent's credential, after which it lets the
// step time out: the deadline is moved to now, as a clock would).
func (l *hgxLab) installedOS(ctx context.Context, n *hgxNode, b agentsim.Boot) {
	task, agentTok, jobID := b.Task, b.AgentToken, b.Job
	r := burnin.Runner{LookPath: n.os.lookPath, Exec: n.exec, Every: time.Hour}
	plan := hgxBurnInPlan(task, "/dev/nvme0n1", n.spec.inband())
	if n.os.oneRun {
		// The fixtures answer at once: one run of each repeated tool
		// (matrixMulCUBLAS) stands for the burn-in's hour of them.
		plan.BurnIn.Duration = recipe.Duration(time.Nanosecond)
	}
	res := r.Run(ctx, plan)
	sw := n.os.software
	sw.Hostname, sw.CloudInit = task.Hostname, "done" // what the agent wrote, and cloud-init ran
	fb := api.FirstBoot{Software: sw, BurnIn: res}
	if !n.os.noSecret {
		_, err := b.Call(ctx, task.FirstBootSecret, "POST", api.PathFirstboot, fb, nil)
		n.logf("first boot: %d burn-in results, report: %v", len(res), err)
		return
	}
	for how, tok := range map[string]string{"no credential": "", "the agent credential": agentTok} {
		code, err := b.Call(ctx, tok, "POST", api.PathFirstboot, fb, nil)
		n.mu.Lock()
		n.codes[how] = code
		n.mu.Unlock()
		n.logf("first boot with %s: %v", how, err)
	}
	m, _ := l.st.GetMachine(ctx, n.id)
	j, _ := l.st.GetJob(ctx, jobID)
	n.logf("first boot refused: machine %s, job %s at %s", m.State, j.State, j.Step)
	_, err := l.st.UpdateJob(ctx, jobID, func(j *store.Job) error {
		if j.State == store.JobRunning && j.Step == engine.StepFirstBoot {
			j.Deadline = time.Now()
		}
		return nil
	})
	n.logf("first boot: deadline moved to now: %v", err)
}

// hgxBurnInPlan is the plan the agent writes into the installed system
// (pkg/agent burnInPlan): the recipe's burn-in checks and limits, the
// GPUs the recipe expects, every disk but the boot disk.
func hgxBurnInPlan(task api.Task, bootDisk string, inv machine.Inventory) burnin.Plan {
	var p burnin.Plan
	for _, c := range task.Checks {
		if spec, ok := recipe.LookupCheck(c.Name); ok && spec.Stage == recipe.StageBurnIn {
			p.Checks = append(p.Checks, c)
		}
	}
	if task.BurnIn != nil {
		p.BurnIn = *task.BurnIn
	}
	for _, g := range task.Expected.GPUs {
		p.GPUs += g.Count
	}
	for _, d := range inv.Disks {
		if d.Name != bootDisk {
			p.DataDisks = append(p.DataDisks, d.Name)
		}
	}
	return p
}

func (o hgxOS) lookPath(bin string) (string, error) {
	if o.missing[bin] {
		return "", fmt.Errorf("exec: %q: executable file not found in $PATH", bin)
	}
	return "/usr/bin/" + bin, nil
}

// exec answers the burn-in's programs with their fixture outputs; a
// fixture name with %d is per GPU, filled from the run's --device=N or
// -device=N (the CUDA samples run once per GPU).
func (n *hgxNode) exec(_ context.Context, name string, args ...string) ([]byte, error) {
	bin := filepath.Base(name)
	n.mu.Lock()
	n.calls = append(n.calls, strings.Join(append([]string{bin}, args...), " "))
	n.mu.Unlock()
	fx, ok := n.os.tools[bin]
	if !ok {
		return nil, fmt.Errorf("%s: not simulated", bin)
	}
	if strings.Contains(fx, "%d") {
		dev := -1
		for _, a := range args {
			if m := deviceArg.FindStringSubmatch(a); m != nil {
				dev, _ = strconv.Atoi(m[1])
			}
		}
		if dev < 0 {
			return nil, fmt.Errorf("%s %v: no device argument for the per-GPU fixture %s", bin, args, fx)
		}
		fx = fmt.Sprintf(fx, dev)
	}
	return os.ReadFile(fx)
}

var deviceArg = regexp.MustCompile(`^--?device=(\d+)$`)
