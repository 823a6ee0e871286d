package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/agent/agentsim"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// rackNode is how each machine of the rollout test behaves
// (pkg/agent/agentsim): the minimal inventory, the one check passed, and
// a task that must be a provisioning with an image.
func rackNode(t *testing.T) *agentsim.Node {
	return &agentsim.Node{
		Checks: func(task api.Task, _ machine.Inventory) []api.CheckResult {
			if task.Mode != api.ModeProvision || task.Image.SHA256 == "" {
				t.Errorf("agent on %s got task %+v", task.MachineID, task)
			}
			return []api.CheckResult{{Name: "memory-size", OK: true, Value: 1}}
		},
		Done: func(api.Task) api.Done { return api.Done{Step: "handoff", OK: true} },
	}
}

// The engine against 20 virtual BMCs (the DMTF rackmount mockup, real
// Redfish through pkg/bmc) and simulated agents speaking the real agent API:
// a rollout in waves of 5 after a canary, where one machine's BMC refuses
// its credentials, stops at max-failures 0 and runs to the end at 1.
func TestRolloutAgainstVirtualBMCs(t *testing.T) {
	if testing.Short() {
		t.Skip("20 virtual BMCs and two rollouts")
	}
	for _, tc := range []struct {
		maxFailures int
		want        store.JobState
		ready       int
	}{{0, store.JobFailed, 10}, {1, store.JobSucceeded, 19}} { // node07 is in wave 3 (canary 1, then 5s)
		t.Run(fmt.Sprint("max-failures=", tc.maxFailures), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			dir := t.TempDir()
			fleet, err := vbmc.StartFleet(ctx, 20, vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: "admin", Password: "pw"})
			if err != nil {
				t.Fatal(err)
			}
			defer fleet.Close()
			data := t.TempDir()
			prov, url := inProcess(ctx, t, data, rackRecipe(t, data), dir)
			st := prov.Store
			good := filepath.Join(dir, "good.cred")
			bad := filepath.Join(dir, "bad.cred")
			os.WriteFile(good, []byte("username=admin\npassword=pw\n"), 0o600)
			os.WriteFile(bad, []byte("username=admin\npassword=wrong\n"), 0o600)
			for i, u := range fleet.URLs {
				cred := good
				if i == 7 {
					cred = bad
				}
				m := &machine.Machine{Name: fmt.Sprintf("node%02d", i), MACs: []string{fmt.Sprintf("52:54:00:00:02:%02x", i)},
					Recipe: "rack", State: machine.StateEnrolled, Rack: fmt.Sprintf("r%d", i%4),
					BMC: machine.BMC{Endpoint: u, CredentialRef: "file:" + cred, Insecure: true}}
				if err := st.CreateMachine(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			a := agentsim.New(agentsim.Config{URL: url, Jobs: prov.Engine, Machines: prov.Fleet, Boot: prov.API, Errorf: t.Errorf,
				Node: func(string) (*agentsim.Node, bool) { return rackNode(t), true }})
			go a.Run(ctx)

			j, err := prov.Engine.StartRollout(ctx, engine.RolloutSpec{Recipe: "rack", Batch: 5, MaxFailures: tc.maxFailures, PerRack: 2}, "test")
			if err != nil {
				t.Fatal(err)
			}
			j, err = prov.Engine.Wait(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != tc.want {
				t.Fatalf("rollout %s (%s), want %s", j.State, j.Reason, tc.want)
			}
			ready, _ := st.ListMachines(ctx, store.MachineFilter{State: machine.StateReady})
			if len(ready) != tc.ready {
				t.Errorf("%d machines ready, want %d; rollout: %s", len(ready), tc.ready, j.Reason)
			}
			// Real Redfish happened: every ready machine's BMC holds the BIOS
			// attribute and booted from the disk last.
			for _, m := range ready {
				var idx int
				fmt.Sscanf(m.Name, "node%02d", &idx)
				b := fleet.BMCs[idx]
				if b.Power() != "On" {
					t.Errorf("%s: BMC power %s, want On", m.Name, b.Power())
				}
			}
			// One session per BMC, shared by the engine's steps and inspect
			// (bmc.Pool): a dial per step would leave none open, a leak more.
			if len(ready) > 0 {
				if _, err := prov.Fleet.Inspect(ctx, ready[0].ID, "test"); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range ready {
				var idx int
				fmt.Sscanf(m.Name, "node%02d", &idx)
				if n := fleet.BMCs[idx].OpenSessions(); n != 1 {
					t.Errorf("%s: %d sessions open at its BMC after the rollout and an inspect, want the 1 shared", m.Name, n)
				}
			}
			prov.BMCs.Close()
			for i, b := range fleet.BMCs {
				if n := b.OpenSessions(); n != 0 {
					t.Errorf("node%02d: %d sessions open after the pool closed, want 0", i, n)
				}
			}
		})
	}
}

// rackRecipe writes the recipe of the rollout test into a recipes folder:
// one BIOS attribute, one acceptance check, one retry, its image and agent
// pinned to small files in the content store inProcess opens (the engine's
// preflight finds them there).
func rackRecipe(t *testing.T, data string) string {
	t.Helper()
	dir := t.TempDir()
	arts, err := artifact.Open(filepath.Join(data, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	const rc = `name: rack
version: "1"
bios:
  attributes:
    ProcTurboMode: Disabled
os:
  image:
    name: lab
    sha256: "%s"
    format: raw.zst
  agent:
    kernel:
      path: agent-vmlinuz
      sha256: "%s"
    initrd:
      path: agent-initrd
      sha256: "%s"
acceptance:
  checks:
    - name: memory-size
      min: 1GiB
timeouts:
  retries: 1
`
	sha := func(s string) string {
		ref, err := arts.Put(context.Background(), strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return ref.SHA256
	}
	body := fmt.Sprintf(rc, sha("image"), sha("kernel"), sha("initrd"))
	if err := os.WriteFile(filepath.Join(dir, "rack.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
