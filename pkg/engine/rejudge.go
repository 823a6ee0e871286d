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
	for i := range out {
		res := &out[i]
		c, ok := recipeCheck(r, res.Name, recipe.StageAgent)
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
	for i := range out {
		res := &out[i]
		c, ok := recipeCheck(r, res.Name, recipe.StageBurnIn)
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

// recipeCheck is the recipe's check of that name at stage.
func recipeCheck(r *recipe.Recipe, name string, stage recipe.Stage) (recipe.Check, bool) {
	for _, c := range r.Acceptance.Checks {
		if c.Name == name && stageOf(c.Name) == stage {
			return c, true
		}
	}
	return recipe.Check{}, false
}

func orColon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
