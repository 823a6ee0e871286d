package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/client"
)

const jobUsage = `Usage: ingot job COMMAND

  ls [--state running|succeeded|failed|cancelled] [--limit N] [--after KEY]
                 jobs, newest first
  show JOB       one job with its status (phases, progress, findings, checks)
  cancel JOB [--reason TEXT]
                 end a running job: its machines turn failed (reimage them),
                 a rollout stops before its next wave
  evidence JOB [-f FILE]
                 the job's evidence bundle (.tar.gz, default JOB.tar.gz): the job and
                 its time to restore, the recipe it ran, events, agent log, inventory,
                 the BMC's event log since the job started and its serial console

Flags: --server, --token-file, --context (see 'ingot config'), -o table|json|yaml.
`

// runJob dispatches `ingot job SUBCOMMAND`.
func runJob(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(e.stderr, jobUsage)
		return errUsage
	}
	fs := e.flagSet("job "+args[0], "job "+args[0]+" ...")
	af := addAPIFlags(fs)
	state := fs.String("state", "", "only jobs in this state")
	limit := fs.Int("limit", 0, "at most N jobs (0: all)")
	after := fs.String("after", "", "the next page: the key the previous one printed")
	reason := fs.String("reason", "", "why (job cancel)")
	file := fs.String("f", "", "job evidence: write the bundle here (default JOB.tar.gz)")
	pos, err := parseWithArgs(e, fs, args[1:])
	if err != nil {
		return helpOK(err)
	}
	c, err := af.client(e)
	if err != nil {
		return fmt.Errorf("job %s: %w", args[0], err)
	}
	switch {
	case args[0] == "ls" && len(pos) == 0:
		return jobList(ctx, e, c, af.output, client.ListOptions{JobState: *state, Limit: *limit, After: *after})
	case args[0] == "show" && len(pos) == 1:
		j, err := c.Job(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("job show: %w", err)
		}
		return e.render(af.output, j, func() error { return writeJob(e, j) })
	case args[0] == "evidence" && len(pos) == 1:
		return jobEvidence(ctx, e, c, pos[0], firstNonEmpty(*file, pos[0]+".tar.gz"))
	case args[0] == "cancel" && len(pos) == 1:
		j, err := c.CancelJob(ctx, pos[0], *reason)
		if err != nil {
			return fmt.Errorf("job cancel: %w", err)
		}
		fmt.Fprintf(e.stdout, "job %s %s: %s\n", j.ID, j.State, j.Reason)
		return nil
	}
	fmt.Fprint(e.stderr, jobUsage)
	return errUsage
}

func jobList(ctx context.Context, e *env, c *client.Client, output string, o client.ListOptions) error {
	var all []wire.Job
	for {
		page, next, err := c.Jobs(ctx, o)
		if err != nil {
			return fmt.Errorf("job ls: %w", err)
		}
		all = append(all, page...)
		if next == "" || o.Limit > 0 {
			if next != "" {
				fmt.Fprintf(e.stderr, "more: ingot job ls --limit %d --after %s\n", o.Limit, next)
			}
			break
		}
		o.After = next
	}
	if all == nil {
		all = []wire.Job{}
	}
	return e.render(output, all, func() error {
		t := newCLITable(e.stdout, "ID", "KIND", "STATE", "STEP", "MACHINES", "CREATED", "REASON")
		for _, j := range all {
			t.row(j.ID, j.Kind, j.State, j.Step, fmt.Sprint(len(j.Machines)), tableTime(j.Created), j.Reason)
		}
		return t.flush()
	})
}

func writeJob(e *env, j *wire.Job) error {
	for _, kv := range [][2]string{{"ID", j.ID}, {"Kind", j.Kind}, {"State", j.State}, {"Step", j.Step},
		{"Machines", strings.Join(j.Machines, ", ")}, {"Reason", j.Reason}, {"Created", tableTime(j.Created)},
		{"Updated", tableTime(j.Updated)}, {"Deadline", tableTime(j.Deadline)}} {
		fmt.Fprintf(e.stdout, "%-9s %s\n", kv[0]+":", firstNonEmpty(kv[1], "-"))
	}
	if st := j.Reimage; st != nil {
		fmt.Fprintf(e.stdout, "Restore:  %s\n", st.RestoreLine())
		for _, c := range append(st.Checks, st.BurnIn...) {
			fmt.Fprintf(e.stdout, "  check %-16s %-8s %g %s\n", c.Name, c.Verdict(), c.Value, c.Detail)
		}
	}
	if st := j.Rollout; st != nil {
		writeWaveReports(e, *st)
	}
	return nil
}

// writeWaveReports prints each finished wave: what its machines drew and
// how hot they ran under load, and what failed or crossed a limit.
func writeWaveReports(e *env, st wire.RolloutStatus) {
	fmt.Fprintf(e.stdout, "Waves:    %d (wave %d now)\n", len(st.Waves), min(st.Wave+1, len(st.Waves)))
	for _, r := range st.Reports {
		fmt.Fprintf(e.stdout, "  wave %d:\n", r.Wave)
		for _, n := range r.Nodes {
			line := fmt.Sprintf("    %-16s rack %-6s peak %s, inlet %s, GPU %s", n.Machine, firstNonEmpty(n.Rack, "-"),
				num(n.Watts, "%.0f W"), num(n.InletC, "%.1f °C"), num(n.GPUMaxC, "%.1f °C"))
			switch {
			case n.Failed != "":
				line += "  FAILED: " + n.Failed
			case n.Problem != "":
				line += "  OVER LIMIT: " + n.Problem
			}
			fmt.Fprintln(e.stdout, line)
		}
	}
}

// jobEvidence writes a job's evidence bundle to file, whole or not at all.
func jobEvidence(ctx context.Context, e *env, c *client.Client, id, file string) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("job evidence: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := c.Evidence(ctx, id, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return fmt.Errorf("job evidence: %w", err)
	}
	fmt.Fprintf(e.stdout, "evidence of job %s: %d bytes in %s\n", id, n, file)
	return nil
}
