// Package judge holds a burn-in tool's evidence (api.Evidence, read from
// the tool's output by pkg/burnin) against the recipe's check and the
// node's inventory, and says passed, failed or could-not-run with a reason
// that names the GPU, pair, disk or size.
//
// It is the one judgement of burn-in numbers: the node's first-boot run
// calls it on what it measured, and the server calls it again on the
// evidence the node reported, so the node's own OK is advisory. Judge is a
// pure function; nothing here runs a tool.
//
// The rules, in the order they decide:
//  1. A wrong result the tool found (a miscompare, NCCL #wrong, a FAULTY
//     GPU), an Xid or a lost GPU during the load, a GPU over the burn-in's
//     temperature limit: failed.
//  2. The tool could not measure (not installed, stopped early, no peer):
//     could-not-run.
//  3. Missing evidence: the kernel log or the GPU sampler unreadable, a GPU,
//     pair or disk the node has that the results do not name, a
//     measurement of zero (0 iterations, 0 bytes, a 0 cell), no row at the
//     size the check judges: failed, `min` or no `min`.
//  4. A value under the check's min, each subject held on its own (the
//     slowest named): failed.
//  5. Otherwise passed; Value is the slowest subject's number.
package judge

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Inventory is what the node has, as far as the burn-in's results must
// cover it.
type Inventory struct {
	// GPUs the node has: every per-GPU result must name GPUs 0..GPUs-1
	// (the tools' CUDA indices), every pair result each ordered pair.
	GPUs int `json:"gpus"`
	// Disks are the data disks fio reads (/dev paths); each needs a result.
	Disks []string `json:"disks,omitempty"`
}

// InventoryOf is the Inventory the server holds a node's evidence against:
// the GPUs its inventory found, or the recipe's count where that is more
// (a GPU the agent did not see is still one the results must name), and
// the data disks the agent planned.
func InventoryOf(inv machine.Inventory, hw recipe.Hardware, disks []string) Inventory {
	want := 0
	for _, g := range hw.GPUs {
		want += g.Count
	}
	return Inventory{GPUs: max(len(inv.GPUs), want), Disks: disks}
}

// Result is one check's judgement.
type Result struct {
	Verdict api.Verdict `json:"verdict"`
	// Value is the number the check is held to, in its unit: the slowest
	// subject's. 0 when nothing was measured.
	Value   float64 `json:"value"`
	Subject string  `json:"subject,omitempty"` // whose number Value is
	Reason  string  `json:"reason"`            // for people; names the GPU, pair, disk or size
}

// Apply writes the judgement into a check result: Verdict, OK, Skipped
// (could-not-run), Value, Detail and the evidence it was made on.
func (r Result) Apply(res *api.CheckResult, ev api.Evidence) {
	res.Verdict, res.Value, res.Detail = r.Verdict, r.Value, r.Reason
	res.OK = r.Verdict == api.VerdictPassed
	res.Skipped = r.Verdict == api.VerdictCouldNotRun
	e := ev
	res.Evidence = &e
}

// Judge holds ev against check c (its min and args), the burn-in's limits
// b (max_gpu_temp_c, max_xid_errors) and what the node has.
func Judge(c recipe.Check, b recipe.BurnIn, ev api.Evidence, inv Inventory) Result {
	r, ok := rules()[c.Name]
	if !ok {
		return Result{Verdict: api.VerdictCouldNotRun, Reason: fmt.Sprintf("%s: ingot has no judge for this check", c.Name)}
	}
	tool := firstOf(ev.Tool, r.tool, c.Name)
	j := judgement{c: c, r: r, tool: tool, unit: unitOf(c.Name)}
	switch {
	case len(ev.Faults) > 0:
		return j.fail("", "%s", faultText(ev.Faults, ev.More))
	case ev.Load != nil && len(loadFaults(ev.Load, b)) > 0:
		return j.fail("", "%s", strings.Join(loadFaults(ev.Load, b), "; "))
	case r.minGPUs > 0 && inv.GPUs < r.minGPUs:
		return j.fail("", "needs at least %d GPUs; the node has %d", r.minGPUs, inv.GPUs)
	case ev.NotRun != "":
		return Result{Verdict: api.VerdictCouldNotRun, Reason: tool + ": " + strings.TrimPrefix(ev.NotRun, tool+": ")}
	}
	if why := loadGaps(ev.Load, inv); len(why) > 0 {
		return j.fail("", "%s", strings.Join(why, "; "))
	}
	return j.values(ev, inv)
}

// judgement carries one Judge call's check, rule and names.
type judgement struct {
	c    recipe.Check
	r    rule
	tool string
	unit recipe.Unit
}

func (j judgement) fail(subject, format string, args ...any) Result {
	return Result{Verdict: api.VerdictFailed, Subject: subject, Reason: j.prefix() + fmt.Sprintf(format, args...)}
}

// prefix names the tool, and what of it the check judges (a testcase).
func (j judgement) prefix() string {
	if j.r.what != nil {
		if w := j.r.what(j.c); w != "" {
			return j.tool + " " + w + ": "
		}
	}
	return j.tool + ": "
}

// values applies rules 3 to 5 to the measurements.
func (j judgement) values(ev api.Evidence, inv Inventory) Result {
	vals, none := j.r.usable(j.c, ev.Values)
	if missing := j.missing(vals, inv); len(missing) > 0 {
		return j.fail("", "no result for %s%s", list(missing, 8), j.r.have(inv))
	}
	if len(vals) == 0 {
		return j.fail("", "%s", firstOf(none, "the tool printed no measurement"))
	}
	if ev.GPUs > 0 && ev.GPUs < inv.GPUs {
		return j.fail("", "ran on %d GPUs, the node has %d", ev.GPUs, inv.GPUs)
	}
	var zero []string
	for _, v := range vals {
		if v.Value <= 0 || (j.r.work && v.Work <= 0) {
			zero = append(zero, j.zeroText(v))
		}
	}
	if len(zero) > 0 {
		return j.fail("", "measured nothing for %s", list(zero, 8))
	}
	slow := slowest(vals)
	res := Result{Value: slow.Value, Subject: slow.Subject}
	if !j.c.Min.IsZero() && slow.Value < j.c.Min.Value {
		res.Verdict, res.Reason = api.VerdictFailed, j.prefix()+j.belowText(vals)
		return res
	}
	res.Verdict = api.VerdictPassed
	res.Reason = j.prefix() + j.passText(vals, slow)
	return res
}

// belowText names every value under min, slowest first.
func (j judgement) belowText(vals []api.Measurement) string {
	var below []string
	for _, v := range sortedBelow(vals, j.c.Min.Value) {
		below = append(below, fmt.Sprintf("%s at %s", v.Subject, Show(v.Value, j.unit)))
	}
	if len(vals) == 1 {
		return fmt.Sprintf("%s, want at least %s", below[0], j.c.Min)
	}
	return fmt.Sprintf("%s, want at least %s (slowest first: %s)", count(len(below), "of", len(vals), j.r.noun)+" under the minimum", j.c.Min, list(below, 8))
}

func (j judgement) passText(vals []api.Measurement, slow api.Measurement) string {
	if j.unit == recipe.UnitNone {
		var each []string
		for _, v := range vals {
			each = append(each, strings.TrimSpace(fmt.Sprintf("%s %s %s", v.Subject, Show(v.Value, j.unit), j.r.valueUnit)))
		}
		return fmt.Sprintf("%d %s passed: %s", len(vals), plural(j.r.noun, len(vals)), list(each, 8))
	}
	if len(vals) == 1 {
		return fmt.Sprintf("%s at %s", slow.Subject, Show(slow.Value, j.unit))
	}
	return fmt.Sprintf("%d %s, slowest %s at %s", len(vals), plural(j.r.noun, len(vals)), slow.Subject, Show(slow.Value, j.unit))
}

func (j judgement) zeroText(v api.Measurement) string {
	switch {
	case v.Note != "":
		return fmt.Sprintf("%s (printed %s)", v.Subject, v.Note)
	case j.r.work && v.Work <= 0:
		return fmt.Sprintf("%s (0 %s)", v.Subject, j.r.workNoun)
	}
	return fmt.Sprintf("%s (%s)", v.Subject, Show(v.Value, j.unit))
}

// missing lists the subjects the node has that vals do not name. A
// subject is named by a value of that subject, or of one of its parts
// ("/dev/nvme1n1 job randread" names /dev/nvme1n1).
func (j judgement) missing(vals []api.Measurement, inv Inventory) []string {
	if j.r.expect == nil {
		return nil
	}
	have := map[string]bool{}
	for _, v := range vals {
		have[v.Subject] = true
		for i := range len(v.Subject) {
			if v.Subject[i] == ' ' {
				have[v.Subject[:i]] = true
			}
		}
	}
	var out []string
	for _, s := range j.r.expect(j.c, inv) {
		if !have[s] {
			out = append(out, s)
		}
	}
	return out
}

func slowest(vals []api.Measurement) api.Measurement {
	return slices.MinFunc(vals, func(a, b api.Measurement) int {
		return cmp.Or(cmp.Compare(a.Value, b.Value), strings.Compare(a.Subject, b.Subject))
	})
}

// sortedBelow returns the values under lo, slowest first.
func sortedBelow(vals []api.Measurement, lo float64) []api.Measurement {
	var out []api.Measurement
	for _, v := range vals {
		if v.Value < lo {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(a, b api.Measurement) int { return cmp.Compare(a.Value, b.Value) })
	return out
}

// faultText lists the faults, each naming its subject.
func faultText(fs []api.Fault, more int) string {
	var p []string
	for _, f := range fs {
		p = append(p, strings.TrimPrefix(f.Subject+": "+f.Detail, ": "))
	}
	s := list(p, 8)
	if more > 0 {
		s += fmt.Sprintf(" (and %d more left out of the report)", more)
	}
	return s
}

// list joins at most n items, saying how many more there are.
func list(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}

func count(k int, of string, n int, noun string) string {
	return fmt.Sprintf("%d %s %d %s", k, of, n, plural(noun, n))
}

func plural(noun string, n int) string {
	if n == 1 || noun == "" {
		return noun
	}
	if strings.HasSuffix(noun, "s") {
		return noun + "es"
	}
	return noun + "s"
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func unitOf(check string) recipe.Unit {
	if s, ok := recipe.LookupCheck(check); ok {
		return s.Unit
	}
	return recipe.UnitNone
}
