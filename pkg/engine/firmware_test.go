package engine_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// The firmware jobs are driven against virtual BMCs (pkg/vbmc, fed the
// DMTF rack-mount mockup) through the real engine over a fleet and a
// store, as serve builds it: the BMC is reached through a shared session
// pool (*bmc.Client), packages come from a content store at per-job URLs.

const (
	fwUser, fwPass = "ingot", "s3cret-pass"
	bmcFW          = "/redfish/v1/UpdateService/FirmwareInventory/BMC"
	biosFW         = "/redfish/v1/UpdateService/FirmwareInventory/BIOS"
	bmcBefore      = "1.45.455b66-rev4" // the mockup's BMC firmware
)

type fwHarness struct {
	t       testing.TB
	s       store.Store
	arts    *artifact.Store
	imgURL  string
	fetches atomic.Int64
	recipe  *recipe.Recipe
	timeout time.Duration
	fake    *fakeBMC
	e       *engine.Engine
	stop    func()
	macs    int
	poll    time.Duration
	waitMax time.Duration // wait's limit (default a minute)
	// bmcConfig is how the engine's pool dials a BMC.
	bmcConfig func(endpoint string) bmc.Config
}

// tbWriter logs through a test or benchmark.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newFWHarness stores pkgs in a content store served at per-job URLs and
// starts an engine; fw makes the recipe "gpu"'s pins from their sha256s.
func newFWHarness(t testing.TB, fw func(shas []string) recipe.Firmware, pkgs ...[]byte) *fwHarness {
	t.Helper()
	h := &fwHarness{t: t, timeout: 20 * time.Second, poll: 20 * time.Millisecond, fake: &fakeBMC{},
		bmcConfig: func(endpoint string) bmc.Config {
			return bmc.Config{Endpoint: endpoint, Username: fwUser, Password: fwPass, ConnectTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
				RetryWait: 20 * time.Millisecond, Retries: 2, PollInterval: 10 * time.Millisecond, PowerOffTimeout: 2 * time.Second}
		}}
	h.s = storetest.OpenWith(t, store.Options{Timeout: time.Second})
	var err error
	if h.arts, err = artifact.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	var shas []string
	for _, p := range pkgs {
		ref, err := h.arts.Put(context.Background(), bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		shas = append(shas, ref.SHA256)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /JOB/SHA: the job's URL of a package.
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		f, err := h.arts.Open(parts[len(parts)-1])
		if err != nil || len(parts) != 2 {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		h.fetches.Add(1)
		http.ServeContent(w, r, "fw.bin", time.Time{}, f)
	}))
	t.Cleanup(srv.Close)
	h.imgURL = srv.URL
	r := testRecipe()
	r.Name, r.Firmware = "gpu", fw(shas)
	h.recipe = r
	return h
}

func (h *fwHarness) recipes(name string) (*recipe.Recipe, error) {
	if name != h.recipe.Name {
		return nil, errors.New("no such recipe")
	}
	return h.recipe, nil
}

// start builds and runs an engine over the harness's store: what a start
// of ingot serve does. Each start has its own BMC session pool.
func (h *fwHarness) start(cfg func(*engine.Config)) {
	fl, err := fleet.New(fleet.Config{Store: h.s, Recipes: h.recipes})
	if err != nil {
		h.t.Fatal(err)
	}
	pool := bmc.NewPool(nil)
	c := engine.Config{Machines: fl, Jobs: h.s, DialBMC: h.fake.dial, Recipes: h.recipes, Tick: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tbWriter{h.t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Firmware: engine.FirmwareConfig{
			Dial: func(ctx context.Context, m *machine.Machine) (engine.FirmwareBMC, error) {
				return pool.Get(ctx, h.bmcConfig(m.BMC.Endpoint))
			},
			Images: func(job string) firmware.Images {
				return firmware.StoreImages{Store: h.arts, URLFor: func(_ context.Context, sha string) (string, error) {
					return h.imgURL + "/" + job + "/" + sha, nil
				}}
			},
			Timeout: h.timeout, Poll: h.poll, Retry: 10 * time.Millisecond,
		}}
	if cfg != nil {
		cfg(&c)
	}
	e, err := engine.New(c)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	var once sync.Once
	h.e, h.stop = e, func() {
		once.Do(func() {
			cancel()
			<-done
			pool.Close()
		})
	}
	h.t.Cleanup(h.stop)
}

// startBMC serves the DMTF mockup from a virtual BMC with an update script.
func startBMC(t *testing.T, u vbmc.Update) (*vbmc.BMC, string) {
	t.Helper()
	b, err := vbmc.New(vbmc.Config{Root: filepath.Join("..", "..", "testdata", "redfish-mockups", "dmtf-public-rackmount1"),
		Username: fwUser, Password: fwPass, Update: u})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv.URL
}

// enroll stores a machine of recipe gpu behind the BMC at url.
func (h *fwHarness) enroll(name, rack, url string) *machine.Machine {
	h.t.Helper()
	h.macs++
	m := &machine.Machine{Name: name, MACs: []string{fmt.Sprintf("52:54:00:00:%02x:%02x", h.macs/256, h.macs%256)}, Recipe: "gpu",
		State: machine.StateReady, Rack: rack, BMC: machine.BMC{Endpoint: url}}
	if err := h.s.CreateMachine(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
	return m
}

// wait waits for a job to end and decodes its campaign.
func (h *fwHarness) wait(id string) (*store.Job, engine.FirmwareStatus) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(h.waitMax, time.Minute))
	defer cancel()
	j, err := h.e.Wait(ctx, id)
	if err != nil {
		h.t.Fatalf("job %s: %v", id, err)
	}
	_, st, err := engine.Firmware(j)
	if err != nil {
		h.t.Fatal(err)
	}
	return j, st
}

// bmcOnly pins the BMC's firmware to 1.46.0 (policy update).
func bmcOnly(shas []string) recipe.Firmware {
	return recipe.Firmware{BMC: recipe.Pin{Version: "1.46.0", Package: shas[0], Policy: recipe.FirmwareUpdate}}
}

// bmcBeforeImage is bmcOnly applied before the image of every reimage.
func bmcBeforeImage(shas []string) recipe.Firmware {
	fw := bmcOnly(shas)
	fw.Apply = recipe.ApplyBeforeImage
	return fw
}

func bmcAndBIOS(shas []string) recipe.Firmware {
	return recipe.Firmware{
		BMC:  recipe.Pin{Version: "1.46.0", Package: shas[0], Policy: recipe.FirmwareUpdate},
		BIOS: recipe.Pin{Version: "P79 v1.46", Package: shas[1], Policy: recipe.FirmwareUpdate},
	}
}

var (
	bmcImage  = vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, "")
	biosImage = vbmc.FirmwareImage(map[string]string{"BIOS": "P79 v1.46"}, "")
)

// overlaps is the most nodes (grouped by key) between their start and
// end at one moment.
func overlaps(nodes []engine.FirmwareNode, key func(engine.FirmwareNode) string) map[string]int {
	type edge struct {
		at time.Time
		d  int
	}
	edges := map[string][]edge{}
	for _, n := range nodes {
		if !n.Started.IsZero() {
			edges[key(n)] = append(edges[key(n)], edge{n.Started, 1}, edge{n.Ended, -1})
		}
	}
	most := map[string]int{}
	for k, es := range edges {
		slices.SortFunc(es, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.d - b.d // an end before a start at the same instant
		})
		n := 0
		for _, e := range es {
			n += e.d
			most[k] = max(most[k], n)
		}
	}
	return most
}

// TestFirmwareCampaign: 20 machines in 2 racks behind virtual BMCs, BMC
// and BIOS below their pins. The campaign holds its limits (never two
// updates at one BMC: each BMC refuses a second with 503 and never has to;
// at most 3 a rack and 4 in all), brings every node to its pins flashing
// each package once, records every step as an event on the machine,
// stores the firmware read back as the machine's BMC inventory, and counts
// its nodes.
func TestFirmwareCampaign(t *testing.T) {
	h := newFWHarness(t, bmcAndBIOS, bmcImage, biosImage)
	h.start(nil)
	var bmcs []*vbmc.BMC
	var urls []string
	for range 20 {
		// MaxUpdates 1: the BMC itself refuses (503) a second update while
		// one runs; Refused stays 0 only if ingot never tries.
		b, url := startBMC(t, vbmc.Update{TaskTime: 60 * time.Millisecond, MaxUpdates: 1})
		bmcs, urls = append(bmcs, b), append(urls, url)
	}
	for i := range 20 {
		h.enroll(fmt.Sprintf("n%02d", i), fmt.Sprintf("rack-%d", i%2), urls[i])
	}
	ctx := context.Background()
	j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}, PerRack: 3, Total: 4, Pause: 2 * time.Millisecond}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	j, st := h.wait(j.ID)
	if c := st.Counts(); j.State != store.JobSucceeded || c.Done != 20 || c.Total != 20 {
		t.Fatalf("campaign %s (%s): counts %+v, want 20 of 20 done", j.State, j.Reason, c)
	}
	for i, b := range bmcs {
		us := b.UpdateStats()
		if us.Starts != 2 || us.Refused != 0 || us.Flashes[bmcFW] != 1 || us.Flashes[biosFW] != 1 ||
			b.FirmwareVersion(bmcFW) != "1.46.0" || b.FirmwareVersion(biosFW) != "P79 v1.46" {
			t.Errorf("BMC %d: %+v at %s / %s; want 2 starts (one per package), none refused, at the pins", i, us,
				b.FirmwareVersion(bmcFW), b.FirmwareVersion(biosFW))
		}
	}
	perBMC := overlaps(st.Nodes, func(n engine.FirmwareNode) string { return n.BMC })
	perRack := overlaps(st.Nodes, func(n engine.FirmwareNode) string { return n.Rack })
	total := overlaps(st.Nodes, func(engine.FirmwareNode) string { return "" })
	for k, n := range perBMC {
		if n > 1 {
			t.Errorf("BMC %s: %d updates at once", k, n)
		}
	}
	if perRack["rack-0"] > 3 || perRack["rack-1"] > 3 || total[""] > 4 || total[""] < 2 {
		t.Errorf("in flight at most %v per rack, %d in all; want <= 3, 2..4", perRack, total[""])
	}
	evs, _ := h.s.Events(ctx, st.Nodes[0].Machine, 0, 0)
	var kinds []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "firmware.") {
			kinds = append(kinds, ev.Kind)
		}
	}
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, "firmware.queued firmware.plan firmware.step") ||
		!strings.HasSuffix(got, "firmware.verified firmware.done") || strings.Count(got, "firmware.step") < 10 {
		t.Errorf("n00's firmware events: %s", got)
	}
	snaps, _ := h.s.Inventories(ctx, st.Nodes[0].Machine)
	if inv := snaps[len(snaps)-1].Inventory; inv.Source != "redfish" || inv.System.BMCVersion != "1.46.0" || inv.System.BIOSVersion != "P79 v1.46" {
		t.Errorf("the stored BMC inventory after the campaign: %+v", inv.System)
	}
	if n := h.fetches.Load(); n != 40 {
		t.Errorf("%d package fetches by the BMCs, want 40 (two per BMC)", n)
	}
}

// TestFirmwareCampaignFaults: each scripted fault of a BMC. A task that
// fails and a version that never changes end the node failed with what the
// BMC said or read; a BMC that restarts mid-update and one too busy for a
// second update (503) are waited for and end done; the campaign fails.
func TestFirmwareCampaignFaults(t *testing.T) {
	h := newFWHarness(t, bmcOnly, bmcImage)
	h.timeout = 4 * time.Second
	h.start(nil)
	cases := []struct {
		name    string
		update  vbmc.Update
		state   string
		message string
	}{
		{"fails", vbmc.Update{TaskTime: 50 * time.Millisecond, FailMessage: "Flash write error at 0x4000"}, engine.NodeFailed, "Flash write error at 0x4000"},
		{"unchanged", vbmc.Update{TaskTime: 50 * time.Millisecond, Unchanged: true}, engine.NodeFailed, `reads "` + bmcBefore + `"`},
		{"restarts", vbmc.Update{TaskTime: 400 * time.Millisecond, RestartAfter: 50 * time.Millisecond, RestartFor: 300 * time.Millisecond, ForgetTasks: true}, engine.NodeDone, ""},
		{"busy", vbmc.Update{TaskTime: 800 * time.Millisecond, MaxUpdates: 1}, engine.NodeDone, ""},
	}
	bmcs := map[string]*vbmc.BMC{}
	for _, c := range cases {
		b, url := startBMC(t, c.update)
		bmcs[c.name] = b
		h.enroll(c.name, "rack-0", url)
		if c.update.MaxUpdates > 0 {
			// Another tool's update runs: ingot's start is refused with 503.
			foreign := bmc.UpdateRequest{ImageURI: h.imgURL + "/other/" + mustPut(t, h.arts, biosImage)}
			cl, err := bmc.Dial(context.Background(), bmc.Config{Endpoint: url, Username: fwUser, Password: fwPass})
			if err != nil {
				t.Fatal(err)
			}
			us, _ := cl.UpdateService(context.Background())
			if _, err := cl.StartUpdate(context.Background(), us, foreign); err != nil {
				t.Fatal(err)
			}
			cl.Close()
		}
	}
	j, err := h.e.StartFirmware(context.Background(), engine.FirmwareSpec{Targets: []string{"gpu"}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	j, st := h.wait(j.ID)
	if j.State != store.JobFailed || !strings.Contains(j.Reason, "2 of 4 nodes at their pins, 2 failed") {
		t.Errorf("campaign %s: %s; want failed, 2 of 4 done", j.State, j.Reason)
	}
	byName := map[string]engine.FirmwareNode{}
	for _, n := range st.Nodes {
		byName[n.Name] = n
	}
	for _, c := range cases {
		n := byName[c.name]
		if n.State != c.state || !strings.Contains(n.Message, c.message) {
			t.Errorf("%s: node %s: %s; want %s with %q", c.name, n.State, n.Message, c.state, c.message)
		}
	}
	if w := byName["restarts"].Steps[0].Waits; w == 0 {
		t.Errorf("restarting BMC: the step never waited for it: %+v", byName["restarts"].Steps[0])
	}
	if us := bmcs["busy"].UpdateStats(); us.Refused == 0 || bmcs["busy"].FirmwareVersion(bmcFW) != "1.46.0" {
		t.Errorf("busy BMC: %+v at %s; want refusals, then the pin", us, bmcs["busy"].FirmwareVersion(bmcFW))
	}
	for name, b := range bmcs {
		if s := b.UpdateStats(); (name == "busy" && s.Starts != 2) || (name != "busy" && s.Starts != 1) {
			t.Errorf("%s: %d starts; want one by ingot", name, s.Starts)
		}
	}
}

func mustPut(t *testing.T, s *artifact.Store, b []byte) string {
	t.Helper()
	ref, err := s.Put(context.Background(), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return ref.SHA256
}

// TestFirmwareCampaignResumesAfterRestart: ingot stops while updates run
// (a step persisted running: the BMC works on its task) and starts again
// over the same store: the campaign resumes each node from its persisted
// step and ends with every node at its pins, each package started once.
func TestFirmwareCampaignResumesAfterRestart(t *testing.T) {
	h := newFWHarness(t, bmcAndBIOS, bmcImage, biosImage)
	h.start(nil)
	var bmcs []*vbmc.BMC
	for i := range 6 {
		b, url := startBMC(t, vbmc.Update{TaskTime: 500 * time.Millisecond})
		bmcs = append(bmcs, b)
		h.enroll(fmt.Sprintf("n%d", i), fmt.Sprintf("rack-%d", i%2), url)
	}
	ctx := context.Background()
	j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	running := func() int {
		cur, _ := h.s.GetJob(ctx, j.ID)
		_, st, _ := engine.Firmware(cur)
		n := 0
		for _, node := range st.Nodes {
			for _, s := range node.Steps {
				if s.Phase == firmware.PhaseRunning {
					n++
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for running() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	h.stop()
	time.Sleep(100 * time.Millisecond) // the stopped engine's node work returns
	if n := running(); n < 3 {
		t.Fatalf("%d steps persisted running when ingot stopped; want at least 3", n)
	}
	h.start(nil) // a new ingot over the same store
	j, st := h.wait(j.ID)
	if c := st.Counts(); j.State != store.JobSucceeded || c.Done != 6 {
		t.Fatalf("resumed campaign %s (%s): %+v", j.State, j.Reason, c)
	}
	for i, b := range bmcs {
		if us := b.UpdateStats(); us.Starts != 2 || us.Flashes[bmcFW] != 1 || us.Flashes[biosFW] != 1 {
			t.Errorf("BMC %d after the restart: %+v; want each package started and flashed once", i, us)
		}
	}
	evs, _ := h.s.Events(ctx, st.Nodes[0].Machine, 0, 0)
	resumed := false
	for _, ev := range evs {
		resumed = resumed || ev.Kind == "job.resumed"
	}
	if !resumed {
		t.Error("no job.resumed event on the first machine")
	}
}

// TestFirmwareCampaignRollback: a package that brings another version
// than its pin flashes, the version read back is wrong, and --rollback
// restores the version the BMC ran before.
func TestFirmwareCampaignRollback(t *testing.T) {
	h := newFWHarness(t, func(shas []string) recipe.Firmware {
		return recipe.Firmware{BMC: recipe.Pin{Version: "1.47.0", Package: shas[0], Policy: recipe.FirmwareUpdate, ApplyTime: recipe.ApplyImmediate}}
	}, bmcImage)
	h.timeout = time.Second
	h.start(nil)
	b, url := startBMC(t, vbmc.Update{TaskTime: 50 * time.Millisecond, ApplyTime: "Immediate"})
	h.enroll("n0", "rack-0", url)
	j, err := h.e.StartFirmware(context.Background(), engine.FirmwareSpec{Targets: []string{"n0"}, Rollback: true}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	j, st := h.wait(j.ID)
	n := st.Nodes[0]
	if j.State != store.JobFailed || n.State != engine.NodeFailed || n.Steps[0].Phase != firmware.PhaseRolledBack ||
		!strings.Contains(n.Message, `reads "1.46.0"`) || !strings.Contains(n.Message, "rolled back") {
		t.Errorf("job %s, node %+v; want failed and rolled back after reading 1.46.0", j.State, n)
	}
	if v := b.FirmwareVersion(bmcFW); v != bmcBefore {
		t.Errorf("BMC firmware after the rollback %s, want %s", v, bmcBefore)
	}
}

// TestFirmwareCampaignCancel: a cancel stops the campaign before its next
// package: the update in flight finishes (never stopped mid-flash), the
// node's next package and the nodes not started never start.
func TestFirmwareCampaignCancel(t *testing.T) {
	h := newFWHarness(t, bmcAndBIOS, bmcImage, biosImage)
	h.start(nil)
	var bmcs []*vbmc.BMC
	for i := range 3 {
		b, url := startBMC(t, vbmc.Update{TaskTime: 400 * time.Millisecond})
		bmcs = append(bmcs, b)
		h.enroll(fmt.Sprintf("n%d", i), "rack-0", url)
	}
	ctx := context.Background()
	j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}, Total: 1}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for bmcs[0].UpdateStats().Starts == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cj, err := h.e.Cancel(ctx, j.ID, "operator:test", "wrong window")
	if err != nil || cj.State != store.JobRunning || cj.Step != "cancelling" {
		t.Fatalf("cancel: %+v, %v; want the job still running, cancelling", cj, err)
	}
	j, st := h.wait(j.ID)
	if j.State != store.JobCancelled || !strings.Contains(j.Reason, "cancelled by operator:test: wrong window") {
		t.Errorf("job %s: %s", j.State, j.Reason)
	}
	if n := st.Nodes[0]; n.State != engine.NodeCancelled || n.Steps[0].Phase != firmware.PhaseDone || n.Steps[1].Phase != firmware.PhasePending {
		t.Errorf("node in flight: %+v; want its first package done, its second never started", n)
	}
	if s := bmcs[0].UpdateStats(); s.Starts != 1 || s.Flashes[bmcFW] != 1 || bmcs[0].FirmwareVersion(bmcFW) != "1.46.0" {
		t.Errorf("BMC in flight: %+v; want the one update finished", s)
	}
	for i := 1; i < 3; i++ {
		if s := bmcs[i].UpdateStats(); s.Starts != 0 || st.Nodes[i].State != engine.NodeCancelled {
			t.Errorf("node %d: %s, %d starts; want cancelled before it started", i, st.Nodes[i].State, s.Starts)
		}
	}
}

// TestFirmwareCampaignWindows: a maintenance window that is closed holds
// back the nodes of the rack it names (they wait); the other rack's nodes
// are updated meanwhile. A recipe's window works the same way.
func TestFirmwareCampaignWindows(t *testing.T) {
	h := newFWHarness(t, bmcOnly, bmcImage)
	h.start(nil)
	for i := range 4 {
		_, url := startBMC(t, vbmc.Update{TaskTime: 20 * time.Millisecond})
		h.enroll(fmt.Sprintf("n%d", i), fmt.Sprintf("rack-%d", i%2), url)
	}
	now := time.Now().UTC()
	closed := fmt.Sprintf("racks=rack-1 %02d:%02d+1h", (now.Hour()+3)%24, now.Minute())
	ctx := context.Background()
	j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}, Windows: []string{closed}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	var st engine.FirmwareStatus
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		cur, _ := h.s.GetJob(ctx, j.ID)
		_, st, _ = engine.Firmware(cur)
		if c := st.Counts(); c.Done == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	cur, _ := h.s.GetJob(ctx, j.ID)
	_, st, _ = engine.Firmware(cur)
	if c := st.Counts(); c.Done != 2 || c.Waiting != 2 || st.Nodes[1].State != engine.NodeWaiting || st.Nodes[3].State != engine.NodeWaiting {
		t.Fatalf("with rack-1's window closed: %+v, nodes %v %v; want rack-0 done, rack-1 waiting", c, st.Nodes[1].State, st.Nodes[3].State)
	}
	if _, err := h.e.Cancel(ctx, j.ID, "operator:test", ""); err != nil {
		t.Fatal(err)
	}
	if j, _ := h.wait(j.ID); j.State != store.JobCancelled || !strings.Contains(j.Reason, "2 of 4 nodes at their pins, 0 failed, 2 cancelled") {
		t.Errorf("after the cancel: %s %s", j.State, j.Reason)
	}
	if _, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}, Windows: []string{"days=someday 01:00-02:00"}}, "x"); !errors.Is(err, engine.ErrPreflight) {
		t.Errorf("a bad window: %v, want a preflight error", err)
	}
}

// TestFirmwareCampaignPreflight: machines that cannot take part are named,
// and a machine in a campaign cannot be reimaged meanwhile.
func TestFirmwareCampaignPreflight(t *testing.T) {
	h := newFWHarness(t, bmcOnly, bmcImage)
	h.start(nil)
	_, url := startBMC(t, vbmc.Update{TaskTime: 5 * time.Second})
	h.enroll("n0", "rack-0", url)
	h.enroll("n1", "rack-0", "")
	ctx := context.Background()
	if _, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}}, "x"); !errors.Is(err, engine.ErrPreflight) ||
		!strings.Contains(err.Error(), "machine n1 has no BMC endpoint") {
		t.Errorf("a machine without a BMC: %v", err)
	}
	if _, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"nope"}}, "x"); err == nil || !strings.Contains(err.Error(), "nope is neither a recipe nor a machine") {
		t.Errorf("an unknown name: %v", err)
	}
	j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"n0"}}, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Preflight(ctx, "n0"); err == nil || !strings.Contains(err.Error(), "in firmware campaign "+j.ID) {
		t.Errorf("reimage preflight of a machine in a campaign: %v", err)
	}
	if _, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"n0"}}, "x"); err == nil || !strings.Contains(err.Error(), "in firmware campaign "+j.ID) {
		t.Errorf("a second campaign over the same machine: %v", err)
	}
	if _, err := h.e.Cancel(ctx, j.ID, "x", ""); err != nil {
		t.Fatal(err)
	}
	h.wait(j.ID)
}

// TestFirmwareNoServer: an engine built without firmware refuses
// campaigns and reimages of recipes that apply firmware before the image.
func TestFirmwareNoServer(t *testing.T) {
	h := newFWHarness(t, bmcBeforeImage, bmcImage)
	h.start(func(c *engine.Config) { c.Firmware = engine.FirmwareConfig{} })
	h.enroll("n0", "rack-0", "http://127.0.0.1:1")
	ctx := context.Background()
	if _, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}}, "x"); !errors.Is(err, engine.ErrPreflight) {
		t.Errorf("a campaign: %v", err)
	}
	if _, err := h.e.Preflight(ctx, "n0"); err == nil || !strings.Contains(err.Error(), "firmware.apply: before-image") {
		t.Errorf("a reimage: %v", err)
	}
}

// TestReimageFirmwareBeforeImage: a recipe with firmware.apply:
// before-image reimages in order firmware, bmc, boot, ...: the BMC's
// firmware is at its pin before the machine is even booted into the agent
// (let alone its image written), the job's status carries the firmware
// step, and the time to restore starts at the firmware phase and names it.
func TestReimageFirmwareBeforeImage(t *testing.T) {
	h := newFWHarness(t, bmcBeforeImage, bmcImage)
	h.start(nil)
	b, url := startBMC(t, vbmc.Update{TaskTime: 300 * time.Millisecond})
	m := h.enroll("n0", "rack-0", url)
	ctx := context.Background()
	p, err := h.e.Preflight(ctx, "n0")
	if err != nil || !strings.HasPrefix(p.Steps[0], "firmware: ") {
		t.Fatalf("plan %+v, %v; want the firmware step first", p, err)
	}
	j, err := h.e.Reimage(ctx, "n0", "operator:test", "new firmware")
	if err != nil || j.Step != engine.StepFirmware {
		t.Fatalf("reimage: %+v, %v; want it to start at the firmware step", j, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cur, _ := h.s.GetJob(ctx, j.ID); cur.Step == engine.StepBoot || cur.State != store.JobRunning {
			break
		}
		if b.FirmwareVersion(bmcFW) != "1.46.0" && h.fake.Calls() != "" {
			t.Fatalf("the BMC step ran (%s) before the firmware was at its pin", h.fake.Calls())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cur, _ := h.s.GetJob(ctx, j.ID)
	if cur.Step != engine.StepBoot || b.FirmwareVersion(bmcFW) != "1.46.0" || h.fake.Calls() == "" {
		t.Fatalf("job at %s (%s %s), BMC firmware %s, BMC calls %q; want boot after the firmware", cur.Step, cur.State, cur.Reason,
			b.FirmwareVersion(bmcFW), h.fake.Calls())
	}
	if _, err := h.e.OnTask(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnInventory(ctx, m.ID, agentInventory()); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnChecks(ctx, m.ID, []engine.CheckResult{{Name: "memory-size", OK: true}}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.OnDone(ctx, m.ID, "handoff", true, ""); err != nil {
		t.Fatal(err)
	}
	waitFor := func(step string) {
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			if cur, _ := h.s.GetJob(ctx, j.ID); cur.Step == step {
				return
			}
		}
		t.Fatalf("job never reached %s", step)
	}
	waitFor(engine.StepFirstBoot)
	if err := h.e.OnFirstBoot(ctx, m.ID, engine.FirstBoot{Software: machine.Software{Kernel: "6.1.0", Drivers: map[string]string{"nvidia": "535.309.01"}}}); err != nil {
		t.Fatal(err)
	}
	waitFor("done")
	cur, _ = h.s.GetJob(ctx, j.ID)
	st, err := engine.Status(cur)
	if err != nil {
		t.Fatal(err)
	}
	if got := engine.PhaseOrder(st); len(got) < 2 || got[0] != "firmware" || got[1] != "bmc" {
		t.Errorf("phases %v; want firmware, bmc, ...", got)
	}
	fw := st.Phases["firmware"]
	if cur.State != store.JobSucceeded || st.Firmware == nil || st.Firmware.State != engine.NodeDone || st.Firmware.Steps[0].Phase != firmware.PhaseDone ||
		st.Restore < st.Phases["bmc"].End.Sub(fw.Start) || fw.End.Sub(fw.Start) < 300*time.Millisecond {
		t.Errorf("job %s, firmware %+v, restore %s, firmware phase %s; want done, the restore counted from the firmware phase",
			cur.State, st.Firmware, st.Restore, fw.End.Sub(fw.Start))
	}
	if us := b.UpdateStats(); us.Starts != 1 {
		t.Errorf("BMC: %+v, want one start", us)
	}
}

// TestReimageFirmwareStepResumes: ingot restarts while a reimage's
// firmware step follows the BMC's task; the new process resumes the step
// from what was persisted and goes on to the BMC step, the package
// started once.
func TestReimageFirmwareStepResumes(t *testing.T) {
	h := newFWHarness(t, bmcBeforeImage, bmcImage)
	h.start(nil)
	b, url := startBMC(t, vbmc.Update{TaskTime: 500 * time.Millisecond})
	h.enroll("n0", "rack-0", url)
	ctx := context.Background()
	j, err := h.e.Reimage(ctx, "n0", "operator:test", "new firmware")
	if err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		cur, _ := h.s.GetJob(ctx, j.ID)
		st, _ := engine.Status(cur)
		return st.Firmware != nil && len(st.Firmware.Steps) == 1 && st.Firmware.Steps[0].Phase == firmware.PhaseRunning
	}
	for end := time.Now().Add(10 * time.Second); !running() && time.Now().Before(end); {
		time.Sleep(2 * time.Millisecond)
	}
	h.stop()
	time.Sleep(50 * time.Millisecond)
	if !running() {
		t.Fatal("the firmware step was not persisted running when ingot stopped")
	}
	h.start(nil)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cur, _ := h.s.GetJob(ctx, j.ID); cur.Step == engine.StepBoot || cur.State != store.JobRunning {
			break
		}
	}
	if cur, _ := h.s.GetJob(ctx, j.ID); cur.Step != engine.StepBoot || b.UpdateStats().Starts != 1 || b.FirmwareVersion(bmcFW) != "1.46.0" {
		t.Errorf("after the restart: job at %s (%s %s), BMC %+v; want boot, one start, the pin", cur.Step, cur.State, cur.Reason, b.UpdateStats())
	}
}

// TestFirmwareResetStaggered: the host resets firmware needs are power-ons
// like any other: a rack whose start-up margin covers one machine at the
// recipe's load_watts starts one at a time, the others wait (an event
// says so), even when the campaign's own limits let all three update.
func TestFirmwareResetStaggered(t *testing.T) {
	h := newFWHarness(t, bmcOnly, bmcImage)
	h.recipe.Power.LoadWatts = 1500
	h.start(func(c *engine.Config) {
		c.Racks = func() []rack.Rack { return []rack.Rack{{Name: "rack-0", StartupMarginWatts: 2000}} }
		c.StartupSettle = 300 * time.Millisecond
	})
	for i := range 3 {
		_, url := startBMC(t, vbmc.Update{TaskTime: 20 * time.Millisecond})
		h.enroll(fmt.Sprintf("n%d", i), "rack-0", url)
	}
	ctx := context.Background()
	j, err := h.e.StartFirmware(ctx, engine.FirmwareSpec{Targets: []string{"gpu"}}, "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	j, st := h.wait(j.ID)
	if j.State != store.JobSucceeded {
		t.Fatalf("campaign %s: %s", j.State, j.Reason)
	}
	staggered := 0
	for _, n := range st.Nodes {
		evs, _ := h.s.Events(ctx, n.Machine, 0, 0)
		for _, ev := range evs {
			if ev.Kind == "power.stagger" {
				staggered++
			}
		}
	}
	if staggered < 2 {
		t.Errorf("%d nodes waited for rack-0's start-up margin, want 2 of 3", staggered)
	}
}
