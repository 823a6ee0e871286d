package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/engine"
)

// rolloutView is a rollout's waves, what each machine's reimage did, and
// where and why the rollout stopped.
type rolloutView struct {
	Recipe, Stopped, Warning, Reason string
	State                            string
	Waves                            []waveRow
	Reports                          []reportRow
}

type waveRow struct {
	N        int
	Status   string // done, running, not run
	Failed   int
	Machines []waveMachine
}

type waveMachine struct {
	Name, URL, JobURL, State, Failed string
}

type reportRow struct {
	Wave int
	wire.WaveNode
	Name string
}

func (s *Server) rolloutOf(ctx context.Context, j *wire.Job, names map[string]string) *rolloutView {
	st := j.Rollout
	v := &rolloutView{Recipe: st.Recipe, Stopped: st.Stopped, Warning: st.Warning, Reason: j.Reason, State: j.State}
	for i, wave := range st.Waves {
		row := waveRow{N: i + 1, Status: waveStatus(i, st.Wave, j.State, len(st.Jobs) > 0)}
		for _, id := range wave {
			name := cmp.Or(names[id], id)
			wm := waveMachine{Name: name, URL: machineURL(name), State: "not started", Failed: st.Failed[id]}
			if jid, ok := st.Jobs[id]; ok {
				wm.JobURL, wm.State = jobURL(jid), "started"
				if rj, err := s.cfg.Engine.Job(ctx, jid); err == nil {
					wm.State = string(rj.State)
				}
			}
			if wm.Failed != "" {
				row.Failed++
			}
			row.Machines = append(row.Machines, wm)
		}
		v.Waves = append(v.Waves, row)
	}
	for _, r := range st.Reports {
		for _, n := range r.Nodes {
			v.Reports = append(v.Reports, reportRow{Wave: r.Wave, WaveNode: n, Name: cmp.Or(names[n.Machine], n.Machine)})
		}
	}
	return v
}

// waveStatus says where a wave stands: before the current one, done; the
// current one of a running rollout, running; after it (or the current
// one of a rollout that ended before finishing it), not run.
func waveStatus(i, current int, state string, started bool) string {
	switch {
	case i < current:
		return "done"
	case i == current && state == string(engine.JobRunning) && started:
		return "running"
	case i == current && state == string(engine.JobSucceeded):
		return "done"
	case i == current && state != string(engine.JobRunning):
		return "stopped here"
	}
	return "not run"
}

// startRollout starts a rollout of a recipe with the form's waves: the
// same core call as POST /api/v1/rollouts.
func (s *Server) startRollout(w http.ResponseWriter, r *http.Request, sess *session) error {
	num := func(name string, def int) (int, error) {
		v := strings.TrimSpace(r.PostFormValue(name))
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, &statusError{http.StatusBadRequest, fmt.Sprintf("%s %q: expected a whole number", name, v)}
		}
		return n, nil
	}
	sp := engine.RolloutSpec{Recipe: r.PostFormValue("recipe"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	var err error
	for _, f := range []struct {
		name string
		dst  *int
		def  int
	}{{"canary", &sp.Canary, 1}, {"batch", &sp.Batch, 5}, {"max_failures", &sp.MaxFailures, 0}, {"per_rack", &sp.PerRack, 0}} {
		if *f.dst, err = num(f.name, f.def); err != nil {
			return err
		}
	}
	j, err := s.cfg.Engine.StartRollout(r.Context(), sp, sess.Actor())
	if err != nil {
		return &statusError{http.StatusUnprocessableEntity, err.Error()}
	}
	s.log.Info("rollout started from the dashboard", "job", j.ID, "recipe", sp.Recipe, "actor", sess.Actor())
	http.Redirect(w, r, jobURL(j.ID), http.StatusSeeOther)
	return nil
}
