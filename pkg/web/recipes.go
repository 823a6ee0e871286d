package web

import (
	"net/http"
	"slices"
	"time"

	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// recipeRow is one recipe: its machines, whether its class is
// scale-ready (restore drills), and what its last change did: the last
// rollout, and how many machines run the recipe as it is now.
type recipeRow struct {
	Name, Version, Description, Owner, Digest string
	Machines                                  int
	ByState                                   []countLink
	FleetURL                                  string
	Readiness                                 engine.Readiness
	Last                                      *rolloutSummary
	Current, Older, Never                     int
}

type rolloutSummary struct {
	ID, URL, State, Stopped, Reason, Warning string
	Waves, Wave, Failed                      int
	Created                                  time.Time
}

func (s *Server) recipesPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	ctx := r.Context()
	ms, err := s.cfg.Fleet.List(ctx, fleet.Filter{})
	if err != nil {
		return err
	}
	jobs, err := s.cfg.Engine.Jobs(ctx, "")
	if err != nil {
		return err
	}
	// The newest succeeded reimage of each machine says which recipe
	// version it runs; the newest rollout of each recipe what its last
	// change did.
	ran, last := map[string]string{}, map[string]*rolloutSummary{}
	slices.SortFunc(jobs, func(a, b engine.Job) int { return b.Created.Compare(a.Created) })
	for i := range jobs {
		j := &jobs[i]
		switch j.Kind {
		case "reimage":
			if sp, err := engine.Spec(j); err == nil && j.State == engine.JobSucceeded {
				if _, seen := ran[sp.Machine]; !seen {
					ran[sp.Machine] = sp.RecipeDigest
				}
			}
		case "rollout":
			if wj := apiserver.WireJob(j); wj.Rollout != nil && last[wj.Rollout.Recipe] == nil {
				st := wj.Rollout
				last[st.Recipe] = &rolloutSummary{ID: j.ID, URL: jobURL(j.ID), State: string(j.State), Stopped: st.Stopped, Reason: j.Reason,
					Warning: st.Warning, Waves: len(st.Waves), Wave: st.Wave + 1, Failed: len(st.Failed), Created: j.Created}
			}
		}
	}
	var rows []recipeRow
	for _, name := range s.assignableRecipes() {
		rc, err := s.cfg.Recipes(name)
		if err != nil {
			continue
		}
		row := recipeRow{Name: name, Version: rc.Version, Description: rc.Description, Owner: rc.Owner, Digest: rc.Digest()[:12],
			FleetURL: fleetQuery{Recipe: name}.With("", ""), Last: last[name],
			Readiness: s.cfg.Engine.ReadinessOf(ctx, name, s.cfg.Engine.DrillMaxAge())}
		byState := map[machine.State]int{}
		for _, m := range ms {
			if m.Recipe != name {
				continue
			}
			row.Machines++
			byState[m.State]++
			switch d, ok := ran[m.ID]; {
			case !ok:
				row.Never++
			case d == rc.Digest():
				row.Current++
			default:
				row.Older++
			}
		}
		for _, st := range machine.States {
			if n := byState[st]; n > 0 {
				row.ByState = append(row.ByState, countLink{Name: string(st), N: n, URL: fleetQuery{Recipe: name, State: string(st)}.With("", ""),
					Class: "st-" + string(st)})
			}
		}
		rows = append(rows, row)
	}
	return s.render(w, r, http.StatusOK, "recipes", sess, "Recipes", rows)
}
