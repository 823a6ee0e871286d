//go:build e2e

package lab_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// A reimage under a recipe with firmware.apply: before-image, in the lab:
// ingot serves the BMC's firmware package from its content store at the
// job's URL on the boot listener, the lab's virtual BMC fetches it
// (SimpleUpdate) and runs the update, and the engine reads the new version
// back before it powers the VM into the agent. The job's firmware step is
// done with the version read from the BMC, its phase ends before the
// image phase begins, and the time to restore starts at it and names it.
func TestE2ELabFirmwareBeforeImage(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := upLab(t, ctx, lab.Config{Prefix: "ingot-fw", VMs: []lab.VMSpec{{Firmware: "bios"}}})
	pkg := filepath.Join(t.TempDir(), "lab-bmc-1.1.0.bin")
	if err := os.WriteFile(pkg, vbmc.FirmwareImage(map[string]string{"BMC": "1.1.0"}, "Immediate"), 0o644); err != nil {
		t.Fatal(err)
	}
	imp, err := firmware.Import(ctx, filepath.Join(l.State.Dir, "data", "artifacts"), pkg, "")
	if err != nil {
		t.Fatal(err)
	}
	err = l.RewriteRecipe(func(r map[string]any) {
		r["firmware"] = map[string]any{"apply": "before-image",
			"bmc": map[string]any{"version": "1.1.0", "package": imp.SHA256, "policy": "update", "apply_time": "immediate"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Reimage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requireReady(t, ctx, l, res[0])
	st := res[0].Status
	t.Logf("%s: %s", res[0].Machine, res[0].Restore())
	fw := st.Firmware
	if fw == nil || fw.State != "done" || len(fw.Steps) != 1 || fw.Steps[0].Phase != "done" || fw.Steps[0].Method != "simple-update" ||
		fw.Steps[0].Before[bmcEntry] != lab.LabBMCFirmware {
		t.Fatalf("the job's firmware step: %+v", fw)
	}
	phase := map[string]int{}
	for i, p := range st.Phases {
		phase[p.Name] = i
	}
	first, image := st.Phases[0], st.Phases[phase["image"]]
	if first.Name != "firmware" || first.End.IsZero() || first.End.After(image.Start) {
		t.Errorf("phases %+v: want firmware first, ended before the image began", st.Phases)
	}
	if line := res[0].Restore(); !strings.Contains(line, "firmware ") || st.Restore() < image.End.Sub(first.Start) {
		t.Errorf("time to restore %q (%s): want the firmware phase in it, counted from its start", line, st.Restore())
	}
	evs, err := l.Events(ctx, res[0].Machine)
	if err != nil {
		t.Fatal(err)
	}
	var done, boot time.Time
	for _, ev := range evs {
		switch {
		case ev.Kind == "firmware.step" && strings.Contains(ev.Message, ": done"):
			done = ev.Time
		case ev.Kind == "bmc.boot" && boot.IsZero() && !done.IsZero():
			boot = ev.Time
		}
	}
	if done.IsZero() || boot.IsZero() || boot.Before(done) {
		t.Errorf("the firmware step's done event (%s) must precede the network boot into the agent (%s)", done, boot)
	}
}

const bmcEntry = "/redfish/v1/UpdateService/FirmwareInventory/BMC"
