package engine

import (
	"fmt"

	"github.com/ingot-dev/ingot/pkg/agent/checks"
	"github.com/ingot-dev/ingot/pkg/api"
	burnin "github.com/ingot-dev/ingot/pkg/burnin/judge"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The server judges every number a node reports against the recipe itself,
// with the same code the node ran (pkg/agent/checks for the agent's checks,
// pkg/burnin/judge for the burn-in's): a node's OK is advisory. Where the
// two disagree the result says so.

// rejudgeAgent judges the agent-stage checks again on the inventory the
// agent reported for this job (found: whether there was one).
func rejudgeAgent(r *recipe.Recipe, inv machine.Inventory, found bool, reported []CheckResult) []CheckResult {
	if !found {
		return reported
	}
	out := append([]CheckResult(nil), reported...)
	next := checksInOrder(r, recipe.StageAgent)
	for i := range out {
		res := &out[i]
		c, ok := next(res.Name)
		fn, known := checks.Lookup(res.Name)
		if !ok || !known || res.Skipped {
			continue
		}
		mine := fn(inv, c, r.Hardware)
		nodeOK := res.OK
		res.OK, res.Value, res.Detail, res.Verdict = mine.OK, mine.Value, mine.Detail, api.VerdictFailed
		if mine.OK {
			res.Verdict = api.VerdictPassed
		}
		if nodeOK && !mine.OK {
			res.Detail += " (judged by the server on the agent's inventory; the node reported a pass)"
		}
	}
	return out
}

// rejudgeBurnIn judges each burn-in result again from the evidence the
// node read from its tool. A result without evidence is no pass: a number
// the server cannot see is not taken on the node's word.
func rejudgeBurnIn(r *recipe.Recipe, inv burnin.Inventory, reported []CheckResult) []CheckResult {
	var limits recipe.BurnIn
	if r.Acceptance.BurnIn != nil {
		limits = *r.Acceptance.BurnIn
	}
	out := append([]CheckResult(nil), reported...)
	next := checksInOrder(r, recipe.StageBurnIn)
	for i := range out {
		res := &out[i]
		c, ok := next(res.Name)
		if !ok {
			continue
		}
		if res.Evidence == nil {
			if !res.Skipped {
				nodeOK := res.OK
				res.OK, res.Verdict = false, api.VerdictFailed
				res.Detail = fmt.Sprintf("no evidence reported, only the node's verdict (ok=%v)%s", nodeOK, orColon(res.Detail))
			} else {
				res.Verdict = api.VerdictCouldNotRun
			}
			continue
		}
		nodeOK := res.OK
		j := burnin.Judge(c, limits, *res.Evidence, inv)
		res.Verdict, res.Value, res.Detail = j.Verdict, j.Value, j.Reason
		res.OK, res.Skipped = j.Verdict == api.VerdictPassed, j.Verdict == api.VerdictCouldNotRun
		if nodeOK && !res.OK {
			res.Detail += " (judged by the server on the node's evidence; the node reported a pass)"
		}
	}
	return out
}

// checksInOrder returns a function that hands out the recipe's checks of
// stage by name, in the recipe's order: the node runs and reports them in
// that order, so the k-th result named N is the k-th check named N (a
// recipe may hold one check several times with other args, as nvbandwidth
// once per testcase). A name asked for once more than the recipe holds
// gets false.
func checksInOrder(r *recipe.Recipe, stage recipe.Stage) func(name string) (recipe.Check, bool) {
	byName := map[string][]recipe.Check{}
	for _, c := range r.Acceptance.Checks {
		if stageOf(c.Name) == stage {
			byName[c.Name] = append(byName[c.Name], c)
		}
	}
	seen := map[string]int{}
	return func(name string) (recipe.Check, bool) {
		cs, k := byName[name], seen[name]
		if k >= len(cs) {
			return recipe.Check{}, false
		}
		seen[name]++
		return cs[k], true
	}
}

func orColon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
