package vbmc

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var fuzzMethods = []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete, http.MethodPut, http.MethodHead}

// Request bodies and paths are untrusted bytes: whatever arrives, the BMC
// answers (no panic), never with a 5xx, and always with a JSON body or none.
func FuzzRequest(f *testing.F) {
	console := filepath.Join(f.TempDir(), "console.log")
	if err := os.WriteFile(console, []byte("SeaBIOS\r\nlogin: "), 0o644); err != nil {
		f.Fatal(err)
	}
	cfg := Config{Root: filepath.Join(mockupDir(f), "dmtf-public-tower"), Username: testUser, Password: testPass, Console: console}
	tr, err := loadTree(cfg.Root)
	if err != nil {
		f.Fatal(err)
	}
	sys := "/redfish/v1/Systems/437XR1238R2"
	for _, s := range []struct {
		m    uint8
		path string
		body string
	}{
		{0, "/redfish/v1", ""},
		{1, sessionsPath, `{"UserName":"admin","Password":"s3cret"}`},
		{1, sys + "/Actions/ComputerSystem.Reset", `{"ResetType":"ForceRestart"}`},
		{2, sys, `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`},
		{2, sys, `{"Boot":null}`},
		{2, sys + "/Bios/Settings", `{"Attributes":{"ProcTurboMode":"Disabled","ProcCoreDisable":3}}`},
		{2, sys + "/Bios/Settings", `null`},
		{2, "/redfish/v1/AccountService/Accounts/1", `{"Password":"x","Enabled":false}`},
		{2, "/redfish/v1/AccountService/Accounts/1", `{"Locked":false,"UserName":"root"}`},
		{2, "/redfish/v1/AccountService", `{"AccountLockoutThreshold":1,"AccountLockoutDuration":30,"AccountLockoutCounterResetEnabled":false}`},
		{2, "/redfish/v1/Managers/BMC/VirtualMedia/CD1", `{"Image":null,"Inserted":false}`},
		{3, sessionsPath + "/1", ""},
		{0, "/redfish/v1/../../etc/passwd", ""},
		{0, "/redfish/v1/Managers/BMC/LogServices/SEL/Entries", ""},
		{0, "/redfish/v1/Managers/BMC/LogServices/SEL/Entries/1", ""},
		{5, sys + "/LogServices/HostLogger/Entries/-1", ""},
		{1, "/redfish/v1/Managers/BMC/LogServices/SEL/Actions/LogService.ClearLog", "{}"},
	} {
		f.Add(s.m, s.path, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, m uint8, path string, body []byte) {
		b, err := newBMC(cfg, tr) // fresh state each time, so a failure reproduces
		if err != nil {
			t.Fatal(err)
		}
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req := httptest.NewRequest(method, "http://vbmc.invalid/", bytes.NewReader(body))
		req.URL.Path = path
		req.SetBasicAuth(testUser, testPass)
		w := httptest.NewRecorder()
		b.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q %q: status %d: %s", method, path, body, w.Code, w.Body.Bytes())
		}
		if w.Body.Len() > 0 && method != http.MethodHead {
			var v map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
				t.Fatalf("%s %q: body is not a JSON object: %v", method, path, err)
			}
		}
	})
}
