// Package evidence writes a failed (or any) job's evidence bundle: one
// .tar.gz an operator attaches to a ticket, holding what ingot knows of
// the job: its record and time to restore, the recipe it ran, the
// machine's events during it, the agent's log, the drift findings, the
// machine's inventory, and what its BMC logged: the event log (SEL) since
// the job started and the serial console.
package evidence

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
)

// EventLog is a BMC's event log as read for a bundle.
type EventLog struct {
	BMC     string         `json:"bmc"`     // the BMC's endpoint
	Since   time.Time      `json:"since"`   // entries created before were left out
	Entries []bmc.LogEntry `json:"entries"` // oldest first
}

// text is the log for people: a header, then one entry a line.
func (l *EventLog) text() []byte {
	var b strings.Builder
	n := fmt.Sprintf("%d entries", len(l.Entries))
	if len(l.Entries) == 1 {
		n = "1 entry"
	}
	fmt.Fprintf(&b, "# event log (SEL) of the BMC %s since %s: %s, oldest first\n", l.BMC, l.Since.UTC().Format(time.RFC3339), n)
	for _, e := range l.Entries {
		b.WriteString(e.String() + "\n")
	}
	return []byte(b.String())
}

// Bundle is what goes into the archive; empty parts are left out.
type Bundle struct {
	Job       any      // the job as the API shows it
	Recipe    []byte   // the recipe JSON the job ran (pinned when it started)
	Events    any      // the machine's events during the job
	Inventory any      // the machine's latest inventory snapshot
	Findings  any      // drift findings the job recorded
	AgentLog  []string // the agent's last log lines
	Restore   string   // time to restore by phase, so far
	// EventLog is the machine's BMC event log since the job started; nil:
	// not read (Missing says why).
	EventLog *EventLog
	// Console is the end of the machine's serial console as its BMC keeps
	// it; nil: not read (Missing says why).
	Console []byte
	Missing []string // what could not be collected, and why
	Taken   time.Time
}

// Write writes b as a gzipped tar to w, every file under dir/.
func Write(w io.Writer, dir string, b Bundle) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, data []byte) error {
		if len(data) == 0 {
			return nil
		}
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/" + name, Mode: 0o644, Size: int64(len(data)), ModTime: b.Taken}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	js := func(v any) []byte {
		if v == nil {
			return nil
		}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return []byte(fmt.Sprintf("encoding failed: %v\n", err))
		}
		return append(out, '\n')
	}
	var readme strings.Builder
	fmt.Fprintf(&readme, "ingot evidence bundle, taken %s\n\n", b.Taken.UTC().Format(time.RFC3339))
	readme.WriteString("job.json        the job: state, step, reason, spec and status (phases, checks, burn-in)\n")
	readme.WriteString("restore.txt     time to restore by phase, so far\n")
	readme.WriteString("recipe.json     the recipe the job ran (pinned when it started)\n")
	readme.WriteString("events.json     the machine's events during the job\n")
	readme.WriteString("agent.log       the agent's last log lines\n")
	readme.WriteString("findings.json   drift between the machine and its recipe, as the job recorded it\n")
	readme.WriteString("inventory.json  the machine's latest inventory snapshot\n")
	readme.WriteString("sel.txt         the BMC's event log (SEL and its other log services) since the job started, one entry a line\n")
	readme.WriteString("sel.json        the same entries as JSON\n")
	readme.WriteString("console.log     the machine's serial console, its last lines as the BMC keeps them\n")
	if len(b.Missing) > 0 {
		readme.WriteString("\nNot collected:\n")
		for _, m := range b.Missing {
			readme.WriteString("- " + m + "\n")
		}
	}
	var log string
	if len(b.AgentLog) > 0 {
		log = strings.Join(b.AgentLog, "\n") + "\n"
	}
	restore := ""
	if b.Restore != "" {
		restore = b.Restore + "\n"
	}
	var sel, selJSON []byte
	if b.EventLog != nil {
		sel, selJSON = b.EventLog.text(), js(b.EventLog)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"README.txt", []byte(readme.String())}, {"job.json", js(b.Job)}, {"restore.txt", []byte(restore)}, {"recipe.json", b.Recipe},
		{"events.json", js(b.Events)}, {"agent.log", []byte(log)}, {"findings.json", js(b.Findings)}, {"inventory.json", js(b.Inventory)},
		{"sel.txt", sel}, {"sel.json", selJSON}, {"console.log", b.Console}} {
		if err := add(f.name, f.data); err != nil {
			return fmt.Errorf("writing %s to the evidence bundle: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
