package bmc_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// movedQuirkCases are the deviations handled before the quirk table
// existed (in boot.go, bios.go, errors.go, transport.go, normalize.go and,
// for the iDRAC settings object with an ETag header, in gofish): they
// passed before and pass now, from the table. seen: the client records
// the quirk as met (SeenQuirks); the pure ones are not.
func movedQuirkCases() map[string]struct {
	quirk string
	seen  bool
	run   func(t *testing.T, c **bmc.Client)
} {
	type qc = struct {
		quirk string
		seen  bool
		run   func(t *testing.T, c **bmc.Client)
	}
	return map[string]qc{
		"error body with HTTP 200":      {"error-body-http-200", true, testErrorBody200},
		"message without ExtendedInfo":  {"error-message-without-extended-info", true, testMessageOnly},
		"numeric firmware ids":          {"numeric-firmware-ids", false, testNumericFirmwareIDs},
		"boot mode as a BIOS attribute": {"boot-mode-bios-attribute", true, testBootModeBIOS},
		"bios settings without object": {"bios-settings-without-object", true, func(t *testing.T, c **bmc.Client) {
			testBIOSFallback(t, c, "gigabyte-ami-h262-z63", "FBO001", "LEGACY", "AMI MegaRAC")
		}},
		"bios without settings": {"bios-without-settings", true, func(t *testing.T, c **bmc.Client) {
			testBIOSFallback(t, c, "hpe-cray-ex235n-a100", "Continue On Error", "Enabled", "HPE Cray EX")
		}},
		"bios if-match refused":  {"bios-if-match-refused", true, testBIOSIfMatch412},
		"bios attribute objects": {"bios-attribute-objects", false, testBIOSAttributeObjects},
		"idrac10 boot settings, etag header": {"boot-override-settings-if-match", true, func(t *testing.T, c **bmc.Client) {
			*c = runIDRACBootSettings(t, true)
		}},
		"ami update component":       {"ami-update-component", true, testAMIUpdateComponent},
		"simple update targets list": {"simple-update-allowable-targets", true, testUpdateTargetsList},
	}
}

// TestQuirkTable: every deviation of bmc.Quirks() has a test here or in
// TestQuirks, with its vendor, behaviour, detection and handling written
// down; the moved ones pass and are recorded as met.
func TestQuirkTable(t *testing.T) {
	tested := map[string]bool{}
	for _, q := range quirkCases() {
		tested[q.quirk] = true
	}
	for name, q := range movedQuirkCases() {
		tested[q.quirk] = true
		t.Run(name, func(t *testing.T) {
			var c *bmc.Client
			q.run(t, &c)
			if q.seen && c != nil && !slices.Contains(c.SeenQuirks(), bmc.Quirk(q.quirk)) {
				t.Errorf("the client did not record quirk %s; it saw %v", q.quirk, c.SeenQuirks())
			}
		})
	}
	for _, q := range bmc.Quirks() {
		if !tested[string(q.Name)] {
			t.Errorf("quirk %s has no test on a fragment", q.Name)
		}
		if q.Vendor == "" || q.Behaviour == "" || q.Detection == "" || q.Handling == "" {
			t.Errorf("quirk %s is not fully described: %+v", q.Name, q)
		}
	}
}

func testErrorBody200(t *testing.T, c **bmc.Client) {
	_, e, url := edgeBMC(t, vbmc.Config{Root: mockupDir(t, "dmtf-public-rackmount1"), Username: testUser, Password: testPassword})
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/Thermal") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"error": {"code": "Base.1.0.InternalError", "message": "sensor daemon not ready"}}`))
			return true
		}
		return false
	})
	*c = dial(t, testConfig(url))
	inv, err := (*c).Inventory(ctxT(t))
	if err != nil || !slices.ContainsFunc(inv.Problems, func(p machine.Problem) bool { return strings.Contains(p.Detail, "sensor daemon not ready") }) {
		t.Errorf("inventory with an error body at 200: %v, problems %+v", err, inv.Problems)
	}
}

// testMessageOnly also shows what a deviation no quirk knows gets: an
// error naming the request, the status and the BMC's message.
func testMessageOnly(t *testing.T, c **bmc.Client) {
	_, e, url := edgeBMC(t, vbmc.Config{Root: mockupDir(t, "dmtf-public-rackmount1"), Username: testUser, Password: testPassword})
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method == http.MethodPatch {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error": {"code": "Base.1.0.GeneralError", "message": "Boot override refused: BIOS setup is open"}}`))
			return true
		}
		return false
	})
	*c = dial(t, testConfig(url))
	err := (*c).SetBootOverride(ctxT(t), bmc.BootPxe, "", true)
	for _, want := range []string{"PATCH /redfish/v1/Systems/437XR1138R2", "HTTP 400", "Base.1.0.GeneralError: Boot override refused: BIOS setup is open"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want it to name %q", err, want)
		}
	}
}

func testNumericFirmwareIDs(t *testing.T, c **bmc.Client) {
	_, url := startBMC(t, "hpe-ilo5-xl675d-a40", vbmc.Faults{})
	*c = dial(t, testConfig(url))
	us, err := (*c).UpdateService(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range us.Items {
		names = append(names, it.Component)
	}
	if got := strings.Join(names, "|"); !strings.Contains(got, "NVIDIA A40 (PCI-E Slot 1)|NVIDIA A40 (PCI-E Slot 2)") || strings.Contains(got, "|4|") {
		t.Errorf("components %s: want names told apart by slot, never the numeric Id", got)
	}
}

func testBootModeBIOS(t *testing.T, c **bmc.Client) {
	const bios = "/redfish/v1/Systems/1/Bios"
	docs := withSystem(fragmentRoot("HPE", "Hpe"), "1", fragmentSystem("1",
		`{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None", `+allowedTargets+`}`, `, "Bios": {"@odata.id": "`+bios+`"}`))
	docs[bios] = `{"@odata.id": "` + bios + `", "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Bios", "Attributes": {"BootMode": "Uefi"},
		"@Redfish.Settings": {"SettingsObject": {"@odata.id": "` + bios + `/Settings"}}}`
	docs[bios+"/Settings"] = `{"@odata.id": "` + bios + `/Settings", "@odata.type": "#Bios.v1_1_0.Bios", "Id": "Settings", "Attributes": {"BootMode": "Uefi"}}`
	b, _, cl := fragmentBMC(t, docs)
	*c = cl
	if err := cl.SetBootMode(ctxT(t), bmc.ModeLegacy); err != nil {
		t.Fatalf("SetBootMode: %v", err)
	}
	if got := b.PendingBIOS("/redfish/v1/Systems/1"); got["BootMode"] != "LegacyBios" {
		t.Errorf("pending BIOS %v, want BootMode LegacyBios", got)
	}
}

func testBIOSFallback(t *testing.T, c **bmc.Client, mockup, attr, value, fallback string) {
	_, url := startBMC(t, mockup, vbmc.Faults{})
	*c = dial(t, testConfig(url))
	res, err := (*c).ApplyBIOS(ctxT(t), map[string]any{attr: value})
	if err != nil || !strings.Contains(res.Fallback, fallback) || len(res.Changed) != 1 {
		t.Errorf("ApplyBIOS on %s: %+v, %v; want %s changed by the %s fallback", mockup, res, err, attr, fallback)
	}
}

func testBIOSIfMatch412(t *testing.T, c **bmc.Client) {
	_, e, url := edgeBMC(t, vbmc.Config{Root: mockupDir(t, "dmtf-public-rackmount1"), Username: testUser, Password: testPassword})
	var withIfMatch, without int
	e.setHook(func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if r.Method != http.MethodPatch || !strings.HasSuffix(r.URL.Path, "/Bios/Settings") {
			return false
		}
		if r.Header.Get("If-Match") != "" {
			withIfMatch++
			redfishError(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.")
			return true
		}
		without++
		return false
	})
	*c = dial(t, testConfig(url))
	if _, err := (*c).ApplyBIOS(ctxT(t), map[string]any{"ProcTurboMode": "Disabled"}); err != nil || withIfMatch != 1 || without != 1 {
		t.Errorf("ApplyBIOS: %v; PATCHes with If-Match %d, without %d; want 1 and 1", err, withIfMatch, without)
	}
}

func testBIOSAttributeObjects(t *testing.T, c **bmc.Client) {
	_, url := startBMC(t, "hpe-cray-ex235n-a100", vbmc.Faults{})
	*c = dial(t, testConfig(url))
	bad, err := (*c).VerifyBIOS(ctxT(t), map[string]any{"Continue On Error": "Disabled"})
	if err != nil || len(bad) != 0 {
		t.Errorf("VerifyBIOS of a current_value: %v, %v", bad, err)
	}
}

func runIDRACBootSettings(t *testing.T, withHeader bool) *bmc.Client {
	var c *bmc.Client
	testIDRACBootSettingsClient(t, withHeader, &c)
	return c
}

// testAMIUpdateComponent: the captured GIGABYTE (AMI MegaRAC) ActionInfo
// lists UpdateComponent; a CPLD update names it instead of Targets.
func testAMIUpdateComponent(t *testing.T, c **bmc.Client) {
	_, e, url := edgeBMC(t, vbmc.Config{Root: mockupDir(t, "gigabyte-ami-h262-z63"), Username: testUser, Password: testPassword})
	var body map[string]any
	e.setHook(func(w http.ResponseWriter, r *http.Request, b []byte) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/SimpleUpdate") {
			_ = json.Unmarshal(b, &body)
			w.Header().Set("Location", "/redfish/v1/TaskService/Tasks/1")
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	})
	*c = dial(t, testConfig(url))
	us, err := (*c).UpdateService(ctxT(t))
	if err != nil || !slices.Contains(us.UpdateComponents, "MB_CPLD") {
		t.Fatalf("UpdateService: %+v, %v", us.UpdateComponents, err)
	}
	st, err := (*c).StartUpdate(ctxT(t), us, bmc.UpdateRequest{ImageURI: "http://192.0.2.10/cpld.bin",
		Targets: []string{"/redfish/v1/UpdateService/FirmwareInventory/MB_CPLD1"}})
	if err != nil || body["UpdateComponent"] != "MB_CPLD" || body["Targets"] != nil || body["TransferProtocol"] != "HTTP" || st.Task == "" {
		t.Errorf("SimpleUpdate sent %v (start %+v, %v); want UpdateComponent MB_CPLD, TransferProtocol HTTP, no Targets", body, st, err)
	}
}

// testUpdateTargetsList: the captured HPE Cray ActionInfo lists the
// targets SimpleUpdate takes; a GPU VBIOS is not one of them.
func testUpdateTargetsList(t *testing.T, c **bmc.Client) {
	b, url := startBMC(t, "hpe-cray-ex235n-a100", vbmc.Faults{})
	*c = dial(t, testConfig(url))
	us, err := (*c).UpdateService(ctxT(t))
	if err != nil || len(us.AllowedTargets) != 8 {
		t.Fatalf("UpdateService: %d allowed targets, %v; want 8", len(us.AllowedTargets), err)
	}
	_, err = (*c).StartUpdate(ctxT(t), us, bmc.UpdateRequest{ImageURI: "http://192.0.2.10/vbios.bin",
		Targets: []string{"/redfish/v1/UpdateService/FirmwareInventory/Node0.Acc0.VBIOS"}})
	if !bmc.IsKind(err, bmc.KindInvalid) || !strings.Contains(err.Error(), "Node0.Acc0.VBIOS") || b.UpdateStats().Starts != 0 {
		t.Errorf("a target outside the list: %v (starts %d); want refused before sending", err, b.UpdateStats().Starts)
	}
}
