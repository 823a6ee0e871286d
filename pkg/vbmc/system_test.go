package vbmc

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResetTransition(t *testing.T) {
	for _, tc := range []struct {
		rt, cur string
		allowed []string
		want    transition
		err     string
	}{
		{rt: "On", cur: "Off", want: transition{boot: true}},
		{rt: "On", cur: "On", want: transition{}},
		{rt: "ForceOff", cur: "On", want: transition{off: true}},
		{rt: "ForceOff", cur: "Off", want: transition{}},
		{rt: "Off", cur: "On", allowed: []string{"ForceOff", "On", "Off"}, want: transition{off: true}},
		{rt: "GracefulShutdown", cur: "On", want: transition{off: true, graceful: true}},
		{rt: "ForceRestart", cur: "On", want: transition{off: true, boot: true}},
		{rt: "ForceRestart", cur: "Off", want: transition{boot: true}},
		{rt: "GracefulRestart", cur: "On", want: transition{off: true, graceful: true, boot: true}},
		{rt: "PowerCycle", cur: "On", want: transition{off: true, boot: true}},
		{rt: "PushPowerButton", cur: "Off", want: transition{boot: true}},
		{rt: "PushPowerButton", cur: "On", want: transition{off: true, graceful: true}},
		{rt: "Nmi", cur: "On", want: transition{}},
		{rt: "Nmi", cur: "Off", err: "needs the system powered on"},
		{rt: "PowerCycle", cur: "On", allowed: []string{"On", "ForceOff"}, err: "not one of"},
		{rt: "Explode", cur: "On", err: "not one of"},
	} {
		t.Run(tc.rt+"/"+tc.cur, func(t *testing.T) {
			got, err := resetTransition(tc.rt, tc.cur, tc.allowed)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// resetCase is what each mockup allows, read from the action or its ActionInfo.
var resetMockups = map[string]struct {
	system  string
	allowed []string
	refused string
}{
	"dmtf-public-rackmount1":      {"/redfish/v1/Systems/437XR1138R2", []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart"}, "PowerCycle"},
	"dmtf-public-tower":           {"/redfish/v1/Systems/437XR1238R2", []string{"On", "ForceOff", "GracefulRestart", "PushPowerButton"}, "FullPowerCycle"},
	"gigabyte-ami-h262-z63":       {"/redfish/v1/Systems/Self", []string{"ForceOff", "On", "ForceRestart", "GracefulShutdown"}, "GracefulRestart"},
	"hpe-cray-ex235n-a100":        {"/redfish/v1/Systems/Node1", []string{"Off", "On", "ForceOff"}, "ForceRestart"},
	"supermicro-hgx-b200-partial": {"/redfish/v1/Systems/1", []string{"ForceOff", "On", "FullPowerCycle", "GracefulShutdown"}, "PushPowerButton"},
}

// Reset changes PowerState, checked against each mockup's allowed values.
func TestResetChangesPower(t *testing.T) {
	for m, tc := range resetMockups {
		t.Run(m, func(t *testing.T) {
			b, c := start(t, m, nil)
			target := tc.system + "/Actions/ComputerSystem.Reset"
			power := func() string { return c.get(tc.system)["PowerState"].(string) }
			if p := power(); p != "On" {
				t.Fatalf("initial PowerState %q", p)
			}
			want := "On"
			for _, rt := range tc.allowed {
				c.do(http.MethodPost, target, map[string]any{"ResetType": rt}).want(t, 204, "reset "+rt)
				switch rt {
				case "ForceOff", "Off", "GracefulShutdown":
					want = "Off"
				case "PushPowerButton":
					want = map[string]string{"On": "Off", "Off": "On"}[want]
				default:
					want = "On"
				}
				if p := power(); p != want {
					t.Errorf("after %s: PowerState %q, want %q", rt, p, want)
				}
				if b.PowerOf(tc.system) != want {
					t.Errorf("after %s: PowerOf %q, want %q", rt, b.PowerOf(tc.system), want)
				}
			}
			r := c.do(http.MethodPost, target, map[string]any{"ResetType": tc.refused}).want(t, 400, "reset "+tc.refused)
			if !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.PropertyValueNotInList"}) {
				t.Errorf("refused reset body: %s", r.raw)
			}
			c.do(http.MethodPost, target, map[string]any{}).want(t, 400, "reset without ResetType")
		})
	}
}

// A System without a Reset action (the HGX baseboard) refuses it.
func TestResetNotAdvertised(t *testing.T) {
	_, c := start(t, "supermicro-hgx-b200-partial", nil)
	c.do(http.MethodPost, "/redfish/v1/Systems/HGX_Baseboard_0/Actions/ComputerSystem.Reset",
		map[string]any{"ResetType": "On"}).want(t, 400, "reset on a System without the action")
	c.do(http.MethodPost, "/redfish/v1/Systems/Nope/Actions/ComputerSystem.Reset",
		map[string]any{"ResetType": "On"}).want(t, 404, "reset on a missing System")
}

var bootMockups = map[string]struct {
	system, allowed, refused string
}{
	"dmtf-public-rackmount1":      {"/redfish/v1/Systems/437XR1138R2", "Hdd", "UefiHttp"},
	"dmtf-public-tower":           {"/redfish/v1/Systems/437XR1238R2", "Pxe", "UefiHttp"},
	"gigabyte-ami-h262-z63":       {"/redfish/v1/Systems/Self", "UefiHttp", "Diags"},
	"supermicro-hgx-b200-partial": {"/redfish/v1/Systems/1", "Pxe", "UefiHttp"},
}

// A boot override is checked against the allowed targets, stored, and a
// one-time override is consumed by the next boot.
func TestBootOverride(t *testing.T) {
	for m, tc := range bootMockups {
		t.Run(m, func(t *testing.T) {
			_, c := start(t, m, nil)
			r := c.do(http.MethodPatch, tc.system, map[string]any{"Boot": map[string]any{
				"BootSourceOverrideTarget": tc.refused, "BootSourceOverrideEnabled": "Once"}}).want(t, 400, "refused target")
			if !strings.Contains(string(r.raw), "Pxe") || !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.PropertyValueNotInList"}) {
				t.Errorf("refusal should list the allowed targets: %s", r.raw)
			}
			c.do(http.MethodPatch, tc.system, map[string]any{"Boot": map[string]any{
				"BootSourceOverrideTarget": tc.allowed, "BootSourceOverrideEnabled": "Sometimes"}}).want(t, 400, "bad Enabled")
			c.do(http.MethodPatch, tc.system, map[string]any{"Boot": map[string]any{
				"BootSourceOverrideTarget": tc.allowed, "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}}).want(t, 200, "PATCH Boot")
			boot := c.get(tc.system)["Boot"].(map[string]any)
			if boot["BootSourceOverrideTarget"] != tc.allowed || boot["BootSourceOverrideEnabled"] != "Once" || boot["BootSourceOverrideMode"] != "UEFI" {
				t.Errorf("Boot after PATCH: %v", boot)
			}
			c.do(http.MethodPost, tc.system+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}).want(t, 204, "off")
			if e := c.get(tc.system)["Boot"].(map[string]any)["BootSourceOverrideEnabled"]; e != "Once" {
				t.Errorf("power off consumed the override: Enabled %v", e)
			}
			c.do(http.MethodPost, tc.system+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}).want(t, 204, "on")
			if e := c.get(tc.system)["Boot"].(map[string]any)["BootSourceOverrideEnabled"]; e != "Disabled" {
				t.Errorf("boot did not consume the one-time override: Enabled %v", e)
			}
		})
	}
}

// The Cray blade has no boot override at all.
func TestBootOverrideUnsupported(t *testing.T) {
	_, c := start(t, "hpe-cray-ex235n-a100", nil)
	r := c.do(http.MethodPatch, "/redfish/v1/Systems/Node0", map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "Pxe"}}).want(t, 400, "override on Cray")
	if !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.PropertyUnknown"}) {
		t.Errorf("body: %s", r.raw)
	}
	c.do(http.MethodPatch, "/redfish/v1/Systems/Node0", map[string]any{"PowerState": "Off"}).want(t, 400, "PATCH PowerState")
}

// HttpBootUri is accepted where UefiHttp is an allowed target.
func TestHttpBootUri(t *testing.T) {
	_, c := start(t, "gigabyte-ami-h262-z63", nil)
	c.do(http.MethodPatch, "/redfish/v1/Systems/Self", map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once",
		"HttpBootUri": "http://127.0.0.1/boot.efi"}}).want(t, 200, "UefiHttp with URI")
	if u := c.get("/redfish/v1/Systems/Self")["Boot"].(map[string]any)["HttpBootUri"]; u != "http://127.0.0.1/boot.efi" {
		t.Errorf("HttpBootUri %v", u)
	}
	_, c2 := start(t, "dmtf-public-tower", nil)
	c2.do(http.MethodPatch, "/redfish/v1/Systems/437XR1238R2", map[string]any{"Boot": map[string]any{
		"HttpBootUri": "http://127.0.0.1/boot.efi"}}).want(t, 400, "HttpBootUri where UefiHttp is not allowed")
}

var biosMockups = map[string]struct {
	system, patch, attr string
	value, old          any
	unknownRejected     bool
}{
	"dmtf-public-rackmount1": {"/redfish/v1/Systems/437XR1138R2", "/redfish/v1/Systems/437XR1138R2/Bios/Settings", "ProcTurboMode", "Disabled", "Enabled", true},
	"dmtf-public-tower":      {"/redfish/v1/Systems/437XR1238R2", "/redfish/v1/Systems/437XR1238R2/Bios/Settings", "BootMode", "LegacyBios", "Uefi", true},
	"gigabyte-ami-h262-z63":  {"/redfish/v1/Systems/Self", "/redfish/v1/Systems/Self/Bios", "FBO001", "LEGACY", "UEFI", true},
	"hpe-cray-ex235n-a100":   {"/redfish/v1/Systems/Node0", "/redfish/v1/Systems/Node0/Bios", "Core Performance Boost", "Disabled", "Enabled", true},
}

// attrValue reads an attribute; Cray's attributes are objects with current_value.
func attrValue(bios map[string]any, name string) any {
	v := bios["Attributes"].(map[string]any)[name]
	if o, ok := v.(map[string]any); ok {
		return o["current_value"]
	}
	return v
}

// BIOS attributes PATCHed are pending until the next reset, then current.
func TestBIOSPendingAppliedAtReset(t *testing.T) {
	for m, tc := range biosMockups {
		t.Run(m, func(t *testing.T) {
			b, c := start(t, m, nil)
			bios := tc.system + "/Bios"
			if v := attrValue(c.get(bios), tc.attr); v != tc.old {
				t.Fatalf("%s before = %v, want %v", tc.attr, v, tc.old)
			}
			r := c.do(http.MethodPatch, tc.patch, map[string]any{"Attributes": map[string]any{"NoSuchKnob": "x"}}).want(t, 400, "unknown attribute")
			if !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.PropertyUnknown"}) {
				t.Errorf("unknown attribute body: %s", r.raw)
			}
			c.do(http.MethodPatch, tc.patch, map[string]any{"Attributes": map[string]any{tc.attr: tc.value}}).want(t, 200, "PATCH BIOS")
			if v := attrValue(c.get(bios), tc.attr); v != tc.old {
				t.Errorf("%s changed before the reset: %v", tc.attr, v)
			}
			if diff := cmp.Diff(map[string]any{tc.attr: tc.value}, b.PendingBIOS(tc.system)); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if tc.patch != bios {
				if v := c.get(tc.patch)["Attributes"].(map[string]any)[tc.attr]; v != tc.value {
					t.Errorf("settings object shows %v, want the pending %v", v, tc.value)
				}
				c.do(http.MethodPatch, bios, map[string]any{"Attributes": map[string]any{tc.attr: tc.value}}).want(t, 405, "PATCH Bios beside a settings object")
			}
			c.do(http.MethodPost, tc.system+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceOff"}).want(t, 204, "off")
			if v := attrValue(c.get(bios), tc.attr); v != tc.old {
				t.Errorf("%s applied by power off: %v", tc.attr, v)
			}
			c.do(http.MethodPost, tc.system+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}).want(t, 204, "on")
			if v := attrValue(c.get(bios), tc.attr); v != tc.value {
				t.Errorf("%s after the reset = %v, want %v", tc.attr, v, tc.value)
			}
			if p := b.PendingBIOS(tc.system); len(p) != 0 {
				t.Errorf("pending after reset: %v", p)
			}
		})
	}
}

// A wrong value type and, on Cray, a value outside the attribute's list are refused.
func TestBIOSValueChecks(t *testing.T) {
	_, c := start(t, "dmtf-public-rackmount1", nil)
	c.do(http.MethodPatch, "/redfish/v1/Systems/437XR1138R2/Bios/Settings",
		map[string]any{"Attributes": map[string]any{"ProcCoreDisable": "zero"}}).want(t, 400, "string for a number")
	c.do(http.MethodPatch, "/redfish/v1/Systems/437XR1138R2/Bios/Settings",
		map[string]any{"BiosVersion": "x"}).want(t, 400, "non-attribute property")
	_, cc := start(t, "hpe-cray-ex235n-a100", nil)
	cc.do(http.MethodPatch, "/redfish/v1/Systems/Node0/Bios",
		map[string]any{"Attributes": map[string]any{"Core Performance Boost": "Turbo"}}).want(t, 400, "value not allowed")
}

// Attributes configured to refuse to stick stay at their old value.
func TestBIOSStuck(t *testing.T) {
	sys := "/redfish/v1/Systems/437XR1238R2"
	_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.StuckBIOS = []string{"ProcTurboMode"} })
	c.do(http.MethodPatch, sys+"/Bios/Settings", map[string]any{"Attributes": map[string]any{
		"ProcTurboMode": "Disabled", "PowerProfile": "Efficiency"}}).want(t, 200, "PATCH")
	c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceRestart"}).want(t, 204, "restart")
	got := c.get(sys + "/Bios")["Attributes"].(map[string]any)
	if got["ProcTurboMode"] != "Enabled" || got["PowerProfile"] != "Efficiency" {
		t.Errorf("after reset ProcTurboMode=%v (want stuck at Enabled) PowerProfile=%v (want Efficiency)", got["ProcTurboMode"], got["PowerProfile"])
	}
}

// If-Match: the current ETag or * succeeds, a stale one gets 412.
func TestIfMatch(t *testing.T) {
	sys := "/redfish/v1/Systems/437XR1138R2"
	_, c := start(t, "dmtf-public-rackmount1", nil)
	r := c.do(http.MethodGet, sys, nil).want(t, 200, "GET")
	etag := r.header.Get("ETag")
	patch := map[string]any{"AssetTag": "rack-1"}
	c.do(http.MethodPatch, sys, patch, "If-Match", etag).want(t, 200, "PATCH with current ETag")
	r2 := c.do(http.MethodGet, sys, nil).want(t, 200, "GET")
	if r2.header.Get("ETag") == etag {
		t.Errorf("ETag unchanged after PATCH: %s", etag)
	}
	r = c.do(http.MethodPatch, sys, patch, "If-Match", etag).want(t, 412, "PATCH with stale ETag")
	if !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.PreconditionFailed"}) {
		t.Errorf("412 body: %s", r.raw)
	}
	c.do(http.MethodPatch, sys, patch, "If-Match", "*").want(t, 200, "PATCH with *")
	if got := c.get(sys)["AssetTag"]; got != "rack-1" {
		t.Errorf("AssetTag %v", got)
	}
}
