package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/firmware"
)

// TestBMCFirmwarePlan: `ingot bmc firmware plan` against a virtual BMC
// serving the HPE iLO 5 mockup: one entry per component instance (four
// GPUs are four entries) with found, pinned and action, in JSON and as a
// table.
func TestBMCFirmwarePlan(t *testing.T) {
	_, url := startTestBMC(t, "hpe-ilo5-xl675d-a40")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(bmcTestPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"bmc", "firmware", "plan", "--endpoint", url, "--user", bmcTestUser, "--password-file", pw,
		"--pin", "gpu=94.02.74.00.01", "--pin", "bmc=2.72", "--pin", "bios=A48 v2.70"}
	out, errOut, err := runIngot(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	var p firmware.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan JSON: %v\n%s", err, out)
	}
	count := map[firmware.Action]int{}
	for _, e := range p.Entries {
		count[e.Action]++
		if e.Class == firmware.ClassGPU && (e.Version != "94.02.5C.00.03" || e.Pinned != "94.02.74.00.01") {
			t.Errorf("GPU entry %+v", e)
		}
	}
	if count[firmware.ActionUpdate] != 4 || count[firmware.ActionNone] != 1 || count[firmware.ActionBlockedDowngrade] != 1 {
		t.Errorf("actions %v; want 4 GPU updates, the BMC at its pin, the BIOS downgrade refused\n%s", count, out)
	}
	out, errOut, err = runIngot(t, args...)
	if err != nil || !strings.Contains(out, "NVIDIA A40 (PCI-E Slot 4)") || !strings.Contains(out, "blocked-downgrade") {
		t.Errorf("table (err %v):\n%s\n%s", err, out, errOut)
	}
	if _, errOut, err = runIngot(t, "bmc", "firmware", "plan", "--endpoint", url, "--user", bmcTestUser, "--password-file", pw,
		"--pin", "bmc"); err == nil || !strings.Contains(err.Error()+errOut, "COMPONENT=VERSION") {
		t.Errorf("a pin without a version: %v %s", err, errOut)
	}
}

// TestBMCQuirks lists the quirk table without a BMC.
func TestBMCQuirks(t *testing.T) {
	out, errOut, err := runIngot(t, "bmc", "quirks")
	if err != nil || !strings.Contains(out, "ilo-boot-target-none-refused") || !strings.Contains(out, "Supermicro") {
		t.Errorf("bmc quirks: %v\n%s%s", err, out, errOut)
	}
}

// TestFirmwareImport: the package lands in the content store under its
// sha256 and name.
func TestFirmwareImport(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bmc-1.46.0.fwpkg")
	content := []byte("firmware bytes")
	if err := os.WriteFile(file, content, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "store")
	out, errOut, err := runIngot(t, "firmware", "import", file, "--data", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	sum := sha256.Sum256(content)
	sha := hex.EncodeToString(sum[:])
	if !strings.HasPrefix(out, sha+"  bmc-1.46.0.fwpkg") {
		t.Errorf("output %q, want the sha256 and the name", out)
	}
	st, err := artifact.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.Resolve("bmc-1.46.0.fwpkg"); err != nil || got != sha || !st.Has(sha) {
		t.Errorf("store: %s, %v", got, err)
	}
}
