package engine

import (
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Verdict is the engine's judgement of one stage's acceptance checks.
type Verdict struct {
	Results []CheckResult // what was reported, with Skipped/Waived as decided
	Failed  []string      // "name: why", for the job's reason; empty = passed
	Waived  []string      // "name: by ACTOR: REASON", one event each
}

// judge compares the results reported for one stage (the agent's, or the
// installed OS's burn-in) with the recipe's checks of that stage. Every
// check is required unless the recipe marks it optional: a required check
// with no result, or one that was skipped, fails with what is missing; a
// failed required check fails unless the machine holds a waiver for it.
// Optional checks are reported and never fail the job.
func judge(checks []recipe.Check, stage recipe.Stage, results []CheckResult, m *machine.Machine) Verdict {
	byName := map[string]int{}
	v := Verdict{Results: append([]CheckResult(nil), results...)}
	for i, r := range v.Results {
		byName[r.Name] = i
	}
	for _, c := range checks {
		if stageOf(c.Name) != stage {
			continue
		}
		i, ok := byName[c.Name]
		if !ok {
			if !c.Optional {
				v.Failed = append(v.Failed, fmt.Sprintf("%s: did not run (no result was reported for it)", c.Name))
			}
			v.Results = append(v.Results, CheckResult{Name: c.Name, Skipped: true, Detail: "no result was reported"})
			continue
		}
		r := &v.Results[i]
		switch {
		case r.Skipped:
			r.OK = false
			if !c.Optional {
				v.Failed = append(v.Failed, fmt.Sprintf("%s: did not run: %s", c.Name, orText(r.Detail, "skipped")))
			}
		case r.OK, c.Optional:
		default:
			if w, ok := waiver(m, c.Name); ok {
				r.Waived = true
				r.Detail = fmt.Sprintf("%s (waived by %s: %s)", r.Detail, w.Actor, w.Reason)
				v.Waived = append(v.Waived, fmt.Sprintf("%s: by %s: %s", c.Name, w.Actor, w.Reason))
				continue
			}
			v.Failed = append(v.Failed, c.Name+": "+r.Detail)
		}
	}
	return v
}

// stageOf is where the named check runs; a name the registry does not know
// (a recipe lint refuses it) is taken as the agent's, where it then fails
// as not run.
func stageOf(name string) recipe.Stage {
	if spec, ok := recipe.LookupCheck(name); ok {
		return spec.Stage
	}
	return recipe.StageAgent
}

func waiver(m *machine.Machine, check string) (machine.Waiver, bool) {
	if m == nil {
		return machine.Waiver{}, false
	}
	return m.Waiver(check)
}

func orText(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}
