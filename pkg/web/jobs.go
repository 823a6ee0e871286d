package web

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// jobsPerPage is how many jobs the jobs page lists at once.
const jobsPerPage = 50

func jobURL(id string) string { return Prefix + "jobs/" + url.PathEscape(id) }

// jobView is one job as the pages show it.
type jobView struct {
	J         *wire.Job
	URL       string
	Running   bool
	Progress  progress
	Phases    template.HTML
	StreamURL string
	Machines  []machineRef
}

type machineRef struct{ Name, URL string }

// progress is a reimage's live progress: what the machine page shows and
// the stream sends.
type progress struct {
	State   string  `json:"state"`
	Step    string  `json:"step"`
	Phase   string  `json:"phase"`
	Bytes   int64   `json:"bytes"`
	Total   int64   `json:"total"`
	RateBps float64 `json:"rate_bps"`
	Percent float64 `json:"percent"`
	Text    string  `json:"text"`
	Reason  string  `json:"reason,omitempty"`
}

func progressOf(j *wire.Job) progress {
	p := progress{State: j.State, Step: j.Step, Reason: j.Reason}
	if st := j.Reimage; st != nil {
		p.Bytes, p.Total, p.RateBps = st.Bytes, st.Total, st.RateBps
		p.Percent = math.Round(percent(float64(st.Bytes), float64(st.Total))*10) / 10
		for _, ph := range st.Phases {
			if ph.End.IsZero() {
				p.Phase = ph.Name
			}
		}
	}
	p.Text = progressText(p)
	return p
}

func progressText(p progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %s", p.State, cmp.Or(p.Phase, p.Step))
	if p.Total > 0 {
		fmt.Fprintf(&b, ": image %s of %s (%.1f%%)", formatBytes(p.Bytes), formatBytes(p.Total), p.Percent)
		if p.RateBps > 0 {
			fmt.Fprintf(&b, " at %s/s", formatBytes(int64(p.RateBps)))
		}
	}
	return b.String()
}

func jobViewOf(j *wire.Job) *jobView {
	v := &jobView{J: j, URL: jobURL(j.ID), Running: j.State == string(engine.JobRunning), Progress: progressOf(j)}
	if j.Reimage != nil {
		v.Phases = phaseBar(j.Reimage.Phases, time.Now())
	}
	if v.Running {
		v.StreamURL = jobURL(j.ID) + "/stream"
	}
	return v
}

// reimageRow is one line of a machine's reimage history.
type reimageRow struct {
	ID, URL, State, Reason, Restore, Recipe string
	Created                                 time.Time
	Bar                                     template.HTML
}

func reimageRows(jobs []*wire.Job, n int) []reimageRow {
	var out []reimageRow
	for _, j := range jobs[:min(n, len(jobs))] {
		row := reimageRow{ID: j.ID, URL: jobURL(j.ID), State: j.State, Reason: j.Reason, Created: j.Created}
		if st := j.Reimage; st != nil {
			row.Recipe, row.Bar = st.Recipe, phaseBar(st.Phases, j.Updated)
			if st.RestoreSeconds > 0 {
				row.Restore = formatDuration(st.Restore())
			}
		}
		out = append(out, row)
	}
	return out
}

// checksView is the acceptance and burn-in numbers of one job against the
// gates of the recipe it ran.
type checksView struct {
	JobID, JobURL string
	Rows          []checkRow
}

type checkRow struct {
	Name, Stage, Verdict, Value, Gate, Detail, Metrics string
}

func checksOf(j *wire.Job, r *recipe.Recipe) *checksView {
	v := &checksView{JobID: j.ID, JobURL: jobURL(j.ID)}
	gates := map[string]recipe.Check{}
	if r != nil {
		for _, c := range r.Acceptance.Checks {
			gates[c.Name] = c
		}
	}
	add := func(stage string, cs []wire.CheckResult) {
		for _, c := range cs {
			spec, _ := recipe.LookupCheck(c.Name)
			row := checkRow{Name: c.Name, Stage: stage, Verdict: verdictOf(c), Detail: c.Detail, Metrics: metricsText(c.Metrics)}
			if c.Value != 0 || c.OK {
				row.Value = quantityText(canonical(c.Name, c.Value), spec.Unit)
			}
			row.Gate = gateText(gates[c.Name], spec.Unit)
			v.Rows = append(v.Rows, row)
		}
	}
	add("acceptance", j.Reimage.Checks)
	add("burn-in", j.Reimage.BurnIn)
	return v
}

// verdictOf names a check's outcome as pkg/api's verdicts do: passed,
// failed, could-not-run; waived where an operator let a failure past.
func verdictOf(c wire.CheckResult) string {
	switch {
	case c.Skipped:
		return "could-not-run"
	case c.Waived:
		return "waived"
	case !c.OK:
		return "failed"
	}
	return "passed"
}

// canonical brings an agent check's value to its threshold's unit: the
// agent API reports memory-size in MiB and nic-link in Mbps
// (pkg/agent/checks), thresholds are bytes and bits per second.
func canonical(check string, v float64) float64 {
	switch check {
	case "memory-size":
		return v * (1 << 20)
	case "nic-link":
		return v * 1e6
	}
	return v
}

func gateText(c recipe.Check, u recipe.Unit) string {
	var parts []string
	if !c.Min.IsZero() {
		parts = append(parts, "≥ "+quantityText(c.Min.Value, u))
	}
	if !c.Max.IsZero() {
		parts = append(parts, "≤ "+quantityText(c.Max.Value, u))
	}
	if c.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d ports", c.Count))
	}
	if len(parts) == 0 {
		return "passes or fails"
	}
	return strings.Join(parts, ", ")
}

// quantityText writes a measured value in its check's unit, scaled.
func quantityText(v float64, u recipe.Unit) string {
	type step struct {
		div  float64
		unit string
	}
	scales := map[recipe.Unit][]step{
		recipe.UnitBitsPerSecond:  {{1e12, "Tbps"}, {1e9, "Gbps"}, {1e6, "Mbps"}, {1, "bps"}},
		recipe.UnitBytesPerSecond: {{1e12, "TB/s"}, {1e9, "GB/s"}, {1e6, "MB/s"}, {1, "B/s"}},
		recipe.UnitFlops:          {{1e15, "Pflop/s"}, {1e12, "Tflop/s"}, {1e9, "Gflop/s"}, {1, "flop/s"}},
		recipe.UnitBytes:          {{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1, "B"}},
	}
	for _, s := range scales[u] {
		if math.Abs(v) >= s.div {
			return strconv.FormatFloat(v/s.div, 'g', 4, 64) + " " + s.unit
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func metricsText(ms map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(mapKeys(ms)) {
		parts = append(parts, fmt.Sprintf("%s %g", k, ms[k]))
	}
	return strings.Join(parts, ", ")
}

// jobsView is the jobs page.
type jobsView struct {
	State, Kind string
	States      []string
	Jobs        []jobRow
	Next        string
}

type jobRow struct {
	ID, URL, Kind, State, Step, Reason, Machines string
	Created, Updated                             time.Time
}

func (s *Server) jobsPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	q := r.URL.Query()
	v := jobsView{State: q.Get("state"), Kind: q.Get("kind"), States: []string{"running", "succeeded", "failed", "cancelled", "pending"}}
	if v.State != "" && !slices.Contains(v.States, v.State) {
		return &statusError{http.StatusBadRequest, fmt.Sprintf("state %q: expected one of %s", v.State, strings.Join(v.States, ", "))}
	}
	jobs, err := s.cfg.Engine.Jobs(r.Context(), engine.JobState(v.State))
	if err != nil {
		return err
	}
	names := s.machineNames(r.Context())
	key := func(j engine.Job) string { return fmt.Sprintf("%020d/%s", 1<<62-j.Created.UnixNano(), j.ID) }
	slices.SortFunc(jobs, func(a, b engine.Job) int { return strings.Compare(key(a), key(b)) })
	after, last := q.Get("after"), ""
	for _, j := range jobs {
		if v.Kind != "" && j.Kind != v.Kind || after != "" && key(j) <= after {
			continue
		}
		if len(v.Jobs) == jobsPerPage {
			v.Next = Prefix + "jobs?" + url.Values{"state": {v.State}, "kind": {v.Kind}, "after": {last}}.Encode()
			break
		}
		last = key(j)
		v.Jobs = append(v.Jobs, jobRow{ID: j.ID, URL: jobURL(j.ID), Kind: j.Kind, State: string(j.State), Step: j.Step, Reason: j.Reason,
			Machines: machinesText(j.Machines, names), Created: j.Created, Updated: j.Updated})
	}
	return s.render(w, r, http.StatusOK, "jobs", sess, "Jobs and rollouts", v)
}

// machineNames maps machine IDs to names.
func (s *Server) machineNames(ctx context.Context) map[string]string {
	out := map[string]string{}
	if ms, err := s.cfg.Fleet.List(ctx, fleet.Filter{}); err == nil {
		for _, m := range ms {
			out[m.ID] = m.Name
		}
	}
	return out
}

func machinesText(ids []string, names map[string]string) string {
	var out []string
	for _, id := range ids[:min(3, len(ids))] {
		out = append(out, cmp.Or(names[id], id))
	}
	if len(ids) > 3 {
		out = append(out, fmt.Sprintf("and %d more", len(ids)-3))
	}
	return strings.Join(out, ", ")
}

// jobPageView is one job: a reimage's phases, progress and checks, or a
// rollout's waves and where it stopped.
type jobPageView struct {
	Job     *jobView
	Checks  *checksView
	Rollout *rolloutView
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	j, err := s.cfg.Engine.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	wj := apiserver.WireJob(j)
	v := jobPageView{Job: jobViewOf(wj)}
	names := s.machineNames(r.Context())
	for _, id := range j.Machines {
		name := cmp.Or(names[id], id)
		v.Job.Machines = append(v.Job.Machines, machineRef{Name: name, URL: machineURL(name)})
	}
	if wj.Reimage != nil && len(wj.Reimage.Checks)+len(wj.Reimage.BurnIn) > 0 {
		var cur *recipe.Recipe
		if wj.Reimage.Recipe != "" {
			cur, _ = s.cfg.Recipes(wj.Reimage.Recipe)
		}
		v.Checks = checksOf(wj, s.jobRecipe(r.Context(), wj, cur))
	}
	if wj.Rollout != nil {
		v.Rollout = s.rolloutOf(r.Context(), wj, names)
	}
	return s.render(w, r, http.StatusOK, "job", sess, "Job "+j.ID, v)
}

// stateTime is how long a machine spent in one state.
type stateTime struct {
	State   machine.State
	D       time.Duration
	Percent float64
}

// stateTimes adds up the time between a machine's state transitions, the
// current state up to now. It is pure.
func stateTimes(evs []machine.Event, m machine.Machine, now time.Time) []stateTime {
	total := map[machine.State]time.Duration{}
	cur, since := machine.State(""), m.Created
	for _, e := range evs {
		if e.To == "" {
			continue
		}
		if cur == "" {
			cur = cmp.Or(e.From, m.State)
			if e.From == "" {
				cur, since = e.To, e.Time
				continue
			}
		}
		total[cur] += e.Time.Sub(since)
		cur, since = e.To, e.Time
	}
	if cur == "" {
		cur = m.State
	}
	total[cur] += now.Sub(since)
	var sum time.Duration
	for _, d := range total {
		sum += max(d, 0)
	}
	var out []stateTime
	for _, st := range machine.States {
		if d := total[st]; d > 0 {
			out = append(out, stateTime{State: st, D: d, Percent: math.Round(percent(float64(d), float64(sum))*10) / 10})
		}
	}
	return out
}
