package bmc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// want is what each mockup must show, whatever the golden file says.
var want = map[string]struct {
	gpus      int
	gpuModel  string
	psus      int
	watts     int
	minCPUs   int
	basicAuth bool
}{
	"dmtf-public-rackmount1":      {psus: 2, watts: 344, minCPUs: 1},
	"dmtf-public-tower":           {gpus: 2, gpuModel: "TU102", psus: 2, watts: 926, minCPUs: 1},
	"gigabyte-ami-h262-z63":       {psus: 2, watts: 100, minCPUs: 2},
	"hpe-cray-ex235n-a100":        {gpus: 8, gpuModel: "A100", minCPUs: 2},
	"hpe-ilo5-xl675d-a40":         {gpus: 4, gpuModel: "A40", minCPUs: 2},
	"supermicro-hgx-b200-partial": {gpus: 2, gpuModel: "B200", minCPUs: 2},
}

func TestInventoryGolden(t *testing.T) {
	for _, name := range mockups {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, url := startBMC(t, name, vbmc.Faults{})
			c := dial(t, testConfig(url))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inv, err := c.Inventory(ctx)
			if err != nil {
				t.Fatalf("Inventory: %v", err)
			}
			closeAndCheckSessions(t, c, b)
			checkInventory(t, name, inv)
			inv.Taken = time.Time{}
			got, err := json.MarshalIndent(inv, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "inventory", name+".json")
			if os.Getenv("UPDATE_TESTDATA") != "" {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantJSON, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
			}
			if d := cmp.Diff(string(wantJSON), string(got)); d != "" {
				t.Errorf("inventory differs from %s (-want +got; UPDATE_TESTDATA=1 refreshes):\n%s", golden, d)
			}
		})
	}
}

// checkInventory asserts the facts the issue names, independent of goldens.
func checkInventory(t *testing.T, name string, inv machine.Inventory) {
	t.Helper()
	w := want[name]
	if len(inv.GPUs) != w.gpus {
		t.Errorf("%d GPUs, want %d", len(inv.GPUs), w.gpus)
	}
	for _, g := range inv.GPUs {
		if !strings.Contains(g.Model, w.gpuModel) {
			t.Errorf("GPU %s model %q, want it to contain %q", g.Slot, g.Model, w.gpuModel)
		}
	}
	if len(inv.PSUs) != w.psus {
		t.Errorf("%d PSUs, want %d", len(inv.PSUs), w.psus)
	}
	if inv.Power.Watts != w.watts {
		t.Errorf("power %d W, want %d W", inv.Power.Watts, w.watts)
	}
	if len(inv.CPUs) < w.minCPUs {
		t.Errorf("%d CPUs, want at least %d", len(inv.CPUs), w.minCPUs)
	}
	if inv.Source != "redfish" {
		t.Errorf("source %q", inv.Source)
	}
}

func TestInventoryJSONIsStable(t *testing.T) {
	// Two reads of the same BMC give byte-identical inventories (the
	// concurrent fan-out must not change the order).
	b, url := startBMC(t, "dmtf-public-tower", vbmc.Faults{})
	var outs [][]byte
	for range 2 {
		c := dial(t, testConfig(url))
		inv, err := c.Inventory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		closeAndCheckSessions(t, c, b)
		j, _ := json.Marshal(inv)
		outs = append(outs, j)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("two reads differ:\n%s\n%s", outs[0], outs[1])
	}
}
