package bmc

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Dates as BMCs write them: RFC 3339, and the forms that are not.
func TestLogTime(t *testing.T) {
	utc := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for name, tc := range map[string]struct {
		in   string
		want time.Time
	}{
		"rfc3339 Z":            {"2025-03-04T05:06:07Z", utc},
		"rfc3339 offset":       {"2025-03-04T07:06:07+02:00", utc},
		"fraction":             {"2025-03-04T05:06:07.123Z", utc.Add(123 * time.Millisecond)},
		"offset without colon": {"2025-03-04T05:06:07+0000", utc},
		"no zone (iLO)":        {"2025-03-04T05:06:07", utc},
		"space":                {"2025-03-04 05:06:07", utc},
		"spaces around":        {"  2025-03-04T05:06:07Z ", utc},
		"clock never set":      {"1970-01-01T00:00:05Z", time.Time{}},
		"empty":                {"", time.Time{}},
		"garbage":              {"Pre-Init", time.Time{}},
		"month 13":             {"2025-13-04T05:06:07Z", time.Time{}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := logTime(tc.in); !got.Equal(tc.want) {
				t.Errorf("logTime(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// One page of entries: inline members read leniently, bare links listed,
// the nextLink kept on this BMC.
func TestParseEntries(t *testing.T) {
	page := `{"Members@odata.count": 5, "Members@odata.nextLink": "https://other.example/redfish/v1/Managers/1/LogServices/IEL/Entries?$skip=4",
	"Members": [
		{"@odata.id": "/e/1", "Id": "1", "Created": "2025-03-04T05:06:07Z", "Severity": "Critical", "Message": "Fan 2 failed",
		 "MessageId": "Sel.1.0.Fan", "SensorType": "Fan"},
		{"@odata.id": "/e/2", "Id": 2, "EventTimestamp": "2025-03-04T05:06:08Z", "MessageSeverity": "Warning",
		 "MessageId": "Base.1.0.Thing", "MessageArgs": ["a", "b"], "OemSensorType": "Widget"},
		{"@odata.id": "/e/3"},
		"not an object",
		{"@odata.id": "/e/5", "EntryType": "Oem", "Message": 42, "Created": null}
	]}`
	p, err := parseEntries([]byte(page), "Managers/1/LogServices/IEL")
	if err != nil {
		t.Fatal(err)
	}
	svc := "Managers/1/LogServices/IEL"
	want := []LogEntry{
		{Created: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), Severity: "Critical", Message: "Fan 2 failed", MessageID: "Sel.1.0.Fan",
			SensorType: "Fan", Service: svc, ID: "1"},
		{Created: time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC), Severity: "Warning", Message: "Base.1.0.Thing (a, b)", MessageID: "Base.1.0.Thing",
			SensorType: "Widget", Service: svc, ID: "2"},
		{Message: "42", Service: svc},
	}
	if diff := cmp.Diff(want, p.entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/e/3"}, p.links); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
	if p.count != 5 || p.next != "/redfish/v1/Managers/1/LogServices/IEL/Entries?$skip=4" {
		t.Errorf("count %d, next %q", p.count, p.next)
	}
	for name, bad := range map[string]string{"not JSON": `{`, "Members not an array": `{"Members": {}}`, "an array": `[]`} {
		if _, err := parseEntries([]byte(bad), svc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if p, err := parseEntries([]byte(`{"Members": null, "Members@odata.nextLink": "javascript:alert(1)"}`), svc); err != nil || p.next != "" || p.count != -1 {
		t.Errorf("null members, foreign link: %+v, %v", p, err)
	}
}

// An entry is one line for people, whatever its message holds.
func TestLogEntryString(t *testing.T) {
	e := LogEntry{Created: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), Severity: "Warning", Message: "two\nlines  here",
		MessageID: "X.1.0.Y", SensorType: "Fan", Service: "Managers/BMC/LogServices/SEL"}
	want := "2025-03-04T05:06:07Z  Warning   Managers/BMC/LogServices/SEL: two lines here [X.1.0.Y] (Fan)"
	if got := e.String(); got != want {
		t.Errorf("String:\n%q\nwant\n%q", got, want)
	}
	if got := (LogEntry{Message: "m", Service: "s"}).String(); !strings.HasPrefix(got, "(no date)") {
		t.Errorf("undated: %q", got)
	}
}

// FuzzLogEntries feeds BMC bytes through the log entry parser: whatever a
// BMC sends must not panic, and what is read keeps its promises.
func FuzzLogEntries(f *testing.F) {
	f.Add([]byte(`{"Members@odata.count":1,"Members":[{"Id":"1","Created":"2025-03-04T05:06:07Z","Message":"x","Severity":"OK"}]}`))
	f.Add([]byte(`{"Members":[{"@odata.id":"/e/1"}],"Members@odata.nextLink":"/e?$skip=1"}`))
	f.Add([]byte(`{"Members":[{"EventTimestamp":"2025-03-04 05:06:07+0000","MessageId":"A.B","MessageArgs":[1,"x"]}]}`))
	f.Add([]byte(`{"Members":[{"Created":"1970-01-01T00:00:00","Message":"\u00e9\u00e9"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseEntries(b, "s")
		if err != nil {
			return
		}
		for _, e := range p.entries {
			if !e.Created.IsZero() && (e.Created.Year() < 1990 || e.Created.Location() != time.UTC) {
				t.Errorf("Created %v: want zero or UTC from 1990", e.Created)
			}
			if len(e.Message) > maxMessage {
				t.Errorf("Message of %d bytes, want at most %d", len(e.Message), maxMessage)
			}
			_ = e.String()
		}
		if p.next != "" && !strings.HasPrefix(p.next, "/") {
			t.Errorf("next %q: want a path on the BMC", p.next)
		}
		_ = logTime(string(b))
		_, _ = parseEntry(b, "s")
	})
}
