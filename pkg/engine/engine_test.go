package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// fakeBMC records what the engine asks of a machine's BMC. It stands at the
// edge: pkg/bmc against the virtual BMC is tested in pkg/bmc and end to end.
type fakeBMC struct {
	mu         sync.Mutex
	calls      []string
	dialErr    error
	failNode   string // dial fails for this machine name
	biosErr    error
	notStuck   []string
	bootTarget string
	mode       string            // set by SetBootMode
	inventory  machine.Inventory // Inventory's answer
	watt       int               // NodeWatts answers 5000 W plus 100 more each time
	state      *engine.BootState // BootState's answer when set
	uri        string            // the last boot override's URI
}

func (f *fakeBMC) dial(_ context.Context, m *machine.Machine) (engine.BMC, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dialErr != nil {
		return nil, f.dialErr
	}
	if f.failNode != "" && m.Name == f.failNode {
		return nil, errors.New("BMC unreachable")
	}
	return f, nil
}
func (f *fakeBMC) rec(s string)                     { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fakeBMC) PowerCycle(context.Context) error { f.rec("cycle"); return nil }
func (f *fakeBMC) SetBootOverride(_ context.Context, t, uri string, _ bool) error {
	f.rec("boot " + t)
	f.mu.Lock()
	f.uri = uri
	f.mu.Unlock()
	return nil
}
func (f *fakeBMC) ApplyBIOS(_ context.Context, a map[string]any) error {
	f.rec(fmt.Sprintf("bios %d", len(a)))
	return f.biosErr
}
func (f *fakeBMC) VerifyBIOS(context.Context, map[string]any) ([]string, error) {
	f.rec("verify")
	return f.notStuck, nil
}
func (f *fakeBMC) SetBootMode(_ context.Context, mode string) error {
	f.rec("mode " + mode)
	f.mu.Lock()
	f.mode = mode
	f.mu.Unlock()
	return nil
}
func (f *fakeBMC) BootState(context.Context) (engine.BootState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := engine.BootState{Power: "On", Target: "Hdd", Enabled: "Once", Mode: f.mode}
	if f.state != nil {
		st = *f.state
	}
	return st, nil
}
func (f *fakeBMC) Inventory(context.Context) (machine.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inventory, nil
}
func (f *fakeBMC) NodeWatts(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watt += 100
	return 5000 + f.watt, nil
}
func (f *fakeBMC) InsertMedia(_ context.Context, image string) error {
	f.rec("insert " + image)
	return nil
}
func (f *fakeBMC) EjectMedia(context.Context) error { f.rec("eject"); return nil }
func (f *fakeBMC) Close() error                     { return nil }
func (f *fakeBMC) Calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, ",")
}

func testRecipe() *recipe.Recipe {
	return &recipe.Recipe{
		Name: "lab-qemu", Version: "1",
		BIOS:       recipe.BIOS{BootMode: "uefi", Attributes: map[string]recipe.Value{"SriovGlobalEnable": recipe.StringValue("Enabled")}},
		OS:         recipe.OS{Image: recipe.ImageRef{Name: "lab", SHA256: strings.Repeat("a", 64), Format: "raw.zst"}},
		Drivers:    map[string]string{"nvidia": "535.309.01"},
		Acceptance: recipe.Acceptance{Checks: []recipe.Check{{Name: "memory-size"}}},
		Timeouts:   recipe.Timeouts{POST: recipe.Duration(time.Minute), Retries: 2},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

type harness struct {
	t         *testing.T
	reconcile engine.Reconcile
	recipe    *recipe.Recipe // nil: testRecipe()
	// media answers the engine's AgentMedia (media_test.go); nil: an error.
	media func(m *machine.Machine, jobID string) (string, error)
	// warm answers the engine's warm reimage requests (nil: the fleet has
	// no warm service: the engine is built without one).
	warm func(m *machine.Machine, jobID string) error
	s    store.Store
	e    *engine.Engine
	bmc  *fakeBMC
	now  time.Time
	mu   sync.Mutex
	stop context.CancelFunc
}

func newHarness(t *testing.T, drift engine.DriftCheck) *harness {
	h := &harness{t: t, bmc: &fakeBMC{}, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	h.s = storetest.OpenWith(t, store.Options{Timeout: time.Second, Now: h.clock})
	h.start(drift)
	return h
}

func (h *harness) clock() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

func (h *harness) start(drift engine.DriftCheck) {
	recipes := func(name string) (*recipe.Recipe, error) {
		if name != "lab-qemu" {
			return nil, errors.New("no such recipe")
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.recipe != nil {
			return h.recipe, nil
		}
		return testRecipe(), nil
	}
	fl, err := fleet.New(fleet.Config{Store: h.s, Recipes: recipes, Now: h.clock})
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Machines: fl, Jobs: h.s, Leases: h.s, DialBMC: h.bmc.dial, Logger: slog.New(slog.NewTextHandler(testWriter{h.t}, nil)), Now: h.clock, Tick: 5 * time.Millisecond, Drift: drift,
		Reconcile: h.reconcile, LoadSample: 5 * time.Millisecond, BootURL: "http://10.77.0.1:8080/", Media: harnessMedia{h},
		Warm: func(_ context.Context, m *machine.Machine, jobID string) error {
			h.mu.Lock()
			w := h.warm
			h.mu.Unlock()
			if w == nil {
				return errors.New("connection refused")
			}
			return w(m, jobID)
		},
		Recipes: recipes,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	h.e = e
	h.stop = func() { cancel(); <-done }
	h.t.Cleanup(h.stop)
}

func (h *harness) enroll(name string) *machine.Machine {
	m := &machine.Machine{Name: name, MACs: []string{"52:54:00:00:00:01"}, Recipe: "lab-qemu", State: machine.StateReady,
		BMC: machine.BMC{Endpoint: "http://127.0.0.1:1"}}
	if err := h.s.CreateMachine(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
	return m
}

// waitStep polls until the job reaches a step (or a final state).
func (h *harness) waitStep(id, step string) *store.Job {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		j, err := h.s.GetJob(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		if j.Step == step || (j.State != store.JobRunning && step == string(j.State)) {
			return j
		}
		time.Sleep(5 * time.Millisecond)
	}
	j, _ := h.s.GetJob(context.Background(), id)
	h.t.Fatalf("job %s never reached %s: at step %s state %s reason %q", id, step, j.Step, j.State, j.Reason)
	return nil
}

// state returns a machine's state once it has settled (the job's end and
// the machine's state are two writes).
func (h *harness) state(name string) machine.State {
	var m *machine.Machine
	for i := 0; i < 200; i++ {
		var err error
		if m, err = h.s.GetMachine(context.Background(), name); err != nil {
			h.t.Fatal(err)
		}
		if m.State == machine.StateFailed || m.State == machine.StateReady {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return m.State
}

func TestReimageHappyPath(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "disk died")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	if got := h.state("node1"); got != machine.StateProvisioning {
		t.Fatalf("state after BMC step = %s, want provisioning", got)
	}
	h.advance(40 * time.Second)
	task, err := h.e.OnTask(ctx, m.ID)
	if err != nil || task.Mode != "provision" || task.Recipe.Name != "lab-qemu" {
		t.Fatalf("task = %+v, %v", task, err)
	}
	if err := h.e.OnInventory(ctx, m.ID, machine.Inventory{Source: "agent"}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnProgress(ctx, m.ID, "image", 50, 100, 10); err != nil {
		t.Fatal(err)
	}
	h.advance(10 * time.Second)
	if err := h.e.OnChecks(ctx, m.ID, []engine.CheckResult{{Name: "memory-size", OK: true}}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnDone(ctx, m.ID, "handoff", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepFirstBoot)
	h.advance(20 * time.Second)
	if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{Kernel: "6.1.0", Drivers: map[string]string{"nvidia": "535.309.01"}}}); err != nil {
		t.Fatal(err)
	}
	j = h.waitStep(j.ID, string(store.JobSucceeded))
	if got := h.state("node1"); got != machine.StateReady {
		t.Fatalf("final state %s, want ready", got)
	}
	snaps, _ := h.s.Inventories(ctx, m.ID)
	if last := snaps[len(snaps)-1].Inventory; last.Source != "verified" || len(last.Measurements) != 1 ||
		last.Measurements[0].Check != "memory-size" || last.Software.Kernel != "6.1.0" {
		t.Errorf("last inventory snapshot %+v: want the verified one with the checks' numbers and the software", last)
	}
	if want := "bios 1,mode UEFI,boot Pxe,cycle,boot Hdd,cycle,verify"; h.bmc.Calls() != want {
		t.Errorf("BMC calls = %s, want %s", h.bmc.Calls(), want)
	}
	line := apiserver.WireJob(j).Reimage.RestoreLine()
	for _, want := range []string{"time to restore 1m10s", "post+boot 40s", "checks"} {
		if !strings.Contains(line, want) {
			t.Errorf("restore line %q lacks %q", line, want)
		}
	}
	evs, _ := h.s.Events(ctx, m.ID, 0, 0)
	var states []string
	for _, ev := range evs {
		if ev.Kind == "state" {
			states = append(states, string(ev.To))
		}
	}
	if got := strings.Join(states, ">"); got != "reimaging>provisioning>verifying>ready" {
		t.Errorf("state events %s", got)
	}
}

// Every failure path ends in failed with the right reason, never ready.
func TestReimageFailures(t *testing.T) {
	ctx := context.Background()
	critical := func(machine.Inventory, *recipe.Recipe) []engine.Finding {
		return []engine.Finding{{Severity: "critical", Part: "GPU 3", Message: "missing"}}
	}
	cases := []struct {
		name   string
		drift  engine.DriftCheck
		setup  func(*fakeBMC)
		run    func(h *harness, id string)
		reason string
	}{
		{name: "BIOS attribute refused", setup: func(f *fakeBMC) { f.biosErr = errors.New("attribute SriovGlobalEnable is read-only") },
			reason: "bmc: applying 1 BIOS attributes: attribute SriovGlobalEnable is read-only"},
		{name: "image hash mismatch", run: func(h *harness, id string) {
			h.e.OnTask(ctx, id)
			h.e.OnInventory(ctx, id, machine.Inventory{})
			h.e.OnDone(ctx, id, "image", false, "image sha256 mismatch: want aaaa found bbbb")
		}, reason: "image: image sha256 mismatch"},
		{name: "drift finding", drift: critical, run: func(h *harness, id string) {
			h.e.OnTask(ctx, id)
			h.e.OnInventory(ctx, id, machine.Inventory{})
		}, reason: "inventory: hardware does not match recipe lab-qemu: GPU 3: missing"},
		{name: "acceptance check fails", run: func(h *harness, id string) {
			h.e.OnTask(ctx, id)
			h.e.OnInventory(ctx, id, machine.Inventory{})
			h.e.OnChecks(ctx, id, []engine.CheckResult{{Name: "memory-size", OK: false, Detail: "want 2TiB found 1TiB"}})
		}, reason: "checks: acceptance checks failed: memory-size: want 2TiB found 1TiB"},
		{name: "done without checks", run: func(h *harness, id string) {
			h.e.OnTask(ctx, id)
			h.e.OnInventory(ctx, id, machine.Inventory{})
			h.e.OnDone(ctx, id, "handoff", true, "")
		}, reason: "checks: the agent reported done without"},
		{name: "driver pin differs", run: func(h *harness, id string) {
			h.e.OnTask(ctx, id)
			h.e.OnInventory(ctx, id, machine.Inventory{})
			h.e.OnChecks(ctx, id, []engine.CheckResult{{Name: "memory-size", OK: true}})
			h.e.OnDone(ctx, id, "handoff", true, "")
			time.Sleep(50 * time.Millisecond)
			h.e.OnFirstBoot(ctx, id, engine.FirstBoot{Software: machine.Software{Drivers: map[string]string{"nvidia": "550.1"}}})
		}, reason: "verify: driver versions differ from the recipe's pins: nvidia: want 535.309.01, found 550.1"},
		{name: "BIOS did not stick", setup: func(f *fakeBMC) { f.notStuck = []string{"SriovGlobalEnable"} }, run: func(h *harness, id string) {
			h.e.OnTask(ctx, id)
			h.e.OnInventory(ctx, id, machine.Inventory{})
			h.e.OnChecks(ctx, id, []engine.CheckResult{{Name: "memory-size", OK: true}})
			h.e.OnDone(ctx, id, "handoff", true, "")
			time.Sleep(50 * time.Millisecond)
			h.e.OnFirstBoot(ctx, id, engine.FirstBoot{Software: machine.Software{Drivers: map[string]string{"nvidia": "535.309.01"}}})
		}, reason: "verify: BIOS attributes did not stick: SriovGlobalEnable"},
		{name: "boot mode not applied", setup: func(f *fakeBMC) {
			f.state = &engine.BootState{Power: "On", Target: "Hdd", Enabled: "Once", Mode: "Legacy"}
		}, run: firstBootOK, reason: "verify: boot mode is Legacy, the recipe's bios.boot_mode is uefi"},
		{name: "boot mode not reported", setup: func(f *fakeBMC) {
			f.state = &engine.BootState{Power: "On", Target: "Hdd", Enabled: "Once"}
		}, run: firstBootOK, reason: "verify: the BMC does not report the boot mode"},
		{name: "machine off at first boot", setup: func(f *fakeBMC) {
			f.state = &engine.BootState{Power: "Off", Target: "Hdd", Enabled: "Once", Mode: "UEFI"}
		}, run: firstBootOK, reason: `verify: the BMC says the machine is "Off", not On`},
		{name: "left to boot from the virtual CD", setup: func(f *fakeBMC) {
			f.state = &engine.BootState{Power: "On", Target: "Cd", Enabled: "Once", Mode: "UEFI"}
		}, run: firstBootOK, reason: "verify: the next boot is set to Cd (Once), not the installed disk"},
		{name: "left to boot from the network", setup: func(f *fakeBMC) {
			f.state = &engine.BootState{Power: "On", Target: "Pxe", Enabled: "Continuous", Mode: "UEFI"}
		}, run: firstBootOK, reason: "verify: the next boot is set to Pxe (Continuous), not the installed disk"},
		{name: "step timeout", run: func(h *harness, id string) {
			// POST timeout 1m, 2 attempts: move the clock past each deadline
			// until the job gives up.
			for i := 0; i < 500; i++ {
				time.Sleep(20 * time.Millisecond)
				h.advance(2 * time.Minute)
				if js, _ := h.s.ListJobs(ctx, store.JobFailed); len(js) > 0 {
					return
				}
			}
		}, reason: "boot: step boot timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.drift)
			if tc.setup != nil {
				tc.setup(h.bmc)
			}
			m := h.enroll("node1")
			j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.run != nil {
				h.waitStep(j.ID, engine.StepBoot)
				tc.run(h, m.ID)
			}
			j = h.waitStep(j.ID, string(store.JobFailed))
			if !strings.HasPrefix(j.Reason, tc.reason) {
				t.Errorf("reason %q, want prefix %q", j.Reason, tc.reason)
			}
			if got := h.state("node1"); got != machine.StateFailed {
				t.Errorf("state %s, want failed", got)
			}
			// A failed job never turns ready later: a late first-boot report is refused.
			if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{}}); err == nil {
				t.Error("late first boot accepted after failure")
			}
		})
	}
}

// firstBootOK plays a machine whose agent and first boot report everything
// as the recipe wants: only the BMC's view can fail it.
func firstBootOK(h *harness, id string) {
	ctx := context.Background()
	h.e.OnTask(ctx, id)
	h.e.OnInventory(ctx, id, machine.Inventory{})
	h.e.OnChecks(ctx, id, []engine.CheckResult{{Name: "memory-size", OK: true}})
	h.e.OnDone(ctx, id, "handoff", true, "")
	time.Sleep(50 * time.Millisecond)
	h.e.OnFirstBoot(ctx, id, engine.FirstBoot{Software: machine.Software{Drivers: map[string]string{"nvidia": "535.309.01"}}})
}

// burnInHarness is a harness whose recipe has a burn-in check.
func burnInHarness(t *testing.T) *harness {
	h := &harness{t: t, bmc: &fakeBMC{}, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	h.recipe = testRecipe()
	h.recipe.Acceptance.Checks = append(h.recipe.Acceptance.Checks, recipe.Check{Name: "gpu-burn"})
	h.s = storetest.OpenWith(t, store.Options{Timeout: time.Second, Now: h.clock})
	h.start(nil)
	return h
}

// playAgent plays the in-RAM agent of a job that boots the machine, up to
// the installed OS's first boot.
func (h *harness) playAgent(machineID, jobID string) {
	ctx := context.Background()
	h.waitStep(jobID, engine.StepBoot)
	h.e.OnTask(ctx, machineID)
	h.e.OnInventory(ctx, machineID, machine.Inventory{Source: "agent"})
	h.e.OnChecks(ctx, machineID, []engine.CheckResult{{Name: "memory-size", OK: true}})
	h.e.OnDone(ctx, machineID, "handoff", true, "")
	h.waitStep(jobID, engine.StepFirstBoot)
}

// While the installed OS runs its burn-in, the BMC's power draw is read and
// the highest kept: the node's watts under load, in the job and in the
// verified inventory.
func TestLoadWattsDuringBurnIn(t *testing.T) {
	ctx := context.Background()
	h := burnInHarness(t)
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	h.playAgent(m.ID, j.ID)
	time.Sleep(100 * time.Millisecond) // a few 5 ms samples
	if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{Kernel: "6.1", Drivers: map[string]string{"nvidia": "535.309.01"}},
		BurnIn: []engine.CheckResult{{Name: "gpu-burn", OK: true, Value: 5e13}}}); err != nil {
		t.Fatal(err)
	}
	j = h.waitStep(j.ID, string(store.JobSucceeded))
	st, _ := engine.Status(j)
	if st.LoadSamples == 0 || st.LoadWatts <= 5000 {
		t.Errorf("load %d W over %d samples: want the highest of several BMC readings", st.LoadWatts, st.LoadSamples)
	}
	snaps, _ := h.s.Inventories(ctx, m.ID)
	last := snaps[len(snaps)-1].Inventory
	if last.Power.Watts != st.LoadWatts || len(last.Measurements) != 3 {
		t.Errorf("verified inventory power %d W, measurements %+v", last.Power.Watts, last.Measurements)
	}
}

// A recipe reloaded while a job runs does not change that job: it runs the
// recipe it started with (pinned in its spec, with the digest), and the
// next job gets the new one.
func TestJobKeepsItsRecipe(t *testing.T) {
	ctx := context.Background()
	h := &harness{t: t, bmc: &fakeBMC{}, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	h.recipe = testRecipe()
	h.s = storetest.OpenWith(t, store.Options{Timeout: time.Second, Now: h.clock})
	h.start(nil)
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	var sp engine.ReimageSpec
	if err := json.Unmarshal(j.Spec, &sp); err != nil || sp.RecipeDigest != testRecipe().Digest() || len(sp.Pinned) == 0 {
		t.Fatalf("spec %s: want the recipe pinned with its digest", j.Spec)
	}
	reloaded := testRecipe()
	reloaded.Drivers = map[string]string{"nvidia": "550.54.15"} // the reload pins another driver
	h.mu.Lock()
	h.recipe = reloaded
	h.mu.Unlock()
	h.playAgent(m.ID, j.ID)
	if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{Drivers: map[string]string{"nvidia": "535.309.01"}}}); err != nil {
		t.Fatal(err)
	}
	if j = h.waitStep(j.ID, string(store.JobSucceeded)); j.State != store.JobSucceeded {
		t.Fatalf("job %s: %s; want it to finish on the recipe it started with", j.State, j.Reason)
	}
	j2, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j2.Spec, &sp); err != nil || sp.RecipeDigest != reloaded.Digest() {
		t.Errorf("the next job pinned %s, want the reloaded recipe's %s", sp.RecipeDigest, reloaded.Digest())
	}
}

// A restart during the burn-in keeps the samples taken and samples on.
func TestLoadWattsResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	h := burnInHarness(t)
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	h.playAgent(m.ID, j.ID)
	time.Sleep(50 * time.Millisecond)
	h.stop()
	cur, _ := h.s.GetJob(ctx, j.ID)
	before, _ := engine.Status(cur)
	h.start(nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		cur, _ = h.s.GetJob(ctx, j.ID)
		st, _ := engine.Status(cur)
		if st.LoadSamples > before.LoadSamples+2 {
			if st.LoadWatts < before.LoadWatts {
				t.Errorf("highest reading fell from %d W to %d W across the restart", before.LoadWatts, st.LoadWatts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("samples %d before the restart, %d 5 s after: the sampler did not resume", before.LoadSamples, st.LoadSamples)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The BMC's inventory, read in the BMC step, is reconciled with the
// agent's: a GPU only one side shows fails the job.
func TestReconcileWithBMC(t *testing.T) {
	ctx := context.Background()
	h := &harness{t: t, bmc: &fakeBMC{}, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	var gotBMC int
	h.reconcile = func(inBand, bmc machine.Inventory) []engine.Finding {
		gotBMC = len(bmc.GPUs)
		if len(inBand.GPUs) != len(bmc.GPUs) {
			return []engine.Finding{{Severity: "critical", Part: "gpu", Message: fmt.Sprintf("%d GPUs in-band, %d from the BMC", len(inBand.GPUs), len(bmc.GPUs))}}
		}
		return nil
	}
	h.bmc.inventory = machine.Inventory{GPUs: []machine.GPU{{Serial: "a"}, {Serial: "b"}}}
	h.s = storetest.OpenWith(t, store.Options{Timeout: time.Second, Now: h.clock})
	h.start(nil)
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	h.e.OnTask(ctx, m.ID)
	if err := h.e.OnInventory(ctx, m.ID, machine.Inventory{Source: "agent", GPUs: []machine.GPU{{Serial: "a"}}}); err != nil {
		t.Fatal(err)
	}
	j = h.waitStep(j.ID, string(store.JobFailed))
	if gotBMC != 2 || !strings.Contains(j.Reason, "1 GPUs in-band, 2 from the BMC") {
		t.Errorf("reason %q (BMC GPUs seen by reconcile: %d)", j.Reason, gotBMC)
	}
}

func TestPreflightBlocks(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.bmc.dialErr = errors.New("connection refused")
	h.enroll("node1")
	_, err := h.e.Reimage(ctx, "node1", "t", "")
	if !errors.Is(err, engine.ErrPreflight) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want a preflight error naming the BMC failure", err)
	}
	h.bmc.dialErr = nil
	if _, err := h.e.Reimage(ctx, "node1", "t", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Reimage(ctx, "node1", "t", ""); err == nil || !strings.Contains(err.Error(), "already in job") {
		t.Fatalf("second reimage: %v, want 'already in job'", err)
	}
}

// A process that dies mid-job resumes from the persisted step.
func TestResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "t", "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	h.e.OnTask(ctx, m.ID)
	h.e.OnInventory(ctx, m.ID, machine.Inventory{})
	h.stop() // the engine goes away mid image write
	h.start(nil)
	h.e.OnProgress(ctx, m.ID, "image", 100, 100, 1)
	h.e.OnChecks(ctx, m.ID, []engine.CheckResult{{Name: "memory-size", OK: true}})
	if err := h.e.OnDone(ctx, m.ID, "handoff", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepFirstBoot)
	if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{Drivers: map[string]string{"nvidia": "535.309.01"}}}); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, string(store.JobSucceeded))
	evs, _ := h.s.Events(ctx, m.ID, 0, 0)
	var resumed bool
	for _, ev := range evs {
		resumed = resumed || ev.Kind == "job.resumed"
	}
	if !resumed {
		t.Error("no job.resumed event after restart")
	}
}

// simAgents plays the agent and the installed OS of every machine whose job
// waits on them, until ctx ends.
func (h *harness) simAgents(ctx context.Context) {
	for ctx.Err() == nil {
		jobs, _ := h.s.ListJobs(ctx, store.JobRunning)
		for _, j := range jobs {
			if j.Kind != "reimage" {
				continue
			}
			id := j.Machines[0]
			switch j.Step {
			case engine.StepBoot:
				h.e.OnTask(ctx, id)
				h.e.OnInventory(ctx, id, machine.Inventory{})
				h.e.OnChecks(ctx, id, []engine.CheckResult{{Name: "memory-size", OK: true}})
				h.e.OnDone(ctx, id, "handoff", true, "")
			case engine.StepFirstBoot:
				h.e.OnFirstBoot(ctx, id, engine.FirstBoot{Software: machine.Software{Drivers: map[string]string{"nvidia": "535.309.01"}}})
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// 20 machines in waves of 5 (after a canary of 1): one machine whose BMC is
// unreachable stops the rollout at max-failures 0, and not at 1.
func TestRolloutMaxFailures(t *testing.T) {
	for _, tc := range []struct {
		maxFailures int
		state       store.JobState
		reimaged    int
	}{{0, store.JobFailed, 5}, {1, store.JobSucceeded, 19}} {
		t.Run(fmt.Sprint("max-failures ", tc.maxFailures), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := newHarness(t, nil)
			h.bmc.failNode = "node04"
			for i := 0; i < 20; i++ {
				m := &machine.Machine{Name: fmt.Sprintf("node%02d", i), MACs: []string{fmt.Sprintf("52:54:00:00:01:%02x", i)},
					Recipe: "lab-qemu", State: machine.StateReady, Rack: fmt.Sprintf("r%d", i%2), BMC: machine.BMC{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", 1000+i)}}
				if err := h.s.CreateMachine(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			go h.simAgents(ctx)
			j, err := h.e.StartRollout(ctx, engine.RolloutSpec{Recipe: "lab-qemu", Batch: 5, MaxFailures: tc.maxFailures, PerRack: 3}, "test")
			if err != nil {
				t.Fatal(err)
			}
			j = h.waitStep(j.ID, string(tc.state))
			var st engine.RolloutStatus
			if err := json.Unmarshal(j.Status, &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Waves) != 5 || len(st.Waves[0]) != 1 {
				t.Errorf("waves %v: want a canary of 1 then 4 waves of 5", st.Waves)
			}
			ready, _ := h.s.ListMachines(ctx, store.MachineFilter{State: machine.StateReady})
			// Machines never touched stay ready too: count reimage jobs instead.
			all, _ := h.s.ListJobs(ctx, store.JobSucceeded)
			n := 0
			for _, x := range all {
				if x.Kind == "reimage" {
					n++
				}
			}
			if n != tc.reimaged {
				t.Errorf("%d machines reimaged, want %d (ready now: %d); rollout: %s", n, tc.reimaged, len(ready), j.Reason)
			}
			if tc.state == store.JobFailed && !strings.Contains(j.Reason, "stopped after wave 2 of 5: 1 failed") {
				t.Errorf("reason %q", j.Reason)
			}
		})
	}
}

// Waves gate on what was measured under load: a machine of the first wave
// whose inlet crossed its limit during its job stops the rollout before the
// next wave, and every finished wave's report is kept with the rollout.
func TestRolloutGatesOnMeasuredHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, nil)
	for i := 0; i < 6; i++ {
		m := &machine.Machine{Name: fmt.Sprintf("node%02d", i), MACs: []string{fmt.Sprintf("52:54:00:00:02:%02x", i)},
			Recipe: "lab-qemu", State: machine.StateReady, Rack: "r1", BMC: machine.BMC{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", 2000+i)}}
		if err := h.s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	checked := map[string]bool{}
	h.e.SetWaveCheck(func(_ context.Context, m *machine.Machine, r *recipe.Recipe, from, to time.Time) engine.WaveNode {
		mu.Lock()
		checked[m.Name] = true
		mu.Unlock()
		if to.Before(from) {
			t.Errorf("%s: job span %s..%s", m.Name, from, to)
		}
		n := engine.WaveNode{Watts: 410, InletC: 24, GPUMaxC: 60}
		if m.Name == "node01" {
			n.InletC, n.Problem = 39, "inlet 39.0 °C, above 35 °C"
		}
		return n
	})
	go h.simAgents(ctx)
	j, err := h.e.StartRollout(ctx, engine.RolloutSpec{Recipe: "lab-qemu", Canary: 2, Batch: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	j = h.waitStep(j.ID, string(store.JobFailed))
	if !strings.Contains(j.Reason, "stopped after wave 1 of 3: under load node01: inlet 39.0 °C, above 35 °C") {
		t.Errorf("reason %q", j.Reason)
	}
	var st engine.RolloutStatus
	json.Unmarshal(j.Status, &st)
	if len(st.Reports) != 1 || len(st.Reports[0].Nodes) != 2 || st.Reports[0].Nodes[1].InletC != 39 || st.Reports[0].Nodes[0].Watts != 410 {
		t.Errorf("wave reports: %+v", st.Reports)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(checked) != 2 {
		t.Errorf("checked %v, want only the first wave's two machines", checked)
	}
}

// Restore drills: only candidates are drilled unless one is named with
// force; a drill's time to restore is judged against timeouts.restore; a
// class is scale-ready after a passing drill, and a rollout of a class
// that is not says so before it starts.
func TestRestoreDrills(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, nil)
	for i, cand := range []bool{false, true} {
		m := &machine.Machine{Name: fmt.Sprintf("node%02d", i), MACs: []string{fmt.Sprintf("52:54:00:00:03:%02x", i)}, Recipe: "lab-qemu",
			State: machine.StateReady, DrillCandidate: cand, BMC: machine.BMC{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", 3000+i)}}
		if err := h.s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	go h.simAgents(ctx)
	if rd := h.e.ReadinessOf(ctx, "lab-qemu", time.Hour); rd.ScaleReady || !strings.Contains(rd.Why, "never drilled") {
		t.Errorf("before any drill: %+v", rd)
	}
	if _, err := h.e.StartDrill(ctx, "lab-qemu", "node00", false, "test"); !errors.Is(err, engine.ErrPreflight) || !strings.Contains(err.Error(), "not a drill candidate") {
		t.Errorf("drill of a non-candidate: %v", err)
	}
	j, err := h.e.StartDrill(ctx, "lab-qemu", "", false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if j.Machines[0] == "" {
		t.Fatal("no machine")
	}
	m, _ := h.s.GetMachine(ctx, j.Machines[0])
	if m.Name != "node01" {
		t.Errorf("the drill picked %s, not the candidate node01", m.Name)
	}
	h.waitStep(j.ID, string(store.JobSucceeded))
	rd := h.e.ReadinessOf(ctx, "lab-qemu", time.Hour)
	if !rd.ScaleReady || rd.Last == nil || rd.Last.Machine != "node01" {
		t.Errorf("after a passing drill: %+v %+v", rd, rd.Last)
	}
	// A target the drill cannot meet: the next drill (forced on a
	// non-candidate) fails the class.
	r := testRecipe()
	r.Timeouts.Restore = recipe.Duration(time.Nanosecond)
	h.mu.Lock()
	h.recipe = r
	h.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond) // the drill takes time on the engine's clock
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				h.advance(100 * time.Millisecond)
			}
		}
	}()
	j, err = h.e.StartDrill(ctx, "lab-qemu", "node00", true, "test")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, string(store.JobSucceeded))
	rd = h.e.ReadinessOf(ctx, "lab-qemu", time.Hour)
	if rd.ScaleReady || !strings.Contains(rd.Why, "over the target 1ns") || rd.LastPassed == nil {
		t.Errorf("after a slow drill: %+v", rd)
	}
	rj, err := h.e.StartRollout(ctx, engine.RolloutSpec{Recipe: "lab-qemu", Batch: 2}, "test")
	if err != nil {
		t.Fatal(err)
	}
	var st engine.RolloutStatus
	json.Unmarshal(rj.Status, &st)
	if !strings.Contains(st.Warning, "lab-qemu is not scale-ready") {
		t.Errorf("rollout warning %q", st.Warning)
	}
}

// Under os.handoff kexec the agent jumps into the installed kernel: the
// engine sets boot from disk (for a later reboot, or the agent's fallback)
// and does not power-cycle, which would throw away the POST kexec saved.
func TestKexecHandoffSkipsPowerCycle(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.recipe = testRecipe()
	h.recipe.OS.Handoff = "kexec"
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "drill")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	if task, err := h.e.OnTask(ctx, m.ID); err != nil || task.Mode != "provision" {
		t.Fatalf("task = %+v, %v", task, err)
	}
	if err := h.e.OnInventory(ctx, m.ID, machine.Inventory{Source: "agent"}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnChecks(ctx, m.ID, []engine.CheckResult{{Name: "memory-size", OK: true}}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnDone(ctx, m.ID, "handoff", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepFirstBoot)
	if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{Kernel: "6.1.0", Drivers: map[string]string{"nvidia": "535.309.01"}}}); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, string(store.JobSucceeded))
	if want := "bios 1,mode UEFI,boot Pxe,cycle,boot Hdd,verify"; h.bmc.Calls() != want {
		t.Errorf("BMC calls = %s, want %s (no power cycle after the kexec)", h.bmc.Calls(), want)
	}
}

// An operator's --handoff overrides the recipe's for one job: reboot on a
// kexec recipe power-cycles into the disk; an unknown hand-off is refused.
func TestReimageHandoffOverride(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.recipe = testRecipe()
	h.recipe.OS.Handoff = "kexec"
	m := h.enroll("node1")
	if _, err := h.e.ReimageWith(ctx, "node1", "operator:test", "", engine.ReimageOptions{Handoff: "pxe"}); err == nil || !strings.Contains(err.Error(), `handoff "pxe": expected reboot or kexec`) {
		t.Fatalf("unknown handoff: %v", err)
	}
	j, err := h.e.ReimageWith(ctx, "node1", "operator:test", "compare", engine.ReimageOptions{Handoff: "reboot"})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	task, err := h.e.OnTask(ctx, m.ID)
	if err != nil || task.Recipe.OS.Handoff != "reboot" {
		t.Fatalf("task's recipe handoff = %q (%v), want reboot", task.Recipe.OS.Handoff, err)
	}
	h.e.OnInventory(ctx, m.ID, machine.Inventory{Source: "agent"})
	h.e.OnChecks(ctx, m.ID, []engine.CheckResult{{Name: "memory-size", OK: true}})
	if err := h.e.OnDone(ctx, m.ID, "handoff", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepFirstBoot)
	if want := "bios 1,mode UEFI,boot Pxe,cycle,boot Hdd,cycle"; h.bmc.Calls() != want {
		t.Errorf("BMC calls = %s, want %s", h.bmc.Calls(), want)
	}
	if h.recipe.OS.Handoff != "kexec" {
		t.Errorf("the override changed the recipe itself: %q", h.recipe.OS.Handoff)
	}
}

// A warm reimage asks the installed OS to kexec into the agent: no boot
// override, no power cycle at the bmc step; a node that does not take the
// request falls back to the BMC path; a recipe that does not opt in is
// refused before the job starts.
func TestWarmReimage(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.recipe = testRecipe()
	h.enroll("node1")
	if _, err := h.e.ReimageWith(ctx, "node1", "operator:test", "", engine.ReimageOptions{Warm: true}); err == nil || !strings.Contains(err.Error(), "does not opt in (os.warm_reimage: true)") {
		t.Fatalf("warm on a recipe that does not opt in: %v", err)
	}
	h.mu.Lock()
	h.recipe.OS.WarmReimage = true
	var asked []string
	h.warm = func(m *machine.Machine, jobID string) error { asked = append(asked, m.Name+" "+jobID); return nil }
	h.mu.Unlock()
	j, err := h.e.ReimageWith(ctx, "node1", "operator:test", "warm", engine.ReimageOptions{Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	if h.bmc.Calls() != "" || len(asked) != 1 || asked[0] != "node1 "+j.ID {
		t.Errorf("BMC calls %q and warm requests %q; want none and one for %s", h.bmc.Calls(), asked, j.ID)
	}
	if st, _ := engine.Status(mustJob(t, h, j.ID)); st.Warm != "kexec" {
		t.Errorf("status warm %q, want kexec", st.Warm)
	}
	if got := h.state("node1"); got != machine.StateProvisioning {
		t.Errorf("state %s, want provisioning", got)
	}
	h.e.Cancel(ctx, j.ID, "operator:test", "next case")

	h.mu.Lock()
	h.warm = func(*machine.Machine, string) error {
		return errors.New("dial tcp 10.77.0.100:9443: connection refused")
	}
	h.mu.Unlock()
	h.s.ChangeMachine(ctx, "node1", store.Change{Edit: store.Edit(func(m *machine.Machine) error { m.State = machine.StateReady; return nil })})
	j, err = h.e.ReimageWith(ctx, "node1", "operator:test", "warm", engine.ReimageOptions{Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	if h.bmc.Calls() != "bios 1,mode UEFI,boot Pxe,cycle" {
		t.Errorf("fallback BMC calls %q, want the network boot", h.bmc.Calls())
	}
	if st, _ := engine.Status(mustJob(t, h, j.ID)); !strings.Contains(st.Warm, "fell back to the BMC: dial tcp") {
		t.Errorf("status warm %q, want the fallback and why", st.Warm)
	}
}

func mustJob(t *testing.T, h *harness, id string) *store.Job {
	t.Helper()
	j, err := h.s.GetJob(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// os.agent.boot http: the one-time override is UEFI HTTP boot naming the
// machine's agent UKI on the boot listener (no PXE, no iPXE).
func TestAgentBootHTTPOverride(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.recipe = testRecipe()
	h.recipe.OS.Agent.Boot = recipe.AgentBootHTTP
	h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	h.bmc.mu.Lock()
	uri := h.bmc.uri
	h.bmc.mu.Unlock()
	if want := "bios 1,mode UEFI,boot UefiHttp,cycle"; h.bmc.Calls() != want || uri != "http://10.77.0.1:8080/uki/52-54-00-00-00-01.efi" {
		t.Errorf("BMC calls %q with URI %q; want %q and the machine's UKI", h.bmc.Calls(), uri, want)
	}
}
