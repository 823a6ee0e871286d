package evidence

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/bmc"
)

// untar returns the files of a bundle by name.
func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = string(data)
	}
}

// The BMC's event log goes in as text for people and as JSON, the console
// as it is; parts not read are left out and the README says why.
func TestWriteBMCLogs(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	b := Bundle{Taken: at, Console: []byte("login: \n"), EventLog: &EventLog{BMC: "https://10.0.0.5", Since: at.Add(-time.Hour),
		Entries: []bmc.LogEntry{{Created: at, Severity: "Critical", Message: "PSU 2 lost input", MessageID: "PSU0003",
			SensorType: "Power Supply / Converter", Service: "Managers/iDRAC.Embedded.1/LogServices/Sel", ID: "2"}}}}
	var buf bytes.Buffer
	if err := Write(&buf, "j-1", b); err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())
	want := "# event log (SEL) of the BMC https://10.0.0.5 since 2025-03-04T04:06:07Z: 1 entry, oldest first\n" +
		"2025-03-04T05:06:07Z  Critical  Managers/iDRAC.Embedded.1/LogServices/Sel: PSU 2 lost input [PSU0003] (Power Supply / Converter)\n"
	if diff := cmp.Diff(want, files["j-1/sel.txt"]); diff != "" {
		t.Errorf("sel.txt (-want +got):\n%s", diff)
	}
	if !strings.Contains(files["j-1/sel.json"], `"message_id": "PSU0003"`) || files["j-1/console.log"] != "login: \n" {
		t.Errorf("sel.json or console.log:\n%s\n%q", files["j-1/sel.json"], files["j-1/console.log"])
	}

	buf.Reset()
	b = Bundle{Taken: at, Missing: []string{"serial console of node1: the BMC offers none"}}
	if err := Write(&buf, "j-2", b); err != nil {
		t.Fatal(err)
	}
	files = untar(t, buf.Bytes())
	for _, name := range []string{"j-2/sel.txt", "j-2/sel.json", "j-2/console.log"} {
		if _, ok := files[name]; ok {
			t.Errorf("%s written though nothing was read", name)
		}
	}
	if !strings.Contains(files["j-2/README.txt"], "Not collected:\n- serial console of node1: the BMC offers none\n") {
		t.Errorf("README:\n%s", files["j-2/README.txt"])
	}
}
