package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/burnin"
	"github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

const burninUsage = `Usage: ingot burnin COMMAND

Commands:
  judge --recipe RECIPE --check NAME [--gpus N] [--disks LIST] [-o text|json] FILE
                      read a burn-in tool's saved output (FILE, - for stdin) as the
                      recipe's check reads it, and judge it as the node and the server do:
                      passed (exit 0), failed (exit 1: the hardware), could-not-run (exit 3)
`

// runBurnin dispatches `ingot burnin SUBCOMMAND`.
func runBurnin(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, burninUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	if args[0] == "judge" {
		return runBurninJudge(ctx, e, args[1:])
	}
	fmt.Fprintf(e.stderr, "ingot burnin: unknown command %q\n\n%s", args[0], burninUsage)
	return errUsage
}

// judgeOutput is what `ingot burnin judge -o json` prints.
type judgeOutput struct {
	Recipe   string       `json:"recipe"`
	Check    recipe.Check `json:"check"`
	GPUs     int          `json:"gpus"`
	Verdict  api.Verdict  `json:"verdict"`
	Value    float64      `json:"value"`
	Subject  string       `json:"subject,omitempty"`
	Reason   string       `json:"reason"`
	Evidence api.Evidence `json:"evidence"`
	Unit     recipe.Unit  `json:"unit"`
}

// judgeFlags are `ingot burnin judge`'s flags.
type judgeFlags struct {
	recipe, dir, check, disks, format *string
	gpus                              *int
}

func runBurninJudge(_ context.Context, e *env, args []string) error {
	fs := e.flagSet("burnin judge", "burnin judge --recipe RECIPE --check NAME [--gpus N] [--disks LIST] [-o text|json] FILE")
	f := judgeFlags{
		recipe: fs.String("recipe", "", "the recipe: a file, or a name in --recipes-dir"),
		dir:    fs.String("recipes-dir", "recipes", "folder of recipe files, for a recipe given by name"),
		check:  fs.String("check", "", "the recipe's burn-in check the output is of: gpu-burn, nccl-allreduce, nvbandwidth, ..."),
		gpus:   fs.Int("gpus", -1, "GPUs the node has (default: the recipe's hardware.gpus); every per-GPU result must name each"),
		disks:  fs.String("disks", "", "comma-separated data disks fio read (/dev/nvme1n1,...); each needs a result"),
		format: fs.String("o", "text", "output: text or json"),
	}
	file, err := parseInterspersed(e, fs, args)
	if err != nil || helpAsked(args) {
		return err
	}
	if *f.recipe == "" || *f.check == "" || file == "" || (*f.format != "text" && *f.format != "json") {
		fmt.Fprintln(e.stderr, "ingot burnin judge: needs --recipe, --check and one FILE; -o is text or json")
		fs.Usage()
		return errUsage
	}
	r, err := loadRecipe(*f.recipe, *f.dir)
	if err != nil {
		return err
	}
	out, err := readOutput(file)
	if err != nil {
		return err
	}
	res, err := judgeFile(r, f, out)
	if err != nil {
		return err
	}
	if *f.format == "json" {
		err = e.printJSON(res)
	} else {
		err = writeJudgement(e.stdout, res)
	}
	return errors.Join(err, verdictExit(res.Verdict))
}

// judgeFile judges out as the recipe's check reads it.
func judgeFile(r *recipe.Recipe, f judgeFlags, out []byte) (judgeOutput, error) {
	c, ok := recipeCheck(r, *f.check)
	if !ok {
		var names []string
		for _, c := range r.Acceptance.Checks {
			if s, ok := recipe.LookupCheck(c.Name); ok && s.Stage == recipe.StageBurnIn {
				names = append(names, c.Name)
			}
		}
		return judgeOutput{}, fmt.Errorf("recipe %s has no burn-in check %q (its burn-in checks: %s)", r.Name, *f.check, orNone(names))
	}
	inv := judge.InventoryOf(machine.Inventory{}, r.Hardware, splitList(*f.disks))
	if *f.gpus >= 0 {
		inv.GPUs = *f.gpus
	}
	var b recipe.BurnIn
	if r.Acceptance.BurnIn != nil {
		b = *r.Acceptance.BurnIn
	}
	ev, j := burnin.JudgeOutput(c, b, out, inv)
	spec, _ := recipe.LookupCheck(c.Name)
	return judgeOutput{Recipe: r.Name, Check: c, GPUs: inv.GPUs, Verdict: j.Verdict, Value: j.Value, Subject: j.Subject,
		Reason: j.Reason, Evidence: ev, Unit: spec.Unit}, nil
}

func recipeCheck(r *recipe.Recipe, name string) (recipe.Check, bool) {
	for _, c := range r.Acceptance.Checks {
		if s, ok := recipe.LookupCheck(c.Name); c.Name == name && ok && s.Stage == recipe.StageBurnIn {
			return c, true
		}
	}
	return recipe.Check{}, false
}

// verdictExit is the exit status of a judgement: 0 passed, 1 failed, 3
// could not run.
func verdictExit(v api.Verdict) error {
	switch v {
	case api.VerdictPassed:
		return nil
	case api.VerdictCouldNotRun:
		return exitError(3)
	}
	return exitError(1)
}

// writeJudgement prints the verdict, the reason and every value read.
func writeJudgement(w io.Writer, res judgeOutput) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "verdict:\t%s\nreason:\t%s\n", res.Verdict, res.Reason)
	if res.Subject != "" {
		fmt.Fprintf(tw, "value:\t%s (%s)\n", judge.Show(res.Value, res.Unit), res.Subject)
	}
	minText := "none"
	if !res.Check.Min.IsZero() {
		minText = res.Check.Min.String()
	}
	fmt.Fprintf(tw, "judged:\t%s of recipe %s, min %s, against %d GPUs\n", res.Check.Name, res.Recipe, minText, res.GPUs)
	ev := res.Evidence
	if len(ev.Values) > 0 {
		fmt.Fprintf(tw, "values read (%s):\n", ev.Tool)
		for _, v := range ev.Values {
			fmt.Fprintf(tw, "  %s\t%s\n", v.Subject, strings.TrimSpace(showValue(v, res.Unit)+" "+v.Note))
		}
	}
	for _, f := range ev.Faults {
		fmt.Fprintf(tw, "fault:\t%s: %s\n", f.Subject, f.Detail)
	}
	if ev.NotRun != "" {
		fmt.Fprintf(tw, "not run:\t%s\n", ev.NotRun)
	}
	return tw.Flush()
}

func showValue(v api.Measurement, u recipe.Unit) string {
	if v.Latency {
		return fmt.Sprintf("%.3gus (latency)", v.Value*1e6)
	}
	return judge.Show(v.Value, u)
}

// parseInterspersed parses flags before and after the one FILE argument
// (`judge --recipe R FILE -o json`): Go's flag package stops at the first
// argument that is not a flag.
func parseInterspersed(e *env, fs *flag.FlagSet, args []string) (string, error) {
	file := ""
	for {
		if err := e.parse(fs, args); err != nil {
			return "", err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return file, nil
		}
		if file != "" {
			fmt.Fprintf(e.stderr, "ingot burnin judge: one FILE, found %q and %q\n", file, rest[0])
			return "", errUsage
		}
		file, args = rest[0], rest[1:]
	}
}

// loadRecipe reads a recipe file (with its bases), or a recipe by name
// from dir.
func loadRecipe(ref, dir string) (*recipe.Recipe, error) {
	if fi, err := os.Stat(ref); err == nil && !fi.IsDir() {
		set, diags := recipe.Options{}.LoadFile(ref)
		if names := set.Names(); len(names) > 0 {
			for _, n := range names {
				if set.File(n) == ref {
					r, _ := set.Get(n)
					return r, nil
				}
			}
		}
		return nil, fmt.Errorf("recipe file %s holds no recipe: %v", ref, firstDiag(diags))
	}
	set, _ := recipe.LoadDir(dir)
	r, ok := set.Get(ref)
	if !ok {
		return nil, fmt.Errorf("recipe %q: not a file, and not in %s (have: %s)", ref, dir, strings.Join(set.Names(), ", "))
	}
	return r, nil
}

func firstDiag(ds []recipe.Diagnostic) string {
	if len(ds) == 0 {
		return "no diagnostics"
	}
	return ds[0].String()
}

// readOutput reads the saved output, - for stdin.
func readOutput(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the tool's output: %w", err)
	}
	return b, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
