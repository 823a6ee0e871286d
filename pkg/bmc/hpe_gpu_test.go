package bmc_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// HPE iLO 5 lists GPUs only in its OEM Devices and PCIDevices resources; the
// HGX baseboard and the NVSwitch it also types "GPU", the embedded Matrox
// VGA and the NIC are not GPUs. One of the four A40s (slot 4) has no Devices
// entry, so it comes from PCIDevices alone and gets its firmware from the
// FirmwareInventory entry in the same slot.
func TestHPEOEMGPUs(t *testing.T) {
	const mockup = "hpe-ilo5-xl675d-a40"
	a40 := func(slot, addr, serial string) machine.GPU {
		return machine.GPU{Slot: slot, Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: addr, Serial: serial,
			Firmware: "94.02.5C.00.03", Health: "OK"}
	}
	slot4 := machine.GPU{Slot: "PCI-E Slot 4", Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: "0000:c1:00.0", Firmware: "94.02.5C.00.03"}
	cases := map[string]struct {
		missing      string // a path the BMC answers 404
		want         []machine.GPU
		wantProblems []string
	}{
		"Devices and PCIDevices": {
			want: []machine.GPU{a40("PCI-E Slot 1", "0000:21:00.0", "1650221000101"), a40("PCI-E Slot 2", "0000:41:00.0", "1650221000102"),
				a40("PCI-E Slot 3", "0000:a1:00.0", "1650221000103"), slot4},
		},
		"Devices unreadable: PCIDevices alone": {
			missing: "/redfish/v1/Chassis/1/Devices",
			want: []machine.GPU{
				{Slot: "PCI-E Slot 1", Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: "0000:21:00.0", Firmware: "94.02.5C.00.03"},
				{Slot: "PCI-E Slot 2", Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: "0000:41:00.0", Firmware: "94.02.5C.00.03"},
				{Slot: "PCI-E Slot 3", Vendor: "NVIDIA", Model: "NVIDIA A40", PCIAddress: "0000:a1:00.0", Firmware: "94.02.5C.00.03"},
				slot4},
			wantProblems: []string{"Chassis/1/Devices"},
		},
		"PCIDevices unreadable: Devices alone": {
			missing: "/redfish/v1/Systems/1/PCIDevices",
			want: []machine.GPU{a40("PCI-E Slot 1", "", "1650221000101"), a40("PCI-E Slot 2", "", "1650221000102"),
				a40("PCI-E Slot 3", "", "1650221000103")},
			wantProblems: []string{"Systems/1/PCIDevices"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, mockup), Username: testUser, Password: testPassword})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.missing != "" && strings.TrimSuffix(r.URL.Path, "/") == tc.missing {
					http.Error(w, `{"error":{"code":"Base.1.4.ResourceMissingAtURI","message":"missing"}}`, http.StatusNotFound)
					return
				}
				b.ServeHTTP(w, r)
			}))
			defer srv.Close()
			c := dial(t, testConfig(srv.URL))
			defer closeAndCheckSessions(t, c, b)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inv, err := c.Inventory(ctx)
			if err != nil {
				t.Fatalf("Inventory: %v", err)
			}
			if d := cmp.Diff(tc.want, inv.GPUs); d != "" {
				t.Errorf("GPUs (-want +got):\n%s", d)
			}
			var parts []string
			for _, p := range inv.Problems {
				parts = append(parts, p.Part)
			}
			if d := cmp.Diff(tc.wantProblems, parts); d != "" {
				t.Errorf("problem parts (-want +got):\n%s", d)
			}
		})
	}
}

// The firmware inventory names components by their Name, not iLO's numeric
// Ids, and tells the four A40s apart by slot.
func TestHPEFirmwareNames(t *testing.T) {
	b, url := startBMC(t, "hpe-ilo5-xl675d-a40", vbmc.Faults{})
	c := dial(t, testConfig(url))
	defer closeAndCheckSessions(t, c, b)
	fw, err := c.FirmwareInventory(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fw {
		got = append(got, f.Component)
	}
	want := []string{"BIOS", "BMC", "iLO 5", "System ROM", "Intelligent Platform Abstraction Data",
		"NVIDIA A40 (PCI-E Slot 1)", "NVIDIA A40 (PCI-E Slot 2)", "NVIDIA A40 (PCI-E Slot 3)", "NVIDIA A40 (PCI-E Slot 4)",
		"Mellanox ConnectX-6 HDR100 InfiniBand/Ethernet Adapter"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("firmware components (-want +got):\n%s", d)
	}
}
