package apiserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// evidenceBMC serves a virtual BMC (console "" keeps no serial console)
// and a DialBMCLogs that reaches it for every machine, through
// BMCLogsDialer with an env: credential.
func evidenceBMC(t *testing.T, console string) (*vbmc.BMC, string, DialBMCLogs) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "..", "..", "testdata", "redfish-mockups", "dmtf-public-tower")
	b, err := vbmc.New(vbmc.Config{Root: root, Username: "admin", Password: "s3cret-pass", Console: console})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	policy := credential.Policy{EnvPrefix: "INGOT_BMC_", Getenv: func(string) string { return "username=admin\npassword=s3cret-pass\n" }}
	dial := BMCLogsDialer(func() credential.Policy { return policy }, nil)
	return b, srv.URL, func(ctx context.Context, m *machine.Machine) (BMCLogReader, error) {
		at := *m
		at.BMC = machine.BMC{Endpoint: srv.URL, CredentialRef: "env:INGOT_BMC_" + m.Name, Insecure: true} // plain http: a test BMC
		return dial(ctx, &at)
	}
}

// reimageEvidence starts node1's reimage, lets during(job start) happen
// and returns the files of the job's evidence bundle by name.
func reimageEvidence(t *testing.T, f *fixture, during func()) map[string]string {
	t.Helper()
	code, body := f.do(t, "POST", "/api/v1/reimage", f.operator, wire.ReimageRequest{Machines: []string{"node1"}})
	if code != 202 {
		t.Fatalf("reimage: %d %s", code, body)
	}
	var res []wire.ReimageResult
	json.Unmarshal(body, &res)
	m, _ := f.s.GetMachine(context.Background(), "node1")
	f.waitBooting(t, m.ID)
	during()
	code, body = f.do(t, "GET", "/api/v1/jobs/"+res[0].Job.ID+"/evidence", f.operator, nil)
	if code != 200 {
		t.Fatalf("evidence: %d %s", code, body)
	}
	gz, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		name, ok := strings.CutPrefix(h.Name, res[0].Job.ID+"/")
		if !ok {
			t.Errorf("%s: not under the job's folder", h.Name)
		}
		files[name] = string(b)
	}
	files["job id"] = res[0].Job.ID
	return files
}

// A job's evidence bundle holds the job, the recipe it ran, the machine's
// events during it, the BMC's event log since the job started (not
// before), the serial console, and a README naming every file and what
// was not collected.
func TestEvidenceBundle(t *testing.T) {
	console := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(console, []byte("iPXE 1.21.1\r\nhttp://10.77.0.1:8080/boot.ipxe... ok\r\nkernel panic: VFS: unable to mount root fs\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, url, dial := evidenceBMC(t, console)
	b.AddLogEntry(vbmc.LogEntry{Message: "an old fan alarm", Severity: "Warning", Created: time.Now().Add(-2 * time.Hour)})
	f := newFixture(t, func(c *Config) { c.DialBMCLogs = dial })
	files := reimageEvidence(t, f, func() {
		b.AddLogEntry(vbmc.LogEntry{Message: "PSU 2 lost input", Severity: "Critical", SensorType: "Power Supply / Converter"})
		c, err := bmc.Dial(context.Background(), bmc.Config{Endpoint: url, Username: "admin", Password: "s3cret-pass"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetBootOverride(context.Background(), "Pxe", "", true); err != nil {
			t.Fatal(err)
		}
	})
	for name, want := range map[string]string{"README.txt": "sel.txt", "job.json": files["job id"], "recipe.json": `"lab-qemu"`,
		"events.json": "reimage requested", "restore.txt": "time to restore",
		"sel.txt": "Critical  Managers/BMC/LogServices/SEL: PSU 2 lost input (Power Supply / Converter)", "sel.json": `"message": "Boot source override set: Pxe (Once)."`,
		"console.log": "iPXE 1.21.1\nhttp://10.77.0.1:8080/boot.ipxe... ok\nkernel panic: VFS: unable to mount root fs\n"} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s lacks %q:\n%.600s", name, want, files[name])
		}
	}
	if strings.Contains(files["sel.txt"], "old fan alarm") {
		t.Errorf("sel.txt holds an entry from before the job:\n%s", files["sel.txt"])
	}
	if strings.Contains(files["README.txt"], "serial console of node1") || strings.Contains(files["README.txt"], "event log (SEL) of") {
		t.Errorf("README says the BMC's logs were not collected:\n%s", files["README.txt"])
	}
	if code, _ := f.do(t, "GET", "/api/v1/jobs/j-nope/evidence", f.operator, nil); code != 404 {
		t.Errorf("unknown job: %d", code)
	}
}

// What the BMC part could not collect, the README says, and why.
func TestEvidenceBundleMissingBMCLogs(t *testing.T) {
	_, _, noConsole := evidenceBMC(t, "")
	refused := func(ctx context.Context, m *machine.Machine) (BMCLogReader, error) {
		ln := httptest.NewServer(nil)
		ln.Close() // nothing listens there any more
		c, err := bmc.Dial(ctx, bmc.Config{Endpoint: ln.URL, Retries: -1})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	for name, tc := range map[string]struct {
		dial DialBMCLogs
		want []string
		sel  bool
	}{
		"no serial console": {noConsole, []string{"serial console of node1: the BMC offers none"}, true},
		"BMC unreachable":   {refused, []string{"the BMC's event log (SEL) and serial console of node1: BMC unreachable: bmc http://127.0.0.1:"}, false},
		"no BMC access":     {nil, []string{"the BMC's event log (SEL) and serial console of node1: not collected: this server was started without BMC access"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.DialBMCLogs = tc.dial })
			files := reimageEvidence(t, f, func() {})
			readme := files["README.txt"]
			if !strings.Contains(readme, "Not collected:") {
				t.Errorf("README has no Not collected section:\n%s", readme)
			}
			for _, w := range tc.want {
				if !strings.Contains(readme, w) {
					t.Errorf("README lacks %q:\n%s", w, readme)
				}
			}
			if _, ok := files["sel.txt"]; ok != tc.sel {
				t.Errorf("sel.txt in the bundle: %v, want %v", ok, tc.sel)
			}
			if _, ok := files["console.log"]; ok {
				t.Error("console.log in the bundle")
			}
		})
	}
}
