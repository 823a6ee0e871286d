// Package evidence writes a failed (or any) job's evidence bundle: one
// .tar.gz an operator attaches to a ticket, holding what ingot knows of
// the job: its record and time to restore, the recipe it ran, the
// machine's events during it, the agent's log, the drift findings and the
// machine's inventory.
package evidence

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Bundle is what goes into the archive; empty parts are left out.
type Bundle struct {
	Job       any      // the job as the API shows it
	Recipe    []byte   // the recipe JSON the job ran (pinned when it started)
	Events    any      // the machine's events during the job
	Inventory any      // the machine's latest inventory snapshot
	Findings  any      // drift findings the job recorded
	AgentLog  []string // the agent's last log lines
	Restore   string   // time to restore by phase, so far
	Missing   []string // what could not be collected, and why
	Taken     time.Time
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
	for _, f := range []struct {
		name string
		data []byte
	}{{"README.txt", []byte(readme.String())}, {"job.json", js(b.Job)}, {"restore.txt", []byte(restore)}, {"recipe.json", b.Recipe},
		{"events.json", js(b.Events)}, {"agent.log", []byte(log)}, {"findings.json", js(b.Findings)}, {"inventory.json", js(b.Inventory)}} {
		if err := add(f.name, f.data); err != nil {
			return fmt.Errorf("writing %s to the evidence bundle: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
