package bmc_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// startLogBMC serves mockup name with a serial console file (console ""
// serves none).
func startLogBMC(t *testing.T, name, console string) (*vbmc.BMC, *bmc.Client) {
	t.Helper()
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, name), Username: testUser, Password: testPassword, Console: console, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	c := dial(t, testConfig(srv.URL))
	t.Cleanup(func() { c.Close() })
	return b, c
}

// Every mockup reads: an empty log where the BMC has logged nothing (the
// mockups' own LogServices links answer 404), then what the BMC logged.
func TestEventLogEveryMockup(t *testing.T) {
	for _, name := range mockups {
		t.Run(name, func(t *testing.T) {
			b, c := startLogBMC(t, name, "")
			ctx := context.Background()
			got, err := c.EventLog(ctx, time.Time{}, 0)
			if err != nil || len(got) != 0 {
				t.Fatalf("EventLog of a fresh BMC: %d entries, %v; want none, no error", len(got), err)
			}
			b.AddLogEntry(vbmc.LogEntry{Message: "PSU 2 lost input", Severity: "Critical", SensorType: "Power Supply / Converter", MessageID: "Test.1.0.PSU"})
			got, err = c.EventLog(ctx, time.Time{}, 0)
			if err != nil || len(got) != 1 {
				t.Fatalf("EventLog: %v, %v; want 1 entry", got, err)
			}
			e := got[0]
			if e.Message != "PSU 2 lost input" || e.Severity != "Critical" || e.SensorType != "Power Supply / Converter" ||
				e.MessageID != "Test.1.0.PSU" || e.ID != "1" || !strings.HasSuffix(e.Service, "/LogServices/SEL") || e.Created.IsZero() {
				t.Errorf("entry: %+v", e)
			}
		})
	}
}

// What ingot does to a machine shows in its event log: the boot override
// and the power cycle, since the time asked, oldest first, the oldest cut
// by max.
func TestEventLogSince(t *testing.T) {
	b, c := startLogBMC(t, "dmtf-public-rackmount1", "")
	ctx := context.Background()
	b.AddLogEntry(vbmc.LogEntry{Message: "before the job", Created: time.Now().Add(-time.Hour)})
	b.AddLogEntry(vbmc.LogEntry{Message: "clock unset", CreatedRaw: "1970-01-01T00:00:00Z"})
	b.AddLogEntry(vbmc.LogEntry{Message: "garbage date", CreatedRaw: "yesterday"})
	since := time.Now().Add(-time.Second)
	if err := c.SetBootOverride(ctx, "Pxe", "", true); err != nil {
		t.Fatal(err)
	}
	if err := c.PowerCycle(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.EventLog(ctx, since, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.MessageID)
		if e.Service != "Managers/BMC/LogServices/SEL" || e.Created.Before(since) {
			t.Errorf("entry %+v: want the SEL's, created since %v", e, since)
		}
	}
	want := []string{"VBMC.1.0.BootOverrideSet", "VBMC.1.0.HostPoweredOff", "VBMC.1.0.HostPoweredOn", "VBMC.1.0.BootOverrideUsed"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("MessageIds since the job started (-want +got):\n%s", diff)
	}
	all, err := c.EventLog(ctx, time.Time{}, 0)
	if err != nil || len(all) != 7 || !all[0].Created.IsZero() || !all[1].Created.IsZero() || all[2].Message != "before the job" {
		t.Errorf("the whole log, undated first: %v, %v", all, err)
	}
	last, err := c.EventLog(ctx, time.Time{}, 2)
	if err != nil || len(last) != 2 || last[1].MessageID != "VBMC.1.0.BootOverrideUsed" {
		t.Errorf("max 2: %v, %v; want the newest 2", last, err)
	}
}

// A log longer than a page is read through its nextLinks.
func TestEventLogPages(t *testing.T) {
	b, c := startLogBMC(t, "dmtf-public-tower", "")
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 130 {
		b.AddLogEntry(vbmc.LogEntry{Message: fmt.Sprint("entry ", i), Created: t0.Add(time.Duration(i) * time.Second)})
	}
	got, err := c.EventLog(context.Background(), t0.Add(100*time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 30 || got[0].Message != "entry 100" || got[29].Message != "entry 129" {
		t.Errorf("since entry 100: %d entries, first %q", len(got), got[0].Message)
	}
}

// The serial console is the tail of what the host printed, whole lines,
// read from its last pages; a BMC without one says so.
func TestSerialConsole(t *testing.T) {
	console := filepath.Join(t.TempDir(), "console.log")
	var sb strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&sb, "boot line %04d\r\n", i)
	}
	sb.WriteString("login: ")
	if err := os.WriteFile(console, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b, c := startLogBMC(t, "dmtf-public-tower", console)
	ctx := context.Background()
	before := b.Stats().Requests
	out, err := c.SerialConsole(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := "boot line 2994\nboot line 2995\nboot line 2996\nboot line 2997\nboot line 2998\nboot line 2999\nlogin: \n"
	if string(out) != want {
		t.Errorf("last 100 bytes:\n%q\nwant\n%q", out, want)
	}
	if n := b.Stats().Requests - before; n > 12 {
		t.Errorf("%d requests for the console's tail, want it read from its last page (at most 12)", n)
	}
	all, err := c.SerialConsole(ctx, 0)
	if err != nil || !strings.HasPrefix(string(all), "boot line 0000\nboot line 0001\n") || !strings.HasSuffix(string(all), "login: \n") {
		t.Errorf("whole console (%d bytes): %.60q ... %v", len(all), all, err)
	}

	_, plain := startLogBMC(t, "dmtf-public-tower", "")
	_, err = plain.SerialConsole(ctx, 0)
	if !errors.Is(err, bmc.ErrNoConsole) || !bmc.IsKind(err, bmc.KindUnsupported) {
		t.Errorf("SerialConsole without one: %v, want ErrNoConsole of KindUnsupported", err)
	}
}

// A BMC that does not answer fails the read (no silent empty log).
func TestEventLogUnanswered(t *testing.T) {
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, "dmtf-public-tower"), Username: testUser, Password: testPassword,
		Faults: vbmc.Faults{Hang: []string{"/redfish/v1/Managers/BMC/LogServices"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	cfg.ReadTimeout, cfg.Retries = 200*time.Millisecond, -1
	c := dial(t, cfg)
	defer c.Close()
	got, err := c.EventLog(context.Background(), time.Time{}, 0)
	if err == nil || !bmc.IsKind(err, bmc.KindTimeout) {
		t.Errorf("EventLog of a hung log: %v, %v; want a timeout", got, err)
	}
}

// writeTree writes Redfish resources (path -> JSON) as a mockup in the
// DMTF layout and returns its root.
func writeTree(t *testing.T, docs map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range docs {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(p, "/")))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A log whose collection lists its entries as links only (HPE iLO's IML
// without $expand) is read: expanded where the BMC expands, else entry by
// entry.
func TestEventLogLinkedEntries(t *testing.T) {
	const iml = "/redfish/v1/Systems/1/LogServices/IML"
	docs := map[string]string{
		"/redfish/v1/Systems":               `{"@odata.id": "/redfish/v1/Systems", "Members": [{"@odata.id": "/redfish/v1/Systems/1"}]}`,
		"/redfish/v1/Systems/1":             `{"@odata.id": "/redfish/v1/Systems/1", "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem", "Id": "1", "LogServices": {"@odata.id": "/redfish/v1/Systems/1/LogServices"}}`,
		"/redfish/v1/Systems/1/LogServices": `{"@odata.id": "/redfish/v1/Systems/1/LogServices", "Members": [{"@odata.id": "` + iml + `"}]}`,
		iml:                                 `{"@odata.id": "` + iml + `", "@odata.type": "#LogService.v1_0_0.LogService", "Id": "IML", "Entries": {"@odata.id": "` + iml + `/Entries"}}`,
		iml + "/Entries":                    `{"@odata.id": "` + iml + `/Entries", "Members@odata.count": 2, "Members": [{"@odata.id": "` + iml + `/Entries/1"}, {"@odata.id": "` + iml + `/Entries/2"}]}`,
		iml + "/Entries/1":                  `{"@odata.id": "` + iml + `/Entries/1", "Id": "1", "Created": "2025-03-04T05:06:07Z", "Severity": "Critical", "Message": "Uncorrectable Memory Error (Processor 1, DIMM 3)", "EntryType": "Oem"}`,
		iml + "/Entries/2":                  `{"@odata.id": "` + iml + `/Entries/2", "Id": "2", "Created": "2025-03-04T05:07:07Z", "Severity": "OK", "Message": "Server power restored.", "EntryType": "Oem"}`,
	}
	for name, root := range map[string]string{
		"entry by entry": `{"@odata.id": "/redfish/v1", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Systems": {"@odata.id": "/redfish/v1/Systems"}}`,
		"expanded": `{"@odata.id": "/redfish/v1", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot", "Systems": {"@odata.id": "/redfish/v1/Systems"},
			"ProtocolFeaturesSupported": {"ExpandQuery": {"ExpandAll": true, "NoLinks": true, "Levels": true, "MaxLevels": 2}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			docs["/redfish/v1"] = root
			b, err := vbmc.New(vbmc.Config{Root: writeTree(t, docs)})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(b)
			t.Cleanup(srv.Close)
			c := dial(t, testConfig(srv.URL))
			defer c.Close()
			got, err := c.EventLog(context.Background(), time.Date(2025, 3, 4, 0, 0, 0, 0, time.UTC), 0)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, e := range got {
				if e.Service == "Systems/1/LogServices/IML" {
					msgs = append(msgs, e.Severity+" "+e.Message)
				}
			}
			want := []string{"Critical Uncorrectable Memory Error (Processor 1, DIMM 3)", "OK Server power restored."}
			if diff := cmp.Diff(want, msgs); diff != "" {
				t.Errorf("IML entries (-want +got):\n%s", diff)
			}
		})
	}
}
