package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/serve"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// TestFirmwareCampaignThroughCLI: what an operator types, against serve's
// parts built in-process (serve.Build) and four virtual BMCs: the packages
// imported with `ingot firmware import`, pinned in a recipe; `ingot
// firmware plan` shows per node and component found, pinned and action;
// `ingot firmware apply --wait` runs the campaign as a job through the API
// within its limits and window, the BMCs fetching the packages at the
// job's URLs; `ingot job show` shows the campaign, typed in JSON too.
func TestFirmwareCampaignThroughCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bmcs, err := vbmc.StartFleet(ctx, 4, vbmc.Config{Root: vbmcMockup(t, "dmtf-public-rackmount1"), Username: "admin", Password: "pw",
		Update: vbmc.Update{TaskTime: 100 * time.Millisecond, MaxUpdates: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer bmcs.Close()
	data, files := t.TempDir(), t.TempDir()
	var shas []string // the BMC's package, then the BIOS's
	for _, pkg := range []struct {
		name string
		img  []byte
	}{
		{"bmc-1.46.0.bin", vbmc.FirmwareImage(map[string]string{"BMC": "1.46.0"}, "")},
		{"bios-p79-46.bin", vbmc.FirmwareImage(map[string]string{"BIOS": "P79 v1.46"}, "")},
	} {
		f := filepath.Join(files, pkg.name)
		if err := os.WriteFile(f, pkg.img, 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := runIngot(t, "firmware", "import", f, "--data", filepath.Join(data, "artifacts"))
		if err != nil {
			t.Fatalf("firmware import: %v\n%s", err, errOut)
		}
		shas = append(shas, strings.Fields(out)[0])
	}
	dir := firmwareRecipe(t, data, shas[0], shas[1])
	credDir := t.TempDir()
	prov, url := inProcess(ctx, t, data, dir, credDir, func(c *serve.Config) { c.FirmwarePoll = 50 * time.Millisecond })
	cred := filepath.Join(credDir, "bmc.cred")
	if err := os.WriteFile(cred, []byte("username=admin\npassword=pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, u := range bmcs.URLs {
		m := &machine.Machine{Name: fmt.Sprintf("node%d", i), MACs: []string{fmt.Sprintf("52:54:00:00:07:%02x", i)}, Recipe: "fw",
			State: machine.StateReady, Rack: fmt.Sprintf("r%d", i%2), BMC: machine.BMC{Endpoint: u, CredentialRef: "file:" + cred, Insecure: true}}
		if err := prov.Store.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	op, _, err := fleet.CreateToken(ctx, prov.Store, "alice", fleet.ScopeOperator, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	api := []string{"--server", url, "--token", op}

	out, errOut, err := runIngot(t, append([]string{"firmware", "plan", "fw"}, api...)...)
	if err != nil || strings.Count(out, " update ") != 8 || !strings.Contains(out, "1.45.455b66-rev4") || !strings.Contains(out, shas[1][:12]) {
		t.Fatalf("firmware plan (err %v): want 2 updates on each of 4 nodes, found and pinned versions, the packages:\n%s%s", err, out, errOut)
	}
	out, _, err = runIngot(t, append([]string{"firmware", "plan", "node0", "-o", "json"}, api...)...)
	var plans []wire.FirmwarePlan
	if err != nil || json.Unmarshal([]byte(out), &plans) != nil || len(plans) != 1 || len(plans[0].Packages) != 2 {
		t.Fatalf("firmware plan -o json (err %v):\n%s", err, out)
	}

	out, errOut, err = runIngot(t, append([]string{"firmware", "apply", "fw", "--per-rack", "1", "--total", "2", "--pause", "10ms",
		"--window", "00:00+24h", "--reason", "new BMC", "--wait"}, api...)...)
	if err != nil || !strings.Contains(out, "4 nodes: 4 done, 0 failed, 0 waiting, 0 running") || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("firmware apply (err %v):\n%s%s", err, out, errOut)
	}
	id := strings.Fields(out)[2]
	for i, b := range bmcs.BMCs {
		if us := b.UpdateStats(); us.Starts != 2 || us.Refused != 0 || b.FirmwareVersion("/redfish/v1/UpdateService/FirmwareInventory/BMC") != "1.46.0" {
			t.Errorf("BMC %d: %+v; want both packages once, at the pins", i, us)
		}
	}
	out, _, err = runIngot(t, append([]string{"job", "show", id}, api...)...)
	if err != nil || !strings.Contains(out, "Kind:     firmware") || !strings.Contains(out, "Firmware: 4 nodes: 4 done") ||
		!strings.Contains(out, "package "+shas[0][:12]+" -> BMC 1.46.0: done") {
		t.Errorf("job show (err %v):\n%s", err, out)
	}
	out, _, err = runIngot(t, append([]string{"job", "show", id, "-o", "json"}, api...)...)
	var j wire.Job
	if err != nil || json.Unmarshal([]byte(out), &j) != nil || j.Firmware == nil || j.Firmware.Done != 4 || j.Firmware.PerRack != 1 ||
		j.Firmware.MaxInFlight != 2 || len(j.Firmware.Nodes[0].Steps) != 2 || j.Firmware.Nodes[0].Steps[0].Method != "simple-update" {
		t.Errorf("job show -o json (err %v):\n%s", err, out)
	}
	// A campaign whose window is closed waits; a cancel ends it before any
	// node starts.
	closed := fmt.Sprintf("racks=r0,r1 %02d:00+1h", (time.Now().UTC().Hour()+3)%24)
	out, errOut, err = runIngot(t, append([]string{"firmware", "apply", "fw", "--window", closed}, api...)...)
	if err != nil {
		t.Fatalf("firmware apply with a closed window: %v\n%s", err, errOut)
	}
	id = strings.Fields(out)[2]
	out, errOut, err = runIngot(t, append([]string{"job", "cancel", id, "--reason", "wrong night"}, api...)...)
	if err != nil || !strings.Contains(out, "cancelling: no further package starts") {
		t.Errorf("job cancel (err %v): %s%s", err, out, errOut)
	}
	if j, err := prov.Engine.Wait(ctx, id); err != nil || j.State != "cancelled" || !strings.Contains(j.Reason, "0 of 4 nodes at their pins, 0 failed, 4 cancelled") {
		t.Errorf("the cancelled campaign: %+v, %v", j, err)
	}
	if _, errOut, err := runIngot(t, append([]string{"firmware", "apply", "fw", "--window", "25:00-01:00"}, api...)...); err == nil ||
		!strings.Contains(err.Error()+errOut, "expected a time of day HH:MM") {
		t.Errorf("a bad window: %v %s", err, errOut)
	}
}

// firmwareRecipe writes recipe fw: a small image and agent (as
// rackRecipe's), the BMC and BIOS pinned with policy update to packages.
func firmwareRecipe(t *testing.T, data, bmcSHA, biosSHA string) string {
	t.Helper()
	dir := rackRecipe(t, data)
	b, err := os.ReadFile(filepath.Join(dir, "rack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(b), "name: rack", "name: fw", 1) + fmt.Sprintf(`firmware:
  bmc: {version: 1.46.0, package: %s, policy: update}
  bios: {version: P79 v1.46, package: %s, policy: update}
`, bmcSHA, biosSHA)
	if err := os.Remove(filepath.Join(dir, "rack.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fw.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
