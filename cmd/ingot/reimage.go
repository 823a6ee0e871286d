package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/client"
)

// runReimage: `ingot reimage NODE... [--dry-run] [--wait=false]`.
func runReimage(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("reimage", "reimage NODE... [--dry-run] [--wait=false] [--reason TEXT] [--handoff reboot|kexec] [--warm] [--server URL]")
	af := addAPIFlags(fs)
	dry := fs.Bool("dry-run", false, "run the preflight and print the plan; change nothing")
	wait := fs.Bool("wait", true, "follow progress until every node is ready or failed")
	reason := fs.String("reason", "", "why, recorded in the machine's events")
	handoff := fs.String("handoff", "", "override the recipe's os.handoff for this job: reboot or kexec")
	warmFlag := fs.Bool("warm", false, "ask the installed OS to kexec into the agent: no POST (the recipe's os.warm_reimage); falls back to the BMC when the node does not answer")
	timeout := fs.Duration("timeout", 2*time.Hour, "give up waiting after this long (the job goes on)")
	nodes, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(nodes) == 0 {
		fs.Usage()
		return fmt.Errorf("expected at least one NODE (a machine name or ID)")
	}
	c, err := af.client(e)
	if err != nil {
		return err
	}
	res, err := c.Reimage(ctx, wire.ReimageRequest{Machines: nodes, DryRun: *dry, Reason: *reason, Handoff: *handoff, Warm: *warmFlag})
	if err != nil {
		return fmt.Errorf("reimage: %w", err)
	}
	failed := 0
	jobs := map[string]string{}
	for _, r := range res {
		switch {
		case r.Error != "":
			failed++
			fmt.Fprintf(e.stderr, "%s: %s\n", r.Machine, r.Error)
		case r.Plan != nil:
			fmt.Fprintf(e.stdout, "%s (recipe %s): preflight passed; plan:\n", r.Plan.Name, r.Plan.Recipe)
			for i, s := range r.Plan.Steps {
				fmt.Fprintf(e.stdout, "  %d. %s\n", i+1, s)
			}
		case r.Job != nil:
			jobs[r.Machine] = r.Job.ID
			fmt.Fprintf(e.stdout, "%s: job %s started\n", r.Machine, r.Job.ID)
		}
	}
	if *dry || !*wait || len(jobs) == 0 {
		if failed > 0 {
			return exitError(1)
		}
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if n, err := follow(wctx, c, jobs, e.stdout); err != nil {
		return err
	} else {
		failed += n
	}
	if failed > 0 {
		return exitError(1)
	}
	return nil
}

// follow follows the jobs (pkg/client's one follow loop) and prints one
// progress line per node whenever it changes; it returns how many jobs did
// not succeed.
func follow(ctx context.Context, c *client.Client, jobs map[string]string, w io.Writer) (int, error) {
	tty := isTTY(w)
	last := map[string]string{}
	failed := 0
	_, err := c.Follow(ctx, jobs, 500*time.Millisecond, func(n string, j *wire.Job) {
		var st wire.ReimageStatus
		if j.Reimage != nil {
			st = *j.Reimage
		}
		if line := progressLine(n, j, st); line != last[n] {
			if tty {
				fmt.Fprintf(w, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(w, line)
			}
			last[n] = line
		}
		if j.State != wire.JobRunning && tty {
			fmt.Fprintln(w)
		}
		switch j.State {
		case wire.JobSucceeded:
			fmt.Fprintf(w, "%s: ready; %s\n", n, st.RestoreLine())
		case wire.JobFailed, wire.JobCancelled:
			failed++
			fmt.Fprintf(w, "%s: %s at %s\n  evidence: ingot job evidence %s -f %s.tar.gz (events, agent log, recipe, inventory); ingot job show %s\n",
				n, strings.ToUpper(j.State), j.Reason, j.ID, j.ID, j.ID)
		}
	})
	if err != nil && ctx.Err() != nil {
		return failed, fmt.Errorf("stopped waiting (%v); the jobs go on: ingot job ls", ctx.Err())
	}
	return failed, err
}

// progressLine renders "node1 [image ] ######....  41% 512MiB/1.2GiB 95MiB/s".
func progressLine(name string, j *wire.Job, st wire.ReimageStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-10s", name, j.Step)
	if st.Total > 0 {
		frac := float64(st.Bytes) / float64(st.Total)
		if frac > 1 {
			frac = 1
		}
		bar := int(frac * 20)
		fmt.Fprintf(&b, " [%s%s] %3.0f%% %s/%s %s/s", strings.Repeat("#", bar), strings.Repeat(".", 20-bar),
			frac*100, humanBytes(st.Bytes), humanBytes(st.Total), humanBytes(int64(st.RateBps)))
	} else if st.Bytes > 0 {
		fmt.Fprintf(&b, " %s %s/s", humanBytes(st.Bytes), humanBytes(int64(st.RateBps)))
	}
	return b.String()
}

func humanBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%d%s", n, u)
			}
			return fmt.Sprintf("%.1f%s", f, u)
		}
		f /= 1024
	}
	return ""
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// runRollout: `ingot rollout RECIPE --batch N --max-failures M`.
func runRollout(ctx context.Context, e *env, args []string) error {
	fs := e.flagSet("rollout", "rollout RECIPE --batch N --max-failures M [--canary 1] [--per-rack K] [--wait=false]")
	af := addAPIFlags(fs)
	batch := fs.Int("batch", 5, "machines per wave after the canary wave")
	maxF := fs.Int("max-failures", 0, "stop when a wave has more failures than this")
	canary := fs.Int("canary", 1, "machines in the first wave")
	perRack := fs.Int("per-rack", 0, "at most this many machines of one rack per wave (0: no limit)")
	wait := fs.Bool("wait", true, "follow the rollout until it ends")
	pos, err := parseWithArgs(e, fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := wantArgs(fs, pos, "RECIPE"); err != nil {
		return err
	}
	c, err := af.client(e)
	if err != nil {
		return err
	}
	j, err := c.Rollout(ctx, wire.RolloutRequest{Recipe: pos[0], Batch: *batch, MaxFailures: *maxF, Canary: *canary, PerRack: *perRack})
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	fmt.Fprintf(e.stdout, "rollout %s of %s started: %d machines\n", j.ID, pos[0], len(j.Machines))
	if *wait {
		ended, err := c.Follow(ctx, map[string]string{pos[0]: j.ID}, time.Second, nil)
		if err != nil {
			return fmt.Errorf("rollout %s: %w", j.ID, err)
		}
		j = ended[pos[0]]
	}
	fmt.Fprintf(e.stdout, "rollout %s: %s %s\n", j.ID, j.State, j.Reason)
	if j.State == wire.JobFailed || j.State == wire.JobCancelled {
		return exitError(1)
	}
	return nil
}
