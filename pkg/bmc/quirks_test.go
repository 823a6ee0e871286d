package bmc_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// The fragments below are small Redfish trees for one deviation each.
// Unless a case says it is cut from a shipped mockup (testdata/redfish-
// mockups, captured or DMTF's), a fragment was WRITTEN for ingot from the
// vendor's public documentation and field reports of other provisioners
// (Ironic/sushy, Metal3, gofish issues) as the author knows them: it shows
// the behaviour, it is not a capture of a machine.

// fragmentSystem is a minimal ComputerSystem whose Boot object is given.
func fragmentSystem(id, boot string, extra string) string {
	return `{"@odata.id": "/redfish/v1/Systems/` + id + `", "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": "` + id +
		`", "PowerState": "On", "Boot": ` + boot + extra + `,
		"Actions": {"#ComputerSystem.Reset": {"target": "/redfish/v1/Systems/` + id + `/Actions/ComputerSystem.Reset",
		"ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart"]}}}`
}

// fragmentRoot is a service root naming its vendor the way the vendor does.
func fragmentRoot(vendor, oem string) map[string]string {
	return map[string]string{
		"/redfish/v1": `{"@odata.id": "/redfish/v1", "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot", "Id": "RootService",
			"RedfishVersion": "1.15.0", "Vendor": "` + vendor + `", "Oem": {"` + oem + `": {}},
			"Systems": {"@odata.id": "/redfish/v1/Systems"}, "Managers": {"@odata.id": "/redfish/v1/Managers"},
			"SessionService": {"@odata.id": "/redfish/v1/SessionService"}}`,
		"/redfish/v1/Managers": `{"@odata.id": "/redfish/v1/Managers", "Members": []}`,
	}
}

func withSystem(docs map[string]string, id, body string) map[string]string {
	docs["/redfish/v1/Systems"] = `{"@odata.id": "/redfish/v1/Systems", "Members": [{"@odata.id": "/redfish/v1/Systems/` + id + `"}]}`
	docs["/redfish/v1/Systems/"+id] = body
	return docs
}

const allowedTargets = `"BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Hdd", "Cd", "UefiHttp"]`

// fragmentBMC serves docs from a virtual BMC behind an edge.
func fragmentBMC(t *testing.T, docs map[string]string) (*vbmc.BMC, *edge, *bmc.Client) {
	t.Helper()
	b, e, url := edgeBMC(t, vbmc.Config{Root: writeTree(t, docs), Username: testUser, Password: testPassword})
	c := dial(t, testConfig(url))
	t.Cleanup(func() { c.Close() })
	return b, e, c
}

// recorder keeps the bodies of the requests a hook saw.
type recorder struct {
	mu     sync.Mutex
	bodies []map[string]any
	heads  []http.Header
}

func (r *recorder) add(h http.Header, body []byte) {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	r.mu.Lock()
	r.bodies = append(r.bodies, m)
	r.heads = append(r.heads, h.Clone())
	r.mu.Unlock()
}

func (r *recorder) last() (map[string]any, http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		return nil, nil
	}
	return r.bodies[len(r.bodies)-1], r.heads[len(r.heads)-1]
}

func redfishError(w http.ResponseWriter, status int, id, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "Base.1.0.GeneralError",
		"message":               "A general error has occurred. See ExtendedInfo for more information.",
		"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg, "Severity": "Warning"}}}})
}

// quirkCase tests one deviation; quirk is its name in bmc.Quirks().
type quirkCase struct {
	quirk string
	run   func(t *testing.T)
}

// quirkCases are the deviations whose handling is new with the quirk
// table: each of these FAILED on the code before it (ea9cf9d; see the
// report of the change that added them), and passes now.
func quirkCases() map[string]quirkCase {
	return map[string]quirkCase{
		"supermicro boot mode not advertised": {"supermicro-boot-mode-not-advertised", testSupermicroBootMode},
		"ilo refuses target None":             {"ilo-boot-target-none-refused", testILONone},
		"idrac10 boot settings, etag in body": {"boot-override-settings-if-match", func(t *testing.T) { testIDRACBootSettings(t, false) }},
		"ami future-state settings object":    {"ami-future-state-settings", testAMIFutureState},
		"redirected action":                   {"redirect", testRedirect},
		"idrac10 virtual media":               {"idrac10-virtual-media", testIDRAC10Media},
	}
}

func TestQuirks(t *testing.T) {
	for name, tc := range quirkCases() {
		t.Run(name, tc.run)
	}
}

// Supermicro (X11/X12): Boot without BootSourceOverrideMode. The BMC
// takes the mode in a PATCH all the same, and a one-time override PATCHed
// without it boots Legacy.
func testSupermicroBootMode(t *testing.T) {
	docs := withSystem(fragmentRoot("Supermicro", "Supermicro"), "1", fragmentSystem("1",
		`{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None", `+allowedTargets+`}`, ""))
	_, e, c := fragmentBMC(t, docs)
	var rec recorder
	mode := ""
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method != http.MethodPatch || !strings.HasSuffix(r.URL.Path, "/Systems/1") {
			return false
		}
		rec.add(r.Header, body)
		var p struct{ Boot map[string]any }
		_ = json.Unmarshal(body, &p)
		switch m, ok := p.Boot["BootSourceOverrideMode"].(string); {
		case ok:
			mode = m
		case p.Boot["BootSourceOverrideTarget"] != nil:
			mode = "Legacy" // the deviation: the override falls back to Legacy
		}
		w.WriteHeader(http.StatusNoContent)
		return true
	})
	if err := c.SetBootOverride(ctxT(t), bmc.BootPxe, "", true); err != nil {
		t.Fatalf("SetBootOverride: %v", err)
	}
	if mode != bmc.ModeUEFI {
		body, _ := rec.last()
		t.Errorf("the one-time Pxe override boots %q (PATCH %v), want UEFI", mode, body)
	}
	if err := c.SetBootMode(ctxT(t), bmc.ModeUEFI); err != nil {
		t.Fatalf("SetBootMode: %v", err)
	}
	if body, _ := rec.last(); body == nil || body["Boot"].(map[string]any)["BootSourceOverrideMode"] != "UEFI" {
		t.Errorf("SetBootMode sent %v, want Boot.BootSourceOverrideMode UEFI", body)
	}
}

// HPE iLO 4/5 list None among the allowed targets and refuse it.
func testILONone(t *testing.T) {
	docs := withSystem(fragmentRoot("HPE", "Hpe"), "1", fragmentSystem("1",
		`{"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe", "BootSourceOverrideMode": "UEFI", `+allowedTargets+`,
		"BootSourceOverrideEnabled@Redfish.AllowableValues": ["Disabled", "Once", "Continuous"]}`, ""))
	_, e, c := fragmentBMC(t, docs)
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method == http.MethodPatch && strings.Contains(string(body), `"BootSourceOverrideTarget":"None"`) {
			redfishError(w, http.StatusBadRequest, "iLO.2.15.PropertyValueBadParam",
				"The property BootSourceOverrideTarget had a bad parameter: None.")
			return true
		}
		return false
	})
	if err := c.SetBootOverride(ctxT(t), "None", "", false); err != nil {
		t.Fatalf("clearing the override: %v", err)
	}
	b, err := c.GetBootOverride(ctxT(t))
	if err != nil || b.Enabled != "Disabled" {
		t.Errorf("override after clearing: %+v, %v; want Enabled Disabled", b, err)
	}
}

// Dell iDRAC 10: Boot is read-only on the System; the override goes to the
// System's settings object with If-Match. withHeader false: the settings
// object carries its ETag only in @odata.etag.
func testIDRACBootSettings(t *testing.T, withHeader bool) {
	var c *bmc.Client
	testIDRACBootSettingsClient(t, withHeader, &c)
}

func testIDRACBootSettingsClient(t *testing.T, withHeader bool, cp **bmc.Client) {
	const sys, so = "System.Embedded.1", "/redfish/v1/Systems/System.Embedded.1/Settings"
	docs := withSystem(fragmentRoot("Dell", "Dell"), sys, fragmentSystem(sys,
		`{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None", "BootSourceOverrideMode": "UEFI", `+allowedTargets+`}`,
		`, "@Redfish.Settings": {"@odata.type": "#Settings.v1_3_5.Settings", "SettingsObject": {"@odata.id": "`+so+`"}}`))
	docs[so] = `{"@odata.id": "` + so + `", "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "@odata.etag": "W/\"77\"", "Id": "Settings", "Boot": {}}`
	_, e, c := fragmentBMC(t, docs)
	*cp = c
	var rec recorder
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		switch {
		case r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/"+sys):
			redfishError(w, http.StatusBadRequest, "Base.1.12.PropertyNotWritable",
				"The property BootSourceOverrideTarget is a read only property and cannot be assigned a value.")
			return true
		case r.Method == http.MethodGet && r.URL.Path == so && !withHeader:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(docs[so]))
			return true
		case r.Method == http.MethodPatch && r.URL.Path == so:
			rec.add(r.Header, body)
			if r.Header.Get("If-Match") == "" {
				redfishError(w, http.StatusPreconditionRequired, "Base.1.12.PreconditionRequired",
					"A precondition header or annotation is required to change the resource.")
				return true
			}
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	})
	if err := c.SetBootOverride(ctxT(t), bmc.BootPxe, "", true); err != nil {
		t.Fatalf("SetBootOverride: %v", err)
	}
	body, hdr := rec.last()
	if body == nil || body["Boot"].(map[string]any)["BootSourceOverrideTarget"] != "Pxe" || hdr.Get("If-Match") == "" {
		t.Errorf("settings object PATCH %v with If-Match %q, want Boot Pxe with an If-Match", body, hdr.Get("If-Match"))
	}
}

// AMI MegaRAC: the BIOS settings object (Bios/SD) answers 404 until a
// change is pending; its PATCH wants the Bios resource's ETag.
func testAMIFutureState(t *testing.T) {
	const bios, sd = "/redfish/v1/Systems/Self/Bios", "/redfish/v1/Systems/Self/Bios/SD"
	docs := withSystem(fragmentRoot("AMI", "Ami"), "Self", fragmentSystem("Self",
		`{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None", "BootSourceOverrideMode": "UEFI"}`,
		`, "Bios": {"@odata.id": "`+bios+`"}`))
	docs[bios] = `{"@odata.id": "` + bios + `", "@odata.type": "#Bios.v1_1_0.Bios", "@odata.etag": "W/\"1616690218\"", "Id": "Bios",
		"@Redfish.Settings": {"@odata.type": "#Settings.v1_2_0.Settings", "SettingsObject": {"@odata.id": "` + sd + `"}},
		"Attributes": {"SMTControl": "Enabled", "SRIOVSupport": "Disabled"}}`
	_, e, c := fragmentBMC(t, docs)
	var rec recorder
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.URL.Path != sd || r.Method != http.MethodPatch {
			return false
		}
		rec.add(r.Header, body)
		if r.Header.Get("If-Match") != `W/"1616690218"` {
			redfishError(w, http.StatusPreconditionFailed, "Base.1.10.PreconditionFailed", "The ETag supplied did not match.")
			return true
		}
		w.WriteHeader(http.StatusNoContent)
		return true
	})
	res, err := c.ApplyBIOS(ctxT(t), map[string]any{"SRIOVSupport": "Enabled"})
	if err != nil {
		t.Fatalf("ApplyBIOS: %v", err)
	}
	body, _ := rec.last()
	if body == nil || body["Attributes"].(map[string]any)["SRIOVSupport"] != "Enabled" || res.Target != sd {
		t.Errorf("ApplyBIOS %+v sent %v to the settings object, want SRIOVSupport Enabled", res, body)
	}
}

// A BMC that answers an action or a PATCH with a redirect (here: a
// trailing slash added, 301 for POST, 308 for PATCH) must still get the
// action, not a GET; a redirect to another host is refused by name.
func testRedirect(t *testing.T) {
	b, e, url := edgeBMC(t, vbmc.Config{Root: mockupDir(t, "dmtf-public-rackmount1"), Username: testUser, Password: testPassword})
	c := dial(t, testConfig(url))
	t.Cleanup(func() { c.Close() })
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/") || !strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") {
			return false
		}
		switch r.Method {
		case http.MethodPost:
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
			return true
		case http.MethodPatch:
			http.Redirect(w, r, r.URL.Path+"/", http.StatusPermanentRedirect)
			return true
		}
		return false
	})
	if err := c.PowerOff(ctxT(t)); err != nil {
		t.Fatalf("PowerOff through a redirect: %v", err)
	}
	if p := b.Power(); p != "Off" {
		t.Errorf("power after a redirected ForceOff: %s, want Off", p)
	}
	if err := c.SetBootOverride(ctxT(t), bmc.BootPxe, "", true); err != nil {
		t.Fatalf("SetBootOverride through a redirect: %v", err)
	}
	if o, _ := c.GetBootOverride(ctxT(t)); o.Target != bmc.BootPxe {
		t.Errorf("boot override after a redirected PATCH: %+v", o)
	}
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "Reset") {
			http.Redirect(w, r, "http://192.0.2.1/redfish/v1/Systems/x/Actions/ComputerSystem.Reset", http.StatusTemporaryRedirect)
			return true
		}
		return false
	})
	err := c.PowerOn(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "192.0.2.1") || !strings.Contains(err.Error(), "Reset") {
		t.Errorf("a redirect to another host: %v, want an error naming the request and the Location", err)
	}
}

// Dell iDRAC 10: virtual media under the System only; InsertMedia refuses
// Inserted and WriteProtected.
func testIDRAC10Media(t *testing.T) {
	const sys = "System.Embedded.1"
	const vm = "/redfish/v1/Systems/" + sys + "/VirtualMedia"
	docs := withSystem(fragmentRoot("Dell", "Dell"), sys, fragmentSystem(sys,
		`{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None", "BootSourceOverrideMode": "UEFI"}`,
		`, "VirtualMedia": {"@odata.id": "`+vm+`"}`))
	docs["/redfish/v1/Managers"] = `{"@odata.id": "/redfish/v1/Managers", "Members": [{"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1"}]}`
	docs["/redfish/v1/Managers/iDRAC.Embedded.1"] = `{"@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1", "@odata.type": "#Manager.v1_19_0.Manager",
		"Id": "iDRAC.Embedded.1", "ManagerType": "BMC", "Model": "17G Monolithic", "FirmwareVersion": "1.20.25.00"}`
	docs[vm] = `{"@odata.id": "` + vm + `", "Members": [{"@odata.id": "` + vm + `/1"}]}`
	docs[vm+"/1"] = `{"@odata.id": "` + vm + `/1", "@odata.type": "#VirtualMedia.v1_6_0.VirtualMedia", "Id": "1",
		"MediaTypes": ["CD", "DVD", "USBStick"], "Inserted": false, "Image": null, "ConnectedVia": "NotConnected",
		"Actions": {"#VirtualMedia.InsertMedia": {"target": "` + vm + `/1/Actions/VirtualMedia.InsertMedia"},
		"#VirtualMedia.EjectMedia": {"target": "` + vm + `/1/Actions/VirtualMedia.EjectMedia"}}}`
	_, e, c := fragmentBMC(t, docs)
	e.setHook(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "InsertMedia") {
			for _, p := range []string{"Inserted", "WriteProtected"} {
				if strings.Contains(string(body), `"`+p+`"`) {
					redfishError(w, http.StatusBadRequest, "Base.1.12.ActionParameterUnknown",
						"The action InsertMedia was submitted with the invalid parameter "+p+".")
					return true
				}
			}
		}
		return false
	})
	const image = "http://192.0.2.10/agent.iso"
	if err := c.InsertMedia(ctxT(t), image); err != nil {
		t.Fatalf("InsertMedia: %v", err)
	}
	var doc struct{ Image string }
	if err := getDoc(t, c, e, vm+"/1", &doc); err != nil || doc.Image != image {
		t.Errorf("virtual media after insert: %+v, %v; want Image %s", doc, err, image)
	}
}

// getDoc reads a resource from the BMC behind e (the edge passes GETs on).
func getDoc(t *testing.T, _ *bmc.Client, e *edge, path string, v any) error {
	t.Helper()
	rec := &responseRecorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	req.SetBasicAuth(testUser, testPassword)
	e.b.ServeHTTP(rec, req)
	if rec.status != 0 && rec.status != http.StatusOK {
		return errors.New(http.StatusText(rec.status))
	}
	return json.Unmarshal(rec.body, v)
}

type responseRecorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *responseRecorder) Header() http.Header { return r.header }
func (r *responseRecorder) WriteHeader(s int)   { r.status = s }
func (r *responseRecorder) Write(b []byte) (int, error) {
	r.body = append(r.body, b...)
	return len(b), nil
}
