package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent/blockdev"
	"github.com/ingot-dev/ingot/pkg/agent/checks"
	"github.com/ingot-dev/ingot/pkg/agent/imagewrite"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/warm"
)

// API is the part of api.AgentClient the agent uses.
type API interface {
	Exchange(ctx context.Context) (api.Exchange, error)
	RequestCredential(ctx context.Context) error
	Task(ctx context.Context) (api.Task, error)
	Inventory(ctx context.Context, inv machine.Inventory) error
	Progress(ctx context.Context, p api.Progress) error
	Checks(ctx context.Context, rs []api.CheckResult) error
	Log(ctx context.Context, lines []string) error
	Done(ctx context.Context, d api.Done) error
}

// Agent runs one task. Every field but Now is required.
type Agent struct {
	Config     Config
	API        API
	Console    *Console
	Logger     *slog.Logger
	Inventory  func(ctx context.Context) machine.Inventory
	ListDisks  func() ([]blockdev.Disk, error)
	OpenTarget func(path string) (*imagewrite.Target, error)
	// InstallFile writes a file into the installed system on disk (the
	// first-boot settings, FirstBootEnv); nil: the agent cannot, and a task
	// that needs it fails at the image step.
	InstallFile func(disk, path string, data []byte, mode os.FileMode) error
	// Self is this agent's binary, copied into the installed system for
	// its burn-in; default /proc/self/exe.
	Self  string
	Image *http.Client // fetches the image
	Now   func() time.Time
}

// Outcome is what the agent did and how the machine should be left.
type Outcome struct {
	Task    api.Task
	Handoff api.Handoff
	Disk    string // the disk written, if any
}

// StepError is a failure the agent reported to the server (done, ok=false).
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Run fetches the task and carries it out: inventory, then (provision) the
// image, then acceptance checks, then done. On failure it posts done with
// ok=false and the reason and returns a *StepError.
func (a *Agent) Run(ctx context.Context) (Outcome, error) {
	if a.Now == nil {
		a.Now = time.Now
	}
	a.Console.Mark("starting machine=%s server=%s", a.Config.Machine, a.Config.Server)
	var task api.Task
	if a.Config.Discovery() && a.Config.Token == "" {
		// The discovery agent has no token and so no task: inventory only.
		task = api.Task{MachineID: a.Config.Machine, Mode: api.ModeDiscover}
	} else {
		// Booted without an iPXE script (UEFI HTTP boot, virtual media): ask
		// for the boot credential by MAC, under the script's rules.
		if a.Config.Token == "" {
			if err := a.API.RequestCredential(ctx); err != nil {
				return Outcome{}, a.fail(ctx, api.StepTask, fmt.Errorf("asking for the boot credential as %s: %w", a.Config.MAC, err))
			}
		}
		// The boot credential opens only the exchange: trade it for the
		// job's agent credential (bound to this machine's address).
		if _, err := a.API.Exchange(ctx); err != nil {
			return Outcome{}, a.fail(ctx, api.StepTask, fmt.Errorf("exchanging the boot credential: %w", err))
		}
		t, err := a.task(ctx)
		if err != nil {
			return Outcome{}, a.fail(ctx, api.StepTask, err)
		}
		task = t
	}
	out := Outcome{Task: task, Handoff: task.Handoff}
	a.Console.Mark("task mode=%s recipe=%s version=%s image=%s", task.Mode, task.Recipe, task.RecipeVersion, task.Image.URL)

	inv := a.Inventory(ctx)
	if err := a.API.Inventory(ctx, inv); err != nil {
		return out, a.fail(ctx, api.StepInventory, fmt.Errorf("posting inventory: %w", err))
	}
	a.Console.Mark("inventory posted cpus=%d gpus=%d dimms=%d nics=%d disks=%d problems=%d",
		len(inv.CPUs), len(inv.GPUs), len(inv.DIMMs), len(inv.NICs), len(inv.Disks), len(inv.Problems))

	done := api.Done{Step: api.StepInventory, OK: true}
	switch task.Mode {
	case api.ModeDiscover:
		out.Handoff = api.HandoffPoweroff
	case api.ModeInspect:
		if out.Handoff == "" {
			out.Handoff = api.HandoffPoweroff
		}
		if err := a.checks(ctx, task, inv); err != nil {
			return out, err
		}
		done.Step = api.StepChecks
	case api.ModeProvision:
		if out.Handoff == "" {
			out.Handoff = api.HandoffReboot
		}
		res, disk, err := a.image(ctx, task)
		if err != nil {
			return out, a.fail(ctx, api.StepImage, err, func(d *api.Done) { d.Disk = disk; d.ImageSHA256 = res.SHA256 })
		}
		out.Disk = disk
		done.Disk, done.ImageSHA256, done.ImageBytes = disk, res.SHA256, res.Written
		if err := a.installFirstBoot(task, disk, inv); err != nil {
			return out, a.fail(ctx, api.StepImage, err, func(d *api.Done) { d.Disk = disk; d.ImageSHA256 = res.SHA256 })
		}
		if err := a.checks(ctx, task, inv); err != nil {
			return out, err
		}
		done.Step = api.StepChecks
	}
	done.Handoff = out.Handoff
	a.postLog(ctx)
	if err := a.API.Done(ctx, done); err != nil && task.Mode == api.ModeDiscover {
		// Discovery's work (the inventory) is delivered; a server with no job
		// for this machine may refuse done (409): power off anyway.
		a.Console.Mark("done not acknowledged (%v); discovery finished anyway", err)
	} else if err != nil {
		// Without the server's acknowledgement the machine must not boot the
		// image as if it were ready: treat as a failure (reported if possible).
		return out, &StepError{Step: api.StepHandoff, Err: fmt.Errorf("posting done: %w", err)}
	}
	a.Console.Mark("done handoff=%s", out.Handoff)
	return out, nil
}

// task asks for the task until TaskWait passes; 503 and connection errors
// are retried (the client backs off), other answers fail at once.
func (a *Agent) task(ctx context.Context) (api.Task, error) {
	wait := a.Config.TaskWait
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	deadline := a.Now().Add(wait)
	for {
		t, err := a.API.Task(ctx)
		if err == nil {
			t.Image.URL, err = resolve(a.Config.Server, t.Image.URL)
			return t, err
		}
		var se *api.StatusError
		if errors.As(err, &se) && !se.Temporary() || ctx.Err() != nil || a.Now().After(deadline) {
			return api.Task{}, fmt.Errorf("getting the task: %w", err)
		}
		a.Logger.Warn("no task yet, asking again", "err", err)
		select {
		case <-ctx.Done():
			return api.Task{}, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// resolve makes a server-relative image path absolute.
func resolve(server, ref string) (string, error) {
	if ref == "" || strings.Contains(ref, "://") {
		return ref, nil
	}
	base, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", server, err)
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("image url %q: %w", ref, err)
	}
	return base.ResolveReference(r).String(), nil
}

func (a *Agent) chooseDisk(task api.Task) (string, error) {
	if a.Config.Disk != "" {
		return a.Config.Disk, nil
	}
	disks, err := a.ListDisks()
	if err != nil {
		return "", err
	}
	spec := task.Disk
	if spec.Path != "" {
		// by-id and by-path links do not exist without udev; /dev/X paths do.
		if p, err := filepath.EvalSymlinks(spec.Path); err == nil {
			spec.Path = p
		}
	}
	d, err := blockdev.Select(disks, spec)
	if err != nil {
		return "", err
	}
	a.Console.Mark("disk %s size=%d model=%q serial=%q", d.Path, d.Size, d.Model, d.Serial)
	return d.Path, nil
}

func (a *Agent) image(ctx context.Context, task api.Task) (imagewrite.Result, string, error) {
	disk, err := a.chooseDisk(task)
	if err != nil {
		return imagewrite.Result{}, "", err
	}
	t, err := a.OpenTarget(disk)
	if err != nil {
		return imagewrite.Result{}, disk, err
	}
	defer t.Close()
	a.Console.Mark("writing image %s (%s, sha256 %s) to %s zero-runs=%s", task.Image.URL, task.Image.Format, task.Image.SHA256, disk, t.Zero)
	prog := a.progressPoster(ctx)
	lastSay := time.Time{}
	res, err := imagewrite.Write(ctx, t, imagewrite.Options{
		URL: task.Image.URL, SHA256: task.Image.SHA256, Format: task.Image.Format, Size: task.Image.Size,
		Client: a.Image, Logger: a.Logger,
		Progress: func(p imagewrite.Progress) {
			prog(api.Progress{Step: api.StepImage, Bytes: p.Received, Total: p.Total, Written: p.Written, RateBps: p.RateBps})
			if now := a.Now(); now.Sub(lastSay) >= 5*time.Second {
				lastSay = now
				a.Console.Mark("image %d/%d bytes received, %d written, %.1f MB/s", p.Received, p.Total, p.Written, p.RateBps/1e6)
			}
		},
	})
	prog(api.Progress{}) // stop
	if err != nil {
		var ce *imagewrite.ChecksumError
		if errors.As(err, &ce) {
			a.Console.Mark("image sha256 MISMATCH expected=%s found=%s bytes=%d", ce.Expected, ce.Found, ce.Bytes)
		}
		return res, disk, err
	}
	rate := float64(res.Written) / max(res.Elapsed.Seconds(), 1e-9) / 1e6
	a.Console.Mark("image written sha256=%s bytes=%d received=%d disk=%s seconds=%.1f rate=%.1fMB/s zero=%d resumes=%d",
		res.SHA256, res.Written, res.Received, disk, res.Elapsed.Seconds(), rate, res.ZeroBytes, res.Resumes)
	return res, disk, nil
}

// installFirstBoot writes the first-boot report's settings, with the job's
// secret, into the installed system: without them its report is refused.
// With burn-in checks it also writes the burn-in plan and installs this
// agent binary there, for the first-boot service to run the burn-in with
// the node's real driver stack (`ingot-agent firstboot`).
func (a *Agent) installFirstBoot(task api.Task, disk string, inv machine.Inventory) error {
	if task.FirstBootSecret == "" {
		return nil
	}
	if a.InstallFile == nil {
		return errors.New("cannot write the first-boot secret into the installed system: this agent has no installer")
	}
	env := fmt.Sprintf("INGOT_SERVER=%s\nINGOT_MACHINE=%s\nINGOT_FIRSTBOOT=%s\n", a.Config.Server, task.MachineID, task.FirstBootSecret)
	if a.Config.API != "" {
		// The report goes to the TLS API, verified by the pinned certificate.
		env += fmt.Sprintf("INGOT_API=%s\nINGOT_CA=%s\n", a.Config.API, a.Config.CA)
	}
	files := []installFile{{api.FirstBootEnv, constant(env), 0o600}}
	if task.Hostname != "" {
		files = append(files, installFile{"/etc/hostname", constant(task.Hostname + "\n"), 0o644})
	}
	if task.CloudInit != "" {
		// A NoCloud seed: cloud-init's first boot of this instance runs it.
		sum := sha256.Sum256([]byte(task.FirstBootSecret))
		meta := fmt.Sprintf("instance-id: ingot-%s-%x\n", task.MachineID, sum[:4])
		if task.Hostname != "" {
			meta += "local-hostname: " + task.Hostname + "\n"
		}
		files = append(files,
			installFile{api.CloudInitSeed + "/user-data", constant(task.CloudInit), 0o600},
			installFile{api.CloudInitSeed + "/meta-data", constant(meta), 0o644})
	}
	plan, burnIn := burnInPlan(task, disk, inv)
	if burnIn {
		files = append(files,
			installFile{api.BurnInPlanPath, func() ([]byte, error) { return json.MarshalIndent(plan, "", "  ") }, 0o644})
	}
	if w := task.Warm; w != nil {
		// The warm reimage service (`ingot-agent warm`): this agent, and
		// what it needs to check the server's requests and find its script.
		cfg := warm.Config{Server: a.Config.Server, Machine: task.MachineID, MAC: w.MAC, Key: w.Key, Port: w.Port}
		files = append(files, installFile{warm.ConfigPath, func() ([]byte, error) { return json.MarshalIndent(cfg, "", "  ") }, 0o644})
	}
	if burnIn || a.Config.API != "" || task.Warm != nil {
		// The burn-in runs through this agent; over TLS it is also the
		// reporter that verifies the server (an image's own reporter may
		// lack that: busybox wget does not verify certificates).
		files = append(files, installFile{api.AgentInstallPath, func() ([]byte, error) { return os.ReadFile(a.selfPath()) }, 0o755})
	}
	for _, f := range files {
		b, err := f.data()
		if err != nil {
			return fmt.Errorf("preparing %s for the installed system: %w", f.path, err)
		}
		if err := a.InstallFile(disk, f.path, b, f.mode); err != nil {
			return fmt.Errorf("writing %s into the installed system on %s: %w", f.path, disk, err)
		}
		a.Console.Mark("installed %s on %s (%d bytes)", f.path, disk, len(b))
	}
	return nil
}

func constant(s string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(s), nil }
}

// installFile is one file the agent puts into the installed system.
type installFile struct {
	path string
	data func() ([]byte, error)
	mode os.FileMode
}

// burnInPlan is the recipe's burn-in for the installed OS: its burn-in
// checks, limits, the GPU count (the recipe's, or the inventory's where
// that is more) and the data disks (every disk but the one the image went
// to).
func burnInPlan(task api.Task, disk string, inv machine.Inventory) (burnin.Plan, bool) {
	p := burnin.Plan{}
	for _, c := range task.Checks {
		if spec, ok := recipe.LookupCheck(c.Name); ok && spec.Stage == recipe.StageBurnIn {
			p.Checks = append(p.Checks, c)
		}
	}
	if len(p.Checks) == 0 {
		return p, false
	}
	if task.BurnIn != nil {
		p.BurnIn = *task.BurnIn
	}
	for _, g := range task.Expected.GPUs {
		p.GPUs += g.Count
	}
	// Every GPU the node has must show in every per-GPU result: one the
	// recipe does not count is held to the burn-in too (of the recipe's
	// vendors: an Intel display controller is no CUDA device).
	p.GPUs = max(p.GPUs, vendorGPUs(inv.GPUs, task.Expected.GPUs))
	for _, d := range inv.Disks {
		if dev := "/dev/" + strings.TrimPrefix(d.Name, "/dev/"); dev != disk {
			p.DataDisks = append(p.DataDisks, dev)
		}
	}
	return p, true
}

// vendorGPUs counts the GPUs of the vendors the recipe names (every GPU
// where it names none).
func vendorGPUs(gpus []machine.GPU, want []recipe.GPUSpec) int {
	n := 0
	for _, g := range gpus {
		if len(want) == 0 || slices.ContainsFunc(want, func(w recipe.GPUSpec) bool { return w.Vendor == "" || strings.EqualFold(w.Vendor, g.Vendor) }) {
			n++
		}
	}
	return n
}

func (a *Agent) selfPath() string {
	if a.Self != "" {
		return a.Self
	}
	return "/proc/self/exe"
}

// progressPoster posts progress from its own goroutine, keeping only the
// latest report, so a slow server never slows the write. Calling it with a
// zero Progress stops it.
func (a *Agent) progressPoster(ctx context.Context) func(api.Progress) {
	latest := make(chan api.Progress, 1)
	go func() {
		for p := range latest {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := a.API.Progress(pctx, p); err != nil {
				a.Logger.Debug("progress not posted", "err", err)
			}
			cancel()
		}
	}()
	return func(p api.Progress) {
		if p == (api.Progress{}) {
			close(latest)
			return
		}
		select { // drop an unsent older report
		case <-latest:
		default:
		}
		latest <- p
	}
}

func (a *Agent) checks(ctx context.Context, task api.Task, inv machine.Inventory) error {
	rs := checks.Run(inv, task.Checks, task.Expected)
	for _, r := range rs {
		state := "ok"
		switch {
		case r.Skipped:
			state = "skipped"
		case !r.OK:
			state = "FAILED"
		}
		a.Console.Mark("check %s %s value=%g: %s", r.Name, state, r.Value, r.Detail)
	}
	// The server judges: it knows which checks the recipe requires and
	// which failures an operator waived for this machine. It refuses the
	// results (409, with its reasons) when they fail acceptance.
	if err := a.API.Checks(ctx, rs); err != nil {
		return a.fail(ctx, api.StepChecks, fmt.Errorf("acceptance checks not passed: %w", err))
	}
	if bad := checks.Blocking(task.Checks, rs); len(bad) > 0 {
		a.Console.Mark("checks %s failed; the server let them past (waived)", strings.Join(bad, ", "))
	}
	return nil
}

// fail reports a failed step to the server (log, then done with ok=false)
// and returns the *StepError.
func (a *Agent) fail(ctx context.Context, step string, err error, edit ...func(*api.Done)) error {
	a.Console.Mark("FAILED step=%s: %v", step, err)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	a.postLog(rctx)
	d := api.Done{Step: step, OK: false, Reason: err.Error()}
	for _, e := range edit {
		e(&d)
	}
	if perr := a.API.Done(rctx, d); perr != nil {
		a.Console.Mark("could not report the failure: %v", perr)
	}
	return &StepError{Step: step, Err: err}
}

func (a *Agent) postLog(ctx context.Context) {
	if lines := a.Console.Take(); len(lines) > 0 {
		if err := a.API.Log(ctx, lines); err != nil {
			a.Logger.Debug("log not posted", "err", err)
		}
	}
}
