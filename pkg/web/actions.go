package web

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// The actions: each is the core call the API makes for the same request,
// with the session's token as the actor, so the machine's events say who.

type reimageView struct {
	M     machine.Machine
	Plan  *engine.Plan
	Error string
}

// reimageConfirm shows what a reimage of the machine would do (the
// engine's preflight) and asks to confirm it by name.
func (s *Server) reimageConfirm(w http.ResponseWriter, r *http.Request, sess *session) error {
	m, err := s.cfg.Fleet.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	v := reimageView{M: *m}
	v.Plan, err = s.cfg.Engine.Preflight(r.Context(), m.ID)
	if err != nil {
		v.Error = err.Error()
	}
	return s.render(w, r, http.StatusOK, "machine-reimage", sess, "Reimage "+m.Name, v)
}

// reimage starts a reimage: the form must name the machine again (the
// confirmation), as POST /api/v1/reimage does for one machine.
func (s *Server) reimage(w http.ResponseWriter, r *http.Request, sess *session) error {
	m, err := s.cfg.Fleet.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	if strings.TrimSpace(r.PostFormValue("confirm")) != m.Name {
		v := reimageView{M: *m, Error: fmt.Sprintf("type the machine's name, %s, to confirm", m.Name)}
		return s.render(w, r, http.StatusUnprocessableEntity, "machine-reimage", sess, "Reimage "+m.Name, v)
	}
	reason := cmp.Or(strings.TrimSpace(r.PostFormValue("reason")), "from the dashboard")
	j, err := s.cfg.Engine.ReimageWith(r.Context(), m.ID, sess.Actor(), reason, engine.ReimageOptions{})
	if err != nil {
		v := reimageView{M: *m, Error: err.Error()}
		return s.render(w, r, statusOf(err), "machine-reimage", sess, "Reimage "+m.Name, v)
	}
	s.log.Info("reimage started from the dashboard", "machine", m.Name, "job", j.ID, "actor", sess.Actor())
	http.Redirect(w, r, machineURL(m.Name)+"#job", http.StatusSeeOther)
	return nil
}

// cancelJob cancels a running job, as POST /api/v1/jobs/{id}/cancel.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, sess *session) error {
	reason := cmp.Or(strings.TrimSpace(r.PostFormValue("reason")), "from the dashboard")
	j, err := s.cfg.Engine.Cancel(r.Context(), r.PathValue("id"), sess.Actor(), reason)
	if err != nil {
		return err
	}
	s.log.Info("job cancelled from the dashboard", "job", j.ID, "actor", sess.Actor())
	http.Redirect(w, r, jobURL(j.ID), http.StatusSeeOther)
	return nil
}

// silenceDurations are the lengths the alerts page offers.
var silenceDurations = []string{"1h", "4h", "24h", "72h", "168h"}

// silence mutes one machine's alert of one rule (telemetry.Silence, which
// records who and why in the machine's events).
func (s *Server) silence(w http.ResponseWriter, r *http.Request, sess *session) error {
	if s.cfg.Telemetry == nil {
		return &statusError{http.StatusNotImplemented, "this server polls no BMCs (serve --telemetry-interval 0): there are no alerts to silence"}
	}
	m, err := s.cfg.Fleet.Get(r.Context(), r.PostFormValue("machine"))
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(r.PostFormValue("for"))
	if err != nil {
		return &statusError{http.StatusBadRequest, fmt.Sprintf("for %q: expected a duration such as 4h", r.PostFormValue("for"))}
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if _, err := s.cfg.Telemetry.Silence(r.Context(), m.ID, r.PostFormValue("rule"), d, sess.Actor(), reason); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"alerts", http.StatusSeeOther)
	return nil
}

// alertsView is the alerts page: firing and pending with what they read,
// their limit and what to do; the silences; the recently cleared.
type alertsView struct {
	Off       bool
	Firing    []alertRow
	Pending   []alertRow
	Cleared   []clearedRow
	Silences  []silenceRow
	Durations []string
}

type alertRow struct {
	telemetry.Alert
	URL string
}

type clearedRow struct {
	telemetry.Cleared
	URL string
}

type silenceRow struct {
	telemetry.Silence
	Name, URL string
}

func (s *Server) alertsPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	v := alertsView{Durations: silenceDurations}
	tel := s.cfg.Telemetry
	if tel == nil {
		v.Off = true
		return s.render(w, r, http.StatusOK, "alerts", sess, "Alerts", v)
	}
	for _, a := range tel.Alerts() {
		row := alertRow{Alert: a}
		if a.Machine != "" { // a service alert (the etcd quota) has no machine page
			row.URL = machineURL(a.Name)
		}
		if a.State == telemetry.Firing {
			v.Firing = append(v.Firing, row)
		} else {
			v.Pending = append(v.Pending, row)
		}
	}
	for _, c := range tel.RecentlyCleared() {
		row := clearedRow{Cleared: c}
		if c.Machine != "" {
			row.URL = machineURL(c.Name)
		}
		v.Cleared = append(v.Cleared, row)
	}
	names := s.machineNames(r.Context())
	for _, sl := range tel.Silences() {
		name := cmp.Or(names[sl.Machine], sl.Machine)
		v.Silences = append(v.Silences, silenceRow{Silence: sl, Name: name, URL: machineURL(name)})
	}
	return s.render(w, r, http.StatusOK, "alerts", sess, "Alerts", v)
}
