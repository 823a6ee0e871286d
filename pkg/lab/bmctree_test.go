package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// TestBMCTreeFirmware: a lab machine's BMC tree has an UpdateService the
// virtual BMC updates: the plan names the BMC's firmware and the VM's
// BIOS, and a package brings the BMC (its FirmwareInventory entry and its
// Manager's FirmwareVersion) to the pin, as a reimage with firmware.apply
// before-image does in the lab.
func TestBMCTreeFirmware(t *testing.T) {
	dir := t.TempDir()
	if err := writeBMCTree(dir, "lab1-bios", 512); err != nil {
		t.Fatal(err)
	}
	b, err := vbmc.New(vbmc.Config{Root: dir, Username: "admin", Password: "pw", Update: vbmc.Update{TaskTime: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	defer srv.Close()
	img := vbmc.FirmwareImage(map[string]string{"BMC": "1.1.0"}, "Immediate")
	imgSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(img) }))
	defer imgSrv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := bmc.Dial(ctx, bmc.Config{Endpoint: srv.URL, Username: "admin", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	us, err := c.UpdateService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sha := firmwareSHA(img)
	plan := firmware.MakePlan(us.Items, machine.Inventory{}, recipe.Firmware{
		BMC:  recipe.Pin{Version: "1.1.0", Package: sha, Policy: recipe.FirmwareUpdate, ApplyTime: recipe.ApplyImmediate},
		BIOS: recipe.Pin{Version: "ingot-lab-1"}})
	if len(plan.Entries) != 2 || plan.Entries[0].Class != "bmc" || plan.Entries[0].Action != firmware.ActionUpdate ||
		plan.Entries[1].Class != "bios" || plan.Entries[1].Action != firmware.ActionNone {
		t.Fatalf("plan of the lab BMC: %+v", plan.Entries)
	}
	imgs := staticImages{url: imgSrv.URL, img: img}
	for _, s := range firmware.Steps(plan) {
		if st, err := firmware.Apply(ctx, c, imgs, s, firmware.Options{Poll: 20 * time.Millisecond, Service: &us}, nil); err != nil {
			t.Fatalf("Apply: %v (%+v)", err, st)
		}
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inv.System.BMCVersion != "1.1.0" || inv.System.BIOSVersion != "ingot-lab-1" {
		t.Errorf("after the update the BMC reports BMC %q, BIOS %q; want 1.1.0, ingot-lab-1", inv.System.BMCVersion, inv.System.BIOSVersion)
	}
}

type staticImages struct {
	url string
	img []byte
}

func (s staticImages) URL(context.Context, string) (string, error) { return s.url, nil }
func (s staticImages) Open(context.Context, string) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.img)), nil
}

func firmwareSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
