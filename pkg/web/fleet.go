package web

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The fleet page: counts by state and recipe, the failed machines first
// with their reasons, and a grid per rack (one cell a machine, one pip a
// GPU) coloured by the chosen view: worst status, power, inlet
// temperature or firmware drift.

// fleetQuery is the page's filter, from its query string.
type fleetQuery struct {
	Q, Recipe, Rack, State, View string
}

// Views of the grid.
var gridViews = []struct{ Key, Label string }{
	{"status", "Status"}, {"power", "Power"}, {"inlet", "Inlet temperature"}, {"drift", "Firmware drift"},
}

func readFleetQuery(r *http.Request) fleetQuery {
	q := r.URL.Query()
	fq := fleetQuery{Q: strings.TrimSpace(q.Get("q")), Recipe: q.Get("recipe"), Rack: q.Get("rack"), State: q.Get("state"), View: q.Get("view")}
	if !slices.ContainsFunc(gridViews, func(v struct{ Key, Label string }) bool { return v.Key == fq.View }) {
		fq.View = "status"
	}
	return fq
}

// with returns the page's URL with one parameter changed.
func (fq fleetQuery) With(key, value string) string {
	v := url.Values{}
	for k, val := range map[string]string{"q": fq.Q, "recipe": fq.Recipe, "rack": fq.Rack, "state": fq.State, "view": fq.View} {
		if k == key {
			val = value
		}
		if val != "" && !(k == "view" && val == "status") {
			v.Set(k, val)
		}
	}
	if len(v) == 0 {
		return Prefix
	}
	return Prefix + "?" + v.Encode()
}

type countLink struct {
	Name  string
	N     int
	URL   string
	Class string
}

type viewLink struct {
	Label, URL string
	Current    bool
}

type failedRow struct {
	Name, URL, Reason string
	Time              time.Time
}

type fleetView struct {
	Query              fleetQuery
	Views              []viewLink
	Total, Shown       int
	States, Recipes    []countLink
	StateNames         []string
	RecipeNames, Racks []string
	Failed             []failedRow
	MoreFailed         int
	Grid               []rackGrid
	Legend             []legendItem
	NoTelemetry        bool
}

// maxFailedListed is how many failed machines the page lists by name.
const maxFailedListed = 50

func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	fq := readFleetQuery(r)
	all, err := s.cfg.Fleet.List(r.Context(), fleet.Filter{})
	if err != nil {
		return err
	}
	facts := s.gatherFacts(r.Context(), all)
	shown := slices.DeleteFunc(slices.Clone(all), func(m machine.Machine) bool { return !fq.matches(m, facts[m.ID]) })
	v := fleetView{Query: fq, Total: len(all), Shown: len(shown), NoTelemetry: s.cfg.Telemetry == nil}
	for _, gv := range gridViews {
		v.Views = append(v.Views, viewLink{Label: gv.Label, URL: fq.With("view", gv.Key), Current: gv.Key == fq.View})
	}
	v.States, v.Recipes, v.Racks = counts(all, fq)
	for _, st := range machine.States {
		v.StateNames = append(v.StateNames, string(st))
	}
	v.RecipeNames = s.assignableRecipes()
	v.Failed, v.MoreFailed = s.failedRows(r.Context(), shown)
	v.Grid = buildGrid(shown, facts, fq.View)
	v.Legend = legendFor(fq.View)
	return s.render(w, r, http.StatusOK, "fleet", sess, "Fleet", v)
}

// matches applies the filter: the text to name, MACs, BMC address,
// serial and address; the selects exactly.
func (fq fleetQuery) matches(m machine.Machine, f machineFacts) bool {
	if fq.Recipe != "" && m.Recipe != fq.Recipe || fq.Rack != "" && rackOf(m) != fq.Rack || fq.State != "" && string(m.State) != fq.State {
		return false
	}
	if fq.Q == "" {
		return true
	}
	q := strings.ToLower(fq.Q)
	fields := append([]string{m.Name, m.Serial, m.IPv4, m.BMC.Endpoint, bmcHost(m.BMC.Endpoint), m.Recipe, m.Rack, f.serial}, m.MACs...)
	for _, mac := range m.MACs {
		fields = append(fields, strings.ReplaceAll(mac, ":", ""), strings.ReplaceAll(mac, ":", "-"))
	}
	return slices.ContainsFunc(fields, func(s string) bool { return s != "" && strings.Contains(strings.ToLower(s), q) })
}

func bmcHost(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil {
		return u.Hostname()
	}
	return endpoint
}

func rackOf(m machine.Machine) string { return cmp.Or(m.Rack, "(no rack)") }

// counts counts the whole fleet by state and recipe (each a link that
// filters the page) and lists its racks.
func counts(all []machine.Machine, fq fleetQuery) (states, recipes []countLink, racks []string) {
	byState, byRecipe, rackSet := map[machine.State]int{}, map[string]int{}, map[string]bool{}
	for _, m := range all {
		byState[m.State]++
		byRecipe[cmp.Or(m.Recipe, "(none)")]++
		rackSet[rackOf(m)] = true
	}
	for _, st := range machine.States {
		if n := byState[st]; n > 0 {
			states = append(states, countLink{Name: string(st), N: n, URL: fq.With("state", string(st)), Class: "st-" + string(st)})
		}
	}
	for _, name := range slices.Sorted(mapKeys(byRecipe)) {
		link := fq.With("recipe", name)
		if name == "(none)" {
			link = ""
		}
		recipes = append(recipes, countLink{Name: name, N: byRecipe[name], URL: link})
	}
	return states, recipes, slices.Sorted(mapKeys(rackSet))
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// assignableRecipes lists the recipes a machine may use (no templates).
func (s *Server) assignableRecipes() []string {
	var out []string
	for _, n := range s.cfg.RecipeNames() {
		if r, err := s.cfg.Recipes(n); err == nil && !r.IsTemplate() {
			out = append(out, n)
		}
	}
	return out
}

// failedRows lists the failed machines among ms, newest failure first,
// each with the reason its last transition to failed gave.
func (s *Server) failedRows(ctx context.Context, ms []machine.Machine) ([]failedRow, int) {
	var out []failedRow
	more := 0
	for _, m := range ms {
		if m.State != machine.StateFailed {
			continue
		}
		if len(out) == maxFailedListed {
			more++
			continue
		}
		row := failedRow{Name: m.Name, URL: machineURL(m.Name), Reason: "no reason recorded", Time: m.Updated}
		if ev, ok := s.lastFailure(ctx, m.ID); ok {
			row.Reason, row.Time = cmp.Or(ev.Message, row.Reason), ev.Time
		}
		out = append(out, row)
	}
	slices.SortFunc(out, func(a, b failedRow) int { return b.Time.Compare(a.Time) })
	return out, more
}

// lastFailure is a machine's last transition to failed.
func (s *Server) lastFailure(ctx context.Context, id string) (machine.Event, bool) {
	evs, err := s.cfg.Fleet.LastEvents(ctx, id, 50)
	if err != nil {
		return machine.Event{}, false
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].To == machine.StateFailed {
			return evs[i], true
		}
	}
	return machine.Event{}, false
}

func machineURL(name string) string { return Prefix + "machines/" + url.PathEscape(name) }

// recipeCache resolves each recipe once per page.
type recipeCache struct {
	get func(string) (*recipe.Recipe, error)
	m   map[string]*recipe.Recipe
}

func (c *recipeCache) of(name string) *recipe.Recipe {
	if name == "" {
		return nil
	}
	if r, ok := c.m[name]; ok {
		return r
	}
	r, err := c.get(name)
	if err != nil {
		r = nil
	}
	c.m[name] = r
	return r
}
