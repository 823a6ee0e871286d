package apiserver

import (
	"fmt"
	"net/http"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/evidence"
	"github.com/ingot-dev/ingot/pkg/machine"
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

// getEvidence answers a job's evidence bundle (.tar.gz): the job and its
// time to restore, the recipe it ran, the machine's events during it, the
// agent's log, drift findings, the latest inventory, and the BMC's event
// log since the job started and serial console (bmclogs.go).
func (s *Server) getEvidence(w http.ResponseWriter, r *http.Request, _ principal) error {
	ctx := r.Context()
	j, err := s.engine.Job(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	wj := WireJob(j)
	b := evidence.Bundle{Job: wj, Taken: time.Now()}
	if st := wj.Reimage; st != nil {
		if sp, err := engine.Spec(j); err == nil {
			b.Recipe = sp.Pinned
		}
		b.Restore, b.AgentLog, b.Findings = st.RestoreLine(), st.Log, st.Findings
	}
	for _, id := range j.Machines {
		evs, err := s.fleet.Events(ctx, id, 0, 0)
		if err != nil {
			b.Missing = append(b.Missing, fmt.Sprintf("events of %s: %v", id, err))
			continue
		}
		var during []machine.Event
		for _, ev := range evs {
			if !ev.Time.Before(j.Created.Add(-time.Minute)) && (j.State == engine.JobRunning || !ev.Time.After(j.Updated.Add(time.Minute))) {
				during = append(during, ev)
			}
		}
		b.Events = during
		if snap, err := s.fleet.Inventory(ctx, id, 0); err == nil {
			b.Inventory = snap
		} else {
			b.Missing = append(b.Missing, fmt.Sprintf("inventory of %s: %v", id, err))
		}
		if m, err := s.fleet.Get(ctx, id); err == nil {
			s.bmcEvidence(ctx, m, j.Created.Add(-selSlack), &b)
		} else {
			b.Missing = append(b.Missing, fmt.Sprintf("the BMC's event log (SEL) and serial console of %s: %v", id, err))
		}
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.tar.gz"`, j.ID))
	if err := evidence.Write(w, j.ID, b); err != nil {
		s.log.Error("evidence bundle cut short", "job", j.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}
