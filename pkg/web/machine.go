package web

import (
	"cmp"
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/apiserver"
	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/firmware"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// eventsPerPage is how many events a machine page lists at once.
const eventsPerPage = 50

// machineView is the machine page.
type machineView struct {
	M         machine.Machine
	Recipe    *recipe.Recipe
	Running   *jobView // the job that holds the machine now
	Inventory *inventoryView
	Findings  []drift.Finding
	Firmware  []firmware.Entry
	States    []stateTime
	Reimages  []reimageRow
	Checks    *checksView
	Alerts    []telemetry.Alert
	Power     template.HTML
	Reading   *telemetry.Sample
	Events    []machine.Event
	Older     string // link to older events, "" none
	Newer     string
}

type inventoryView struct {
	Taken    time.Time
	Source   string
	Inv      machine.Inventory
	MemBytes int64
	GPUs     []gpuRow
}

type gpuRow struct {
	machine.GPU
	Link     string
	Max      string
	Degraded bool
}

func (s *Server) machinePage(w http.ResponseWriter, r *http.Request, sess *session) error {
	ctx := r.Context()
	m, err := s.cfg.Fleet.Get(ctx, r.PathValue("name"))
	if err != nil {
		return err
	}
	v := machineView{M: *m}
	if m.Recipe != "" {
		v.Recipe, _ = s.cfg.Recipes(m.Recipe)
	}
	if snap, err := s.cfg.Fleet.Inventory(ctx, m.ID, 0); err == nil {
		v.Inventory = inventoryOf(snap.Taken, snap.Inventory)
		if v.Recipe != nil {
			v.Findings = drift.Check(snap.Inventory, v.Recipe)
			v.Firmware = firmware.MakePlan(nil, snap.Inventory, v.Recipe.Firmware).Entries
		}
	}
	evs, err := s.cfg.Fleet.Events(ctx, m.ID, 0, 0)
	if err != nil {
		return err
	}
	v.States = stateTimes(evs, *m, s.cfg.Now())
	v.Events, v.Older, v.Newer = pageEvents(evs, r, machineURL(m.Name))
	if err := s.machineJobs(ctx, m, &v); err != nil {
		return err
	}
	s.machineTelemetry(m, &v)
	return s.render(w, r, http.StatusOK, "machine", sess, m.Name, v)
}

func inventoryOf(taken time.Time, inv machine.Inventory) *inventoryView {
	iv := &inventoryView{Taken: cmp.Or(taken, inv.Taken), Source: inv.Source, Inv: inv}
	for _, d := range inv.DIMMs {
		iv.MemBytes += d.SizeMiB << 20
	}
	for _, g := range inv.GPUs {
		iv.GPUs = append(iv.GPUs, gpuRow{GPU: g, Link: linkText(g.LinkCurrent), Max: linkText(g.LinkMax), Degraded: degraded(g.LinkCurrent, g.LinkMax)})
	}
	return iv
}

// machineJobs fills the running job, the reimage history and the checks
// of the newest job that ran any.
func (s *Server) machineJobs(ctx context.Context, m *machine.Machine, v *machineView) error {
	jobs, err := s.cfg.Engine.Jobs(ctx, "")
	if err != nil {
		return err
	}
	var mine []*wire.Job
	for i := range jobs {
		j := &jobs[i]
		if j.Kind == "reimage" && len(j.Machines) > 0 && j.Machines[0] == m.ID {
			mine = append(mine, apiserver.WireJob(j))
		}
	}
	slices.SortFunc(mine, func(a, b *wire.Job) int { return b.Created.Compare(a.Created) })
	for _, j := range mine {
		if j.State == string(engine.JobRunning) && v.Running == nil {
			v.Running = jobViewOf(j)
		}
		if v.Checks == nil && j.Reimage != nil && len(j.Reimage.Checks)+len(j.Reimage.BurnIn) > 0 {
			v.Checks = checksOf(j, s.jobRecipe(ctx, j, v.Recipe))
		}
	}
	v.Reimages = reimageRows(mine, 20)
	return nil
}

// jobRecipe is the recipe a job ran: its pinned copy, else the current one.
func (s *Server) jobRecipe(ctx context.Context, j *wire.Job, current *recipe.Recipe) *recipe.Recipe {
	full, err := s.cfg.Engine.Job(ctx, j.ID)
	if err != nil {
		return current
	}
	sp, err := engine.Spec(full)
	if err != nil || len(sp.Pinned) == 0 {
		return current
	}
	var r recipe.Recipe
	if err := json.Unmarshal(sp.Pinned, &r); err != nil {
		return current
	}
	return &r
}

// machineTelemetry fills the alerts, the last reading and the watts of
// the last day.
func (s *Server) machineTelemetry(m *machine.Machine, v *machineView) {
	tel := s.cfg.Telemetry
	if tel == nil {
		return
	}
	for _, a := range tel.Alerts() {
		if a.Machine == m.ID {
			v.Alerts = append(v.Alerts, a)
		}
	}
	for _, c := range tel.Last() {
		if c.Machine.ID == m.ID {
			smp := c.Sample
			v.Reading = &smp
		}
	}
	now := s.cfg.Now()
	bs := tel.Aggregates().Window(m.ID, now.Add(-24*time.Hour), now)
	pts := make([]point, 0, len(bs))
	for _, b := range bs {
		pts = append(pts, point{T: b.Start(), V: b.MeanWatts()})
	}
	if len(pts) > 0 {
		v.Power = lineChart("Watts of "+m.Name+", last 24 hours (5-minute means)", []series{{Name: m.Name, Points: pts}}, "W",
			now.Add(-24*time.Hour), now)
	}
}

// pageEvents picks the page of events the query asks for (?before=SEQ),
// newest first, and the links to the pages around it.
func pageEvents(evs []machine.Event, r *http.Request, base string) (page []machine.Event, older, newer string) {
	before, _ := strconv.ParseUint(r.URL.Query().Get("before"), 10, 64)
	end := len(evs)
	if before > 0 {
		end = slices.IndexFunc(evs, func(e machine.Event) bool { return e.Seq >= before })
		if end < 0 {
			end = len(evs)
		}
	}
	start := max(0, end-eventsPerPage)
	page = slices.Clone(evs[start:end])
	slices.Reverse(page)
	if start > 0 {
		older = base + "?before=" + strconv.FormatUint(evs[start].Seq, 10) + "#events"
	}
	if end < len(evs) {
		newer = base + "#events"
		if end+eventsPerPage < len(evs) {
			newer = base + "?before=" + strconv.FormatUint(evs[end+eventsPerPage].Seq, 10) + "#events"
		}
	}
	return page, older, newer
}
