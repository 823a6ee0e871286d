package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// The operator routes: each decodes, calls the core (pkg/fleet for
// machines and tokens, pkg/engine for jobs), and encodes a wire type.

// NextHeader carries, on a page of a list, the value of ?after= that asks
// for the next page; absent on the last page.
const NextHeader = "X-Ingot-Next"

func actor(p principal) string { return "operator:" + p.name }

func (s *Server) getOpenAPI(w http.ResponseWriter, _ *http.Request, _ principal) error {
	w.Header().Set("Content-Type", "application/yaml")
	_, err := w.Write(openAPI)
	return err
}

func (s *Server) getVersion(w http.ResponseWriter, _ *http.Request, _ principal) error {
	writeJSON(w, 200, wire.Version{Version: s.version})
	return nil
}

// page cuts a sorted list after the key ?after= names, to at most ?limit=
// items, and sets NextHeader when more follow.
func page[T any](w http.ResponseWriter, r *http.Request, items []T, key func(T) string) ([]T, error) {
	q := r.URL.Query()
	if after := q.Get("after"); after != "" {
		i := slices.IndexFunc(items, func(t T) bool { return key(t) > after })
		if i < 0 {
			i = len(items)
		}
		items = items[i:]
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, errorf(http.StatusBadRequest, "query parameter limit %q: expected a positive number", v)
		}
		if len(items) > n {
			items = items[:n]
			w.Header().Set(NextHeader, key(items[n-1]))
		}
	}
	return items, nil
}

// listMachines pages in the store (name order): a page of a large fleet
// reads that page's machines, one more to know whether another follows.
func (s *Server) listMachines(w http.ResponseWriter, r *http.Request, _ principal) error {
	q := r.URL.Query()
	f := fleet.Filter{Recipe: q.Get("recipe"), State: machine.State(q.Get("state")), Rack: q.Get("rack"), After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, "query parameter limit %q: expected a positive number", v)
		}
		f.Limit = n + 1
	}
	ms, err := s.fleet.List(r.Context(), f)
	if err != nil {
		return err
	}
	if f.Limit > 0 && len(ms) == f.Limit {
		ms = ms[:f.Limit-1]
		w.Header().Set(NextHeader, ms[len(ms)-1].Name)
	}
	writeJSON(w, 200, nonNil(ms))
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) createMachine(w http.ResponseWriter, r *http.Request, p principal) error {
	var m machine.Machine
	if err := decode(r, &m); err != nil {
		return err
	}
	out, err := s.fleet.Enroll(r.Context(), m, actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// getMachine answers the machine with its revision as the ETag: a client
// that sends it back as If-Match on a change fails (412) when another
// change came first, instead of overwriting it.
func (s *Server) getMachine(w http.ResponseWriter, r *http.Request, _ principal) error {
	m, err := s.fleet.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if rev, err := s.fleet.Revision(r.Context(), m.ID); err == nil {
		w.Header().Set("ETag", etag(rev))
	}
	writeJSON(w, 200, m)
	return nil
}

func etag(rev uint64) string { return `"` + strconv.FormatUint(rev, 10) + `"` }

// ifMatch reads If-Match: a revision ETag, or none (0).
func ifMatch(r *http.Request) (uint64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" || v == "*" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil || n == 0 {
		return 0, errorf(http.StatusBadRequest, "If-Match %q: expected the ETag of GET %s (a revision such as \"12\")", v, r.URL.Path)
	}
	return n, nil
}

func (s *Server) deleteMachine(w http.ResponseWriter, r *http.Request, p principal) error {
	if err := s.fleet.Delete(r.Context(), r.PathValue("id"), actor(p)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) putRecipe(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.SetRecipeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	rev, err := ifMatch(r)
	if err != nil {
		return err
	}
	m, err := s.fleet.SetRecipe(r.Context(), r.PathValue("id"), req.Recipe, actor(p), rev)
	if err != nil {
		return err
	}
	if rev, err := s.fleet.Revision(r.Context(), m.ID); err == nil {
		w.Header().Set("ETag", etag(rev))
	}
	writeJSON(w, 200, m)
	return nil
}

func (s *Server) postInspect(w http.ResponseWriter, r *http.Request, p principal) error {
	// A BMC inventory takes minutes on a slow BMC: more than the server's
	// write timeout allows an ordinary answer.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(10 * time.Minute))
	res, err := s.fleet.Inspect(r.Context(), r.PathValue("id"), actor(p))
	if err != nil {
		return err
	}
	out := wire.Inspection{Machine: res.Machine, Snapshot: res.Snapshot, Recipe: res.Recipe, Note: res.Note,
		Summary: res.Summary, Inventory: res.Taken, Findings: wireFindings(res.Findings)}
	writeJSON(w, 200, out)
	return nil
}

func wireFindings(fs []drift.Finding) []wire.Finding {
	out := make([]wire.Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, wire.Finding{Severity: string(f.Severity), Part: f.Part, Message: f.Message,
			Expected: f.Expected, Found: f.Found, Check: f.Check})
	}
	return out
}

func wireSnapshot(s fleet.Snapshot) wire.Snapshot {
	return wire.Snapshot{Seq: s.Seq, MachineID: s.MachineID, Taken: s.Taken, Inventory: s.Inventory}
}

// getInventory answers the latest snapshot, ?seq=N that one, or with
// ?history=1 every kept one.
func (s *Server) getInventory(w http.ResponseWriter, r *http.Request, _ principal) error {
	id, q := r.PathValue("id"), r.URL.Query()
	if q.Get("history") != "" {
		snaps, err := s.fleet.History(r.Context(), id)
		if err != nil {
			return err
		}
		out := make([]wire.Snapshot, 0, len(snaps))
		for _, sn := range snaps {
			out = append(out, wireSnapshot(sn))
		}
		writeJSON(w, 200, out)
		return nil
	}
	seq, err := uintParam(r, "seq")
	if err != nil {
		return err
	}
	snap, err := s.fleet.Inventory(r.Context(), id, seq)
	if err != nil {
		return err
	}
	writeJSON(w, 200, wireSnapshot(*snap))
	return nil
}

func uintParam(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, errorf(http.StatusBadRequest, "query parameter %s %q: expected a snapshot sequence number", name, v)
	}
	return n, nil
}

func (s *Server) getInventoryDiff(w http.ResponseWriter, r *http.Request, _ principal) error {
	from, err := uintParam(r, "from")
	if err != nil {
		return err
	}
	to, err := uintParam(r, "to")
	if err != nil {
		return err
	}
	d, err := s.fleet.Diff(r.Context(), r.PathValue("id"), from, to)
	if err != nil {
		return err
	}
	writeJSON(w, 200, wire.InventoryDiff{Machine: d.Machine, From: wireSnapshot(d.From), To: wireSnapshot(d.To), Changes: d.Changes})
	return nil
}

// getEvents answers the events after ?since= (at most ?limit=), or with
// ?last=N the newest N; oldest first either way.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request, _ principal) error {
	q := r.URL.Query()
	since, _ := strconv.ParseUint(q.Get("since"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	var evs []machine.Event
	var err error
	if last, _ := strconv.Atoi(q.Get("last")); last > 0 {
		evs, err = s.fleet.LastEvents(r.Context(), r.PathValue("id"), last)
	} else {
		evs, err = s.fleet.Events(r.Context(), r.PathValue("id"), since, limit)
	}
	if err != nil {
		return err
	}
	writeJSON(w, 200, evs)
	return nil
}

func (s *Server) postWaiver(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.WaiverRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	m, err := s.fleet.Waive(r.Context(), r.PathValue("id"), req.Check, actor(p), req.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, m)
	return nil
}

func (s *Server) deleteWaiver(w http.ResponseWriter, r *http.Request, p principal) error {
	m, err := s.fleet.Unwaive(r.Context(), r.PathValue("id"), r.PathValue("check"), actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, 200, m)
	return nil
}

func (s *Server) listRecipes(w http.ResponseWriter, _ *http.Request, _ principal) error {
	writeJSON(w, 200, nonNil(s.recipeNames()))
	return nil
}

func (s *Server) getRecipe(w http.ResponseWriter, r *http.Request, _ principal) error {
	rc, err := s.recipes(r.PathValue("name"))
	if err != nil {
		return errorf(http.StatusNotFound, "recipe %s: %v", r.PathValue("name"), err)
	}
	writeJSON(w, 200, rc)
	return nil
}

// listJobs lists jobs, newest first, ?state= filtering.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, _ principal) error {
	jobs, err := s.engine.Jobs(r.Context(), engine.JobState(r.URL.Query().Get("state")))
	if err != nil {
		return err
	}
	out := make([]wire.Job, 0, len(jobs))
	for i := range jobs {
		out = append(out, *WireJob(&jobs[i]))
	}
	// Newest first; IDs break ties. The page key sorts the same way.
	key := func(j wire.Job) string { return fmt.Sprintf("%020d/%s", 1<<62-j.Created.UnixNano(), j.ID) }
	slices.SortFunc(out, func(a, b wire.Job) int { return strings.Compare(key(a), key(b)) })
	if out, err = page(w, r, out, key); err != nil {
		return err
	}
	writeJSON(w, 200, out)
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, _ principal) error {
	j, err := s.engine.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, 200, WireJob(j))
	return nil
}

func (s *Server) postCancel(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.CancelRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	j, err := s.engine.Cancel(r.Context(), r.PathValue("id"), actor(p), req.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, 200, WireJob(j))
	return nil
}

func (s *Server) postReimage(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.ReimageRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Machines) == 0 {
		return errorf(http.StatusBadRequest, "machines: expected at least one machine name or ID")
	}
	out := make([]wire.ReimageResult, 0, len(req.Machines))
	failed := 0
	for _, name := range req.Machines {
		res := s.reimageOne(r, name, req, p)
		if res.Error != "" {
			failed++
		}
		out = append(out, res)
	}
	code := http.StatusAccepted
	if req.DryRun {
		code = http.StatusOK
	}
	if failed == len(out) {
		code = http.StatusUnprocessableEntity
	}
	writeJSON(w, code, out)
	return nil
}

func (s *Server) reimageOne(r *http.Request, name string, req wire.ReimageRequest, p principal) wire.ReimageResult {
	res := wire.ReimageResult{Machine: name}
	var err error
	if req.DryRun {
		var plan *engine.Plan
		plan, err = s.engine.Preflight(r.Context(), name)
		if plan != nil {
			res.Plan = &wire.Plan{Machine: plan.Machine, Name: plan.Name, Recipe: plan.Recipe, Steps: plan.Steps, Problems: plan.Problems}
		}
	} else {
		var job *engine.Job
		job, err = s.engine.ReimageWith(r.Context(), name, actor(p), req.Reason, engine.ReimageOptions{Handoff: req.Handoff, Warm: req.Warm})
		res.Job = WireJob(job)
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

func (s *Server) postRollout(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.RolloutRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	sp := engine.RolloutSpec{Recipe: req.Recipe, Machines: req.Machines, Canary: req.Canary, Batch: req.Batch,
		MaxFailures: req.MaxFailures, PerRack: req.PerRack, Reason: req.Reason}
	j, err := s.engine.StartRollout(r.Context(), sp, actor(p))
	if err != nil {
		return errorf(http.StatusUnprocessableEntity, "%v", err)
	}
	writeJSON(w, http.StatusAccepted, WireJob(j))
	return nil
}

func wireToken(t fleet.Token) wire.Token {
	return wire.Token{ID: t.ID, Name: t.Name, Scope: t.Scope, Created: t.Created, Expires: t.Expires}
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, _ principal) error {
	toks, err := s.fleet.Tokens(r.Context())
	if err != nil {
		return err
	}
	out := make([]wire.Token, 0, len(toks))
	for _, t := range toks {
		out = append(out, wireToken(t))
	}
	writeJSON(w, 200, out)
	return nil
}

func (s *Server) postToken(w http.ResponseWriter, r *http.Request, p principal) error {
	var req wire.TokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	var ttl time.Duration
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			return errorf(http.StatusBadRequest, "ttl %q: expected a duration such as 720h", req.TTL)
		}
		ttl = d
	}
	secret, t, err := s.fleet.CreateToken(r.Context(), req.Name, req.Scope, ttl, actor(p))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, wire.TokenCreated{Token: wireToken(t), Secret: secret})
	return nil
}

func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request, p principal) error {
	if err := s.fleet.RevokeToken(r.Context(), r.PathValue("id"), actor(p)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listImages(w http.ResponseWriter, _ *http.Request, _ principal) error {
	var imgs []wire.Image
	if s.images != nil {
		var err error
		if imgs, err = s.images(); err != nil {
			return err
		}
	}
	writeJSON(w, 200, nonNil(imgs))
	return nil
}
