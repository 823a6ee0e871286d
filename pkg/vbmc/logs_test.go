package vbmc

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// entries returns the Members of a LogEntryCollection page.
func entries(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	ms, ok := body["Members"].([]any)
	if !ok {
		t.Fatalf("Members: expected an array: %v", body)
	}
	out := make([]map[string]any, len(ms))
	for i, m := range ms {
		out[i] = m.(map[string]any)
	}
	return out
}

func field(ms []map[string]any, k string) []string {
	var out []string
	for _, m := range ms {
		s, _ := m[k].(string)
		out = append(out, s)
	}
	return out
}

// A reset and a boot override leave entries in the SEL, on the BMC's
// clock, found from the Manager's LogServices link as Redfish lays it out.
func TestEventLogRecordsPowerAndBoot(t *testing.T) {
	clock := newFakeClock()
	b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Now = clock.Now })
	sys := c.firstSystem()
	c.do(http.MethodPatch, sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}).
		want(t, http.StatusOK, "set the boot override")
	clock.advance(time.Minute)
	c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "ForceRestart"}).
		want(t, http.StatusNoContent, "ForceRestart")

	coll := c.get("/redfish/v1/Managers/BMC")["LogServices"].(map[string]any)["@odata.id"].(string)
	svcs := entries(t, c.get(coll))
	if got := field(svcs, "@odata.id"); !slices.Contains(got, coll+"/SEL") {
		t.Fatalf("LogServices members %v lack %s/SEL", got, coll)
	}
	svc := c.get(coll + "/SEL")
	if svc["LogEntryType"] != "SEL" || svc["Id"] != "SEL" {
		t.Errorf("SEL service: %v", svc)
	}
	page := c.get(svc["Entries"].(map[string]any)["@odata.id"].(string))
	es := entries(t, page)
	want := []string{"VBMC.1.0.BootOverrideSet", "VBMC.1.0.HostPoweredOff", "VBMC.1.0.HostPoweredOn", "VBMC.1.0.BootOverrideUsed"}
	if diff := cmp.Diff(want, field(es, "MessageId")); diff != "" {
		t.Fatalf("MessageIds (-want +got):\n%s", diff)
	}
	t0 := newFakeClock().Now()
	wantCreated := []string{t0.Format(time.RFC3339)}
	for range 3 {
		wantCreated = append(wantCreated, t0.Add(time.Minute).Format(time.RFC3339))
	}
	if diff := cmp.Diff(wantCreated, field(es, "Created")); diff != "" {
		t.Errorf("Created (-want +got):\n%s", diff)
	}
	if es[0]["Message"] != "Boot source override set: Pxe (Once)." || es[0]["EntryType"] != "SEL" || es[0]["Severity"] != "OK" {
		t.Errorf("first entry: %v", es[0])
	}
	if fmt.Sprint(page["Members@odata.count"]) != "4" {
		t.Errorf("Members@odata.count = %v, want 4", page["Members@odata.count"])
	}
	one := c.get(es[2]["@odata.id"].(string))
	if one["Message"] != "The host was powered on (ResetType ForceRestart)." {
		t.Errorf("entry 3: %v", one)
	}
	if got := len(b.LogEntries()); got != 4 {
		t.Errorf("LogEntries: %d, want 4", got)
	}
}

// The SEL pages 50 entries at a time with a nextLink, honours $skip and
// $top, refuses a bad one, and keeps its newest selCapacity entries.
func TestEventLogPagingAndCapacity(t *testing.T) {
	b, c := start(t, "dmtf-public-rackmount1", nil)
	for i := range 120 {
		b.AddLogEntry(LogEntry{Message: fmt.Sprintf("entry %d", i), Severity: "Warning", SensorType: "Fan"})
	}
	entriesURI := "/redfish/v1/Managers/BMC/LogServices/SEL/Entries"
	var ids []string
	next := entriesURI
	for next != "" {
		page := c.get(next)
		ids = append(ids, field(entries(t, page), "Id")...)
		next, _ = page["Members@odata.nextLink"].(string)
	}
	if len(ids) != 120 || ids[0] != "1" || ids[119] != "120" {
		t.Fatalf("paged through %d entries (%v ... ), want 120 from 1 to 120", len(ids), ids[:min(3, len(ids))])
	}
	page := c.get(entriesURI + "?$skip=115&$top=10")
	if got := field(entries(t, page), "Id"); !slices.Equal(got, []string{"116", "117", "118", "119", "120"}) {
		t.Errorf("$skip=115&$top=10: %v", got)
	}
	if r := c.do(http.MethodGet, entriesURI+"?$skip=-1", nil); r.status != http.StatusBadRequest {
		t.Errorf("$skip=-1: status %d, want 400", r.status)
	}
	for i := range selCapacity {
		b.AddLogEntry(LogEntry{Message: fmt.Sprint("more ", i)})
	}
	got := b.LogEntries()
	if len(got) != selCapacity || got[0].ID != "121" {
		t.Errorf("after %d entries: %d kept, first %s; want %d from 121", 120+selCapacity, len(got), got[0].ID, selCapacity)
	}
}

// A scenario step's Log enters the SEL when the step comes into force,
// dated at its start; a malformed date is served as given.
func TestEventLogScripted(t *testing.T) {
	clock := newFakeClock()
	b, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) { cfg.Now = clock.Now })
	t0 := clock.Now()
	if err := b.Script(Scenario{Steps: []Step{{At: 2 * time.Minute, FanFailed: "Fan1",
		Log: []LogEntry{{Message: "Fan 1 failed", Severity: "Critical", SensorType: "Fan"}, {Message: "clock unset", CreatedRaw: "1970-01-01T00:00:00"}}}}}); err != nil {
		t.Fatal(err)
	}
	const uri = "/redfish/v1/Managers/BMC/LogServices/SEL/Entries"
	if n := len(entries(t, c.get(uri))); n != 0 {
		t.Fatalf("%d entries before the step, want 0", n)
	}
	clock.advance(3 * time.Minute)
	es := entries(t, c.get(uri))
	if diff := cmp.Diff([]string{t0.Add(2 * time.Minute).Format(time.RFC3339), "1970-01-01T00:00:00"}, field(es, "Created")); diff != "" {
		t.Errorf("Created (-want +got):\n%s", diff)
	}
	if es[0]["Severity"] != "Critical" || es[0]["SensorType"] != "Fan" {
		t.Errorf("scripted entry: %v", es[0])
	}
	clock.advance(time.Hour)
	if n := len(entries(t, c.get(uri))); n != 2 {
		t.Errorf("%d entries later, want the step's 2 logged once", n)
	}
}

// Config.Console is served as OpenBMC's HostLogger under the System, a
// line an entry; without it the BMC offers no console.
func TestSerialConsoleLog(t *testing.T) {
	console := filepath.Join(t.TempDir(), "console.log")
	_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Console = console })
	sys := c.firstSystem()
	coll := sys + "/LogServices"
	if got := field(entries(t, c.get(coll)), "@odata.id"); !slices.Equal(got, []string{coll + "/HostLogger"}) {
		t.Fatalf("System LogServices: %v", got)
	}
	if n := len(entries(t, c.get(coll+"/HostLogger/Entries"))); n != 0 {
		t.Errorf("%d console lines before the host ran, want 0", n)
	}
	if err := os.WriteFile(console, []byte("SeaBIOS\r\niPXE 1.21\nLinux version 6.1\nlogin: "), 0o644); err != nil {
		t.Fatal(err)
	}
	es := entries(t, c.get(coll+"/HostLogger/Entries"))
	if diff := cmp.Diff([]string{"SeaBIOS", "iPXE 1.21", "Linux version 6.1", "login: "}, field(es, "Message")); diff != "" {
		t.Errorf("console lines (-want +got):\n%s", diff)
	}
	if es[1]["EntryType"] != "Oem" || es[1]["OemRecordFormat"] != "Host Logger Entry" {
		t.Errorf("console entry: %v", es[1])
	}
	if got := c.get(coll + "/HostLogger/Entries/2")["Message"]; got != "Linux version 6.1" {
		t.Errorf("entry 2: %v", got)
	}

	_, plain := start(t, "dmtf-public-tower", nil)
	plain.do(http.MethodGet, coll+"/HostLogger", nil).want(t, http.StatusNotFound, "HostLogger without Config.Console")
}

// A Manager without a LogServices link gets one (HPE iLO 5 synthetic); a
// mockup without Managers keeps its SEL under the first System.
func TestEventLogPlacement(t *testing.T) {
	_, c := start(t, "hpe-ilo5-xl675d-a40", nil)
	l, _ := c.get("/redfish/v1/Managers/1")["LogServices"].(map[string]any)
	if l["@odata.id"] != "/redfish/v1/Managers/1/LogServices" {
		t.Errorf("Manager LogServices link: %v", l)
	}
	c.get("/redfish/v1/Managers/1/LogServices/SEL/Entries")

	_, c = start(t, "supermicro-hgx-b200-partial", nil)
	c.get("/redfish/v1/Systems/1/LogServices/SEL/Entries")
	if !strings.Contains(string(c.do(http.MethodGet, "/redfish/v1/Systems/1/LogServices", nil).raw), "/SEL") {
		t.Error("the System's LogServices collection lacks the SEL")
	}
}
