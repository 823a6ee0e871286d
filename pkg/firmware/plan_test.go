package firmware_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

const (
	pkgA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	pkgB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	pkgC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func update(v, pkg string) recipe.Pin {
	return recipe.Pin{Version: v, Package: pkg, Policy: recipe.FirmwareUpdate}
}

// planCase is one shipped mockup with an UpdateService, pins that reach
// its components, and what the plan must say: every component by name and
// class ("NAME class action" lines, in the BMC's order), and the packages.
type planCase struct {
	pins     recipe.Firmware
	entries  []string
	packages []string // "sha:targets-count:apply-time"
}

func planCases() map[string]planCase {
	return map[string]planCase{
		"dmtf-public-rackmount1": {
			pins: recipe.Firmware{BMC: update("1.46.0", pkgA), BIOS: recipe.Pin{Version: "P79 v1.45"},
				Other: map[string]recipe.Pin{"simple-storage": update("2.40", pkgB), "ac-rot": {Version: "1.11"}}},
			entries: []string{"Contoso BMC Firmware bmc update", "Contoso Simple Storage Firmware other blocked-downgrade",
				"Contoso BIOS Firmware bios none", "ac-rot other missing"},
			packages: []string{"aaaaaaaa:1:on-reset"},
		},
		"dmtf-public-tower": {
			pins: recipe.Firmware{BMC: recipe.Pin{Version: "1.46", Policy: recipe.FirmwareWarn}, NIC: recipe.Pin{Version: "7.4.10"}},
			entries: []string{"Contoso BMC Firmware bmc warn", "Contoso BIOS Firmware bios unpinned",
				"NIC 9fa725a1/1 nic none", "NIC 9fa725a1/2 nic none"},
		},
		"gigabyte-ami-h262-z63": {
			pins: recipe.Firmware{BIOS: update("C28", pkgA), BMC: recipe.Pin{Version: "12.84.13"},
				Other: map[string]recipe.Pin{"cpld": {Version: "ff"}}},
			entries:  []string{"BMC bmc none", "MB_CPLD1 other none", "BIOS bios update"},
			packages: []string{"aaaaaaaa:1:on-reset"},
		},
		"hpe-cray-ex235n-a100": {
			pins: recipe.Firmware{
				GPU:  update("92.00.19.00.14", pkgA),
				BIOS: recipe.Pin{Version: "ex235n.bios-1.2.2", Package: pkgB, Policy: recipe.FirmwareUpdate, ApplyTime: recipe.ApplyACCycle},
				NIC:  recipe.Pin{Component: "HPCNet", Version: "1.5.27"},
				BMC:  recipe.Pin{Version: "nc.1.6.20"},
				Other: map[string]recipe.Pin{"management-ethernet": {Version: "1.0", Policy: recipe.FirmwareWarn},
					"fpga": {Component: "accFPGA", Version: "2.7"}},
			},
			entries: []string{"Node1.HPCNet2 nic none", "Node0.BIOS bios update", "Node1.Acc2.VBIOS gpu blocked-not-updateable",
				"mFPGA2 other unpinned", "mFPGA0 other unpinned", "Node1.ManagementEthernet nic warn", "Node0.HPCNet2 nic none",
				"mFPGA3 other unpinned", "Recovery other unpinned", "Node0.Acc2.VBIOS gpu blocked-not-updateable",
				"accFPGA (Node0.AccFPGA0) other none", "Node1.Acc3.VBIOS gpu blocked-not-updateable", "Node0.HPCNet0 nic none",
				"Node1.HPCNet3 nic none", "mFPGA1 other unpinned", "Node0.Acc1.VBIOS gpu blocked-not-updateable",
				"Node1.Acc1.VBIOS gpu blocked-not-updateable", "Node1.HPCNet1 nic none", "Node0.Acc0.VBIOS gpu blocked-not-updateable",
				"Node0.HPCNet1 nic none", "Node1.Acc0.VBIOS gpu blocked-not-updateable", "Node1.HPCNet0 nic none",
				"Node0.ManagementEthernet nic warn", "Node0.HPCNet3 nic none", "Node0.Acc3.VBIOS gpu blocked-not-updateable",
				"Bootloader other unpinned", "BMC bmc block", "nFPGA other unpinned", "accFPGA (Node1.AccFPGA0) other none",
				"Node1.BIOS bios update"},
			packages: []string{"bbbbbbbb:2:ac-cycle"},
		},
		"hpe-ilo5-xl675d-a40": {
			pins: recipe.Firmware{
				GPU:  recipe.Pin{Component: "NVIDIA A40", Version: "94.02.74.00.01", Package: pkgC, Policy: recipe.FirmwareUpdate, ApplyTime: recipe.ApplyACCycle},
				BMC:  recipe.Pin{Version: "2.72"},
				BIOS: update("A48 v2.82", pkgA),
				NIC:  recipe.Pin{Version: "20.31.1014"},
			},
			entries: []string{"iLO 5 bmc none", "System ROM bios update", "Intelligent Platform Abstraction Data other unpinned",
				"NVIDIA A40 (PCI-E Slot 1) gpu update", "NVIDIA A40 (PCI-E Slot 2) gpu update", "NVIDIA A40 (PCI-E Slot 3) gpu update",
				"NVIDIA A40 (PCI-E Slot 4) gpu update", "Mellanox ConnectX-6 HDR100 InfiniBand/Ethernet Adapter nic none"},
			packages: []string{"aaaaaaaa:1:on-reset", "cccccccc:4:ac-cycle"},
		},
	}
}

// TestPlanEveryMockup plans every shipped mockup that has an UpdateService
// from a virtual BMC serving it: every component instance is named and
// classed right (eight GPUs are eight entries), each action follows its
// pin, one package brings all the instances it covers, and the whole plan
// matches testdata/plan/NAME.json (UPDATE_TESTDATA=1 rewrites).
func TestPlanEveryMockup(t *testing.T) {
	for name, tc := range planCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, url := startBMC(t, name, nil)
			c := dial(t, url)
			us, err := c.UpdateService(ctxT(t))
			if err != nil {
				t.Fatalf("UpdateService: %v", err)
			}
			inv, err := c.Inventory(ctxT(t))
			if err != nil {
				t.Fatalf("Inventory: %v", err)
			}
			p := firmware.MakePlan(us.Items, inv, tc.pins)
			var got []string
			for _, e := range p.Entries {
				got = append(got, fmt.Sprintf("%s %s %s", e.Component, e.Class, e.Action))
			}
			if d := cmp.Diff(tc.entries, got); d != "" {
				t.Errorf("entries (-want +got):\n%s", d)
			}
			var pkgs []string
			for _, pk := range p.Packages {
				pkgs = append(pkgs, fmt.Sprintf("%s:%d:%s", pk.SHA256[:8], len(pk.Targets), pk.ApplyTime))
			}
			if d := cmp.Diff(tc.packages, pkgs); d != "" {
				t.Errorf("packages (-want +got):\n%s", d)
			}
			goldenJSON(t, filepath.Join("testdata", "plan", name+".json"), p)
		})
	}
}

func goldenJSON(t *testing.T, file string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if os.Getenv("UPDATE_TESTDATA") != "" {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (UPDATE_TESTDATA=1 writes it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got; UPDATE_TESTDATA=1 rewrites it):\n%s", file, d)
	}
}

// TestPlanActions: the decision table, on instances made by hand.
func TestPlanActions(t *testing.T) {
	for name, tc := range map[string]struct {
		found string
		pin   recipe.Pin
		want  firmware.Action
	}{
		"equal":                 {"2.72 Sep 04 2022", update("2.72", pkgA), firmware.ActionNone},
		"below":                 {"1.45", update("1.46", pkgA), firmware.ActionUpdate},
		"above":                 {"1.47", update("1.46", pkgA), firmware.ActionBlockedDowngrade},
		"above allowed":         {"1.47", recipe.Pin{Version: "1.46", Package: pkgA, Policy: recipe.FirmwareUpdate, AllowDowngrade: true}, firmware.ActionDowngrade},
		"unordered":             {"A48 v2.80", update("U46 v2.82", pkgA), firmware.ActionBlockedUnordered},
		"unordered allowed":     {"A48 v2.80", recipe.Pin{Version: "U46 v2.82", Package: pkgA, Policy: recipe.FirmwareUpdate, AllowDowngrade: true}, firmware.ActionUpdate},
		"block":                 {"1.45", recipe.Pin{Version: "1.46"}, firmware.ActionBlock},
		"warn":                  {"1.45", recipe.Pin{Version: "1.46", Policy: recipe.FirmwareWarn}, firmware.ActionWarn},
		"unknown version":       {"undefined", update("1.46", pkgA), firmware.ActionMissing},
		"hex VBIOS below":       {"94.02.5C.00.03", update("94.02.74.00.01", pkgA), firmware.ActionUpdate},
		"hex VBIOS above":       {"94.02.74.00.01", update("94.02.5C.00.03", pkgA), firmware.ActionBlockedDowngrade},
		"no version, warn":      {"", recipe.Pin{Version: "1", Policy: recipe.FirmwareWarn}, firmware.ActionWarn},
		"product prefix equals": {"iLO 5 v2.72", recipe.Pin{Version: "2.72"}, firmware.ActionNone},
	} {
		t.Run(name, func(t *testing.T) {
			items := []bmc.FirmwareItem{{URI: "/x/BMC", ID: "BMC", Name: "BMC", Component: "BMC", Version: tc.found, Updateable: true}}
			p := firmware.MakePlan(items, machine.Inventory{}, recipe.Firmware{BMC: tc.pin})
			if got := p.Entries[0].Action; got != tc.want {
				t.Errorf("found %q, pin %+v: %s (%s), want %s", tc.found, tc.pin, got, p.Entries[0].Reason, tc.want)
			}
			if flashes := len(p.Packages) > 0; flashes != tc.want.Flashes() {
				t.Errorf("packages %v for action %s", p.Packages, tc.want)
			}
		})
	}
}

// TestPlanInband: a component the BMC does not list comes from the
// inventory; a pin with policy update on it cannot be carried out over
// Redfish and says so; a pin nothing reports is missing.
func TestPlanInband(t *testing.T) {
	var inv machine.Inventory
	for i := range 8 {
		inv.GPUs = append(inv.GPUs, machine.GPU{Slot: fmt.Sprintf("SXM%d", i+1), Model: "NVIDIA H100 80GB HBM3", Firmware: "96.00.74.00.01"})
	}
	p := firmware.MakePlan(nil, inv, recipe.Firmware{GPU: update("96.00.89.00.01", pkgA), Other: map[string]recipe.Pin{"cpld": {Version: "1.0.4"}}})
	var gpus int
	for _, e := range p.Entries {
		if e.Class == firmware.ClassGPU {
			gpus++
			if e.Action != firmware.ActionBlockedNoTarget || e.Source != "inband" || !strings.HasPrefix(e.Component, "GPU ") {
				t.Errorf("in-band GPU entry %+v", e)
			}
		}
	}
	if gpus != 8 {
		t.Errorf("%d GPU entries, want 8 (one per instance)", gpus)
	}
	last := p.Entries[len(p.Entries)-1]
	if last.Key != "other.cpld" || last.Action != firmware.ActionMissing || !p.Blocked() {
		t.Errorf("an unreported pin: %+v (blocked %v)", last, p.Blocked())
	}
}
