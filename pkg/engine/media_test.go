package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// harnessMedia is the harness's engine.Media: h.media answers.
type harnessMedia struct{ h *harness }

func (m harnessMedia) AgentMedia(_ context.Context, mc *machine.Machine, _ *recipe.Recipe, jobID string) (string, error) {
	m.h.mu.Lock()
	f := m.h.media
	m.h.mu.Unlock()
	if f == nil {
		return "", errors.New("no boot CDs here")
	}
	return f(mc, jobID)
}

func mediaRecipe() *recipe.Recipe {
	r := testRecipe()
	r.OS.Agent.Boot = recipe.AgentBootVirtualMedia
	return r
}

// A recipe whose agent boots from virtual media: the BMC step ejects,
// inserts the job's boot CD, sets a one-time boot from CD and
// power-cycles (never a network boot); the hand-off ejects the CD before
// it boots the disk.
func TestVirtualMediaBoot(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.recipe = mediaRecipe()
	var asked []string
	h.media = func(m *machine.Machine, jobID string) (string, error) {
		asked = append(asked, m.Name+" "+jobID)
		return "http://10.77.0.1:8080/vmedia/" + jobID + "/agent.iso", nil
	}
	m := h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "no PXE here")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepBoot)
	url := "http://10.77.0.1:8080/vmedia/" + j.ID + "/agent.iso"
	if want := "bios 1,mode UEFI,eject,insert " + url + ",boot Cd,cycle"; h.bmc.Calls() != want {
		t.Errorf("BMC calls at the bmc step = %s, want %s", h.bmc.Calls(), want)
	}
	h.mu.Lock()
	if len(asked) != 1 || asked[0] != "node1 "+j.ID {
		t.Errorf("boot CDs asked for: %q, want one for node1 in %s", asked, j.ID)
	}
	h.mu.Unlock()
	h.e.OnTask(ctx, m.ID)
	h.e.OnInventory(ctx, m.ID, agentInventory())
	h.e.OnChecks(ctx, m.ID, []engine.CheckResult{{Name: "memory-size", OK: true}})
	if err := h.e.OnDone(ctx, m.ID, "handoff", true, ""); err != nil {
		t.Fatal(err)
	}
	h.waitStep(j.ID, engine.StepFirstBoot)
	calls := strings.Split(h.bmc.Calls(), ",")
	if want := []string{"eject", "boot Hdd", "cycle"}; !slices.Equal(calls[len(calls)-3:], want) {
		t.Errorf("BMC calls = %q, want it to end with the hand-off %q", calls, want)
	}
	evs, _ := h.s.Events(ctx, m.ID, 0, 0)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind+": "+ev.Message)
	}
	all := strings.Join(kinds, "\n")
	for _, want := range []string{"bmc.boot: boot CD inserted as virtual media", "bmc.media: boot CD ejected"} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %q:\n%s", want, all)
		}
	}
}

// A boot CD that cannot be built fails the BMC step with the reason, and
// the machine is never powered: no boot from an empty or stale drive.
func TestVirtualMediaBuildFails(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	h.recipe = mediaRecipe()
	h.media = func(*machine.Machine, string) (string, error) {
		return "", errors.New("building a boot CD needs xorriso: apt-get install xorriso")
	}
	h.enroll("node1")
	j, err := h.e.Reimage(ctx, "node1", "operator:test", "")
	if err != nil {
		t.Fatal(err)
	}
	j = h.waitStep(j.ID, string(store.JobFailed))
	if !strings.Contains(j.Reason, "building the agent's boot CD: building a boot CD needs xorriso") {
		t.Errorf("job reason %q: want the boot CD's failure", j.Reason)
	}
	if c := h.bmc.Calls(); strings.Contains(c, "cycle") || strings.Contains(c, "insert") || strings.Contains(c, "Pxe") {
		t.Errorf("BMC calls %q: want no insert, network boot or power cycle", c)
	}
}
