package apiserver

import (
	"net/http"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
)

func (s *Server) putDrillCandidate(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.DrillCandidateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	m, err := s.fleet.SetDrillCandidate(r.Context(), r.PathValue("id"), req.Candidate, actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, 200, m)
	return nil
}

func (s *Server) postDrill(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.DrillRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Recipe == "" {
		return errorf(http.StatusBadRequest, "recipe: expected the class to drill")
	}
	j, err := s.engine.StartDrill(r.Context(), req.Recipe, req.Machine, req.Force, actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, WireJob(j))
	return nil
}

func (s *Server) listReadiness(w http.ResponseWriter, r *http.Request, _ principal) error {
	out := []wire.RecipeReadiness{}
	for _, name := range s.recipeNames() {
		rc, err := s.recipes(name)
		if err != nil || rc.Template {
			continue
		}
		rd := s.engine.ReadinessOf(r.Context(), name, s.engine.DrillMaxAge())
		out = append(out, wire.RecipeReadiness{Recipe: name, TargetSeconds: rd.Target.Seconds(), LastDrill: wireDrill(rd.Last),
			LastPassed: wireDrill(rd.LastPassed), ScaleReady: rd.ScaleReady, Why: rd.Why})
	}
	writeJSON(w, 200, out)
	return nil
}

func wireDrill(d *engine.DrillResult) *wire.Drill {
	if d == nil {
		return nil
	}
	return &wire.Drill{Job: d.Job, Machine: d.Machine, At: d.At, RestoreSeconds: d.Restore.Seconds(), TargetSeconds: d.Target.Seconds(),
		Passed: d.Passed, Why: d.Why}
}
