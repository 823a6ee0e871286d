//go:build integration

package vbmc

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// needProgram skips (in CI: fails) unless prog exists. These clients talk to
// a BMC on 127.0.0.1, so neither root nor a namespace is needed.
func needProgram(t testing.TB, prog string) string {
	t.Helper()
	netnstest.NeedPrograms(t, prog)
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// interopSystems is, per mockup, the System the clients reset.
var interopSystems = map[string]string{
	"dmtf-public-rackmount1":      "/redfish/v1/Systems/437XR1138R2",
	"dmtf-public-tower":           "/redfish/v1/Systems/437XR1238R2",
	"gigabyte-ami-h262-z63":       "/redfish/v1/Systems/Self",
	"hpe-cray-ex235n-a100":        "/redfish/v1/Systems/Node1",
	"supermicro-hgx-b200-partial": "/redfish/v1/Systems/1",
}

func runClient(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// python-requests lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE override the
	// CA a library passes (sushy's verify=), so keep them out.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Debian's redfishtool reads the systems and resets one, with basic and
// with session authentication; its sessions are logged out.
func TestIntegrationRedfishtool(t *testing.T) {
	rt := needProgram(t, "redfishtool")
	for m, sys := range interopSystems {
		t.Run(m, func(t *testing.T) {
			b, c := start(t, m, nil)
			host := strings.TrimPrefix(c.base, "http://")
			base := []string{"-r", host, "-u", testUser, "-p", testPass, "-S", "Never", "-T", "20"}
			out := runClient(t, rt, append(base, "Systems")...)
			if !strings.Contains(out, `"`+sys+`"`) {
				t.Errorf("redfishtool Systems does not list %s:\n%s", sys, out)
			}
			runClient(t, rt, append(base, "Systems", "-L", sys, "reset", "ForceOff")...)
			if p := b.PowerOf(sys); p != "Off" {
				t.Errorf("after redfishtool reset ForceOff: PowerState %q", p)
			}
			out = runClient(t, rt, append(base, "-A", "Session", "Systems", "-L", sys, "-P", "PowerState", "get")...)
			if !strings.Contains(out, `"Off"`) {
				t.Errorf("redfishtool (session auth) PowerState:\n%s", out)
			}
			runClient(t, rt, append(base, "-A", "Session", "Systems", "-L", sys, "reset", "On")...)
			if p := b.PowerOf(sys); p != "On" {
				t.Errorf("after redfishtool reset On: PowerState %q", p)
			}
			if n := b.OpenSessions(); n != 0 {
				t.Errorf("redfishtool left %d sessions open", n)
			}
		})
	}
}

// sushyScript reads the systems, resets one off and on, and reports.
const sushyScript = `
import json, sys, sushy
url, user, pw, sysid, ca = sys.argv[1:6]
s = sushy.Sushy(url + '/redfish/v1', username=user, password=pw, verify=ca if ca else True)
out = {'systems': sorted(s.get_system_collection().members_identities)}
system = s.get_system(sysid)
out['before'] = str(system.power_state.value)
out['allowed'] = sorted(str(v.value) for v in system.get_allowed_reset_system_values())
system.reset_system(sushy.ResetType.FORCE_OFF)
system.refresh()
out['off'] = str(system.power_state.value)
system.reset_system(sushy.ResetType.ON)
system.refresh()
out['on'] = str(system.power_state.value)
s._conn.close()
del system, s
print(json.dumps(out))
`

// python3-sushy (OpenStack Ironic's Redfish library) reads the systems and
// resets one, over HTTP and over HTTPS verifying the BMC's self-signed
// certificate (pinned as sushy's CA bundle).
func TestIntegrationSushy(t *testing.T) {
	py := needProgram(t, "/usr/bin/python3")
	netnstest.NeedNoError(t, "python3-sushy for /usr/bin/python3", exec.Command(py, "-c", "import sushy").Run())
	script := filepath.Join(t.TempDir(), "sushy_reset.py")
	if err := os.WriteFile(script, []byte(sushyScript), 0o644); err != nil {
		t.Fatal(err)
	}
	for m, sys := range interopSystems {
		for _, scheme := range []string{"http", "https"} {
			t.Run(m+"/"+scheme, func(t *testing.T) {
				b, err := New(Config{Root: filepath.Join(mockupDir(t), m), Username: testUser, Password: testPass})
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewUnstartedServer(b)
				ca := ""
				if scheme == "https" {
					conf, pemCert, _, err := SelfSigned([]string{"127.0.0.1"}, time.Now())
					if err != nil {
						t.Fatal(err)
					}
					ca = filepath.Join(t.TempDir(), "bmc.pem")
					if err := os.WriteFile(ca, pemCert, 0o644); err != nil {
						t.Fatal(err)
					}
					srv.TLS = conf
					srv.StartTLS()
				} else {
					srv.Start()
				}
				defer srv.Close()
				out := runClient(t, py, script, srv.URL, testUser, testPass, sys, ca)
				var got struct {
					Systems         []string
					Before, Off, On string
					Allowed         []string
				}
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
					t.Fatalf("sushy output: %v\n%s", err, out)
				}
				if !slices.Contains(got.Systems, sys) {
					t.Errorf("sushy systems %q lack %s", got.Systems, sys)
				}
				if got.Before != "On" || got.Off != "Off" || got.On != "On" {
					t.Errorf("sushy power states before/off/on = %q/%q/%q, want On/Off/On", got.Before, got.Off, got.On)
				}
				if p := b.PowerOf(sys); p != "On" {
					t.Errorf("BMC PowerState %q after sushy reset On", p)
				}
				if n := b.OpenSessions(); n != 0 {
					t.Errorf("sushy left %d sessions open", n)
				}
			})
		}
	}
}
