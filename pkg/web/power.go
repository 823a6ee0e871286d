package web

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/fleet"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

// nodesPerPage is how many nodes the power page lists at once.
const nodesPerPage = 50

var powerWindows = []struct {
	Key string
	D   time.Duration
}{{"1h", time.Hour}, {"6h", 6 * time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// powerView is the power and cost page: per rack its draw over time and
// against its budget, per node its cost, the inefficient nodes first.
type powerView struct {
	Window      string
	Windows     []viewLink
	Off         bool // no telemetry
	Racks       []rackPowerRow
	Inefficient []telemetry.NodePower
	Nodes       []nodeRow
	Page, Pages int
	PrevURL     string
	NextURL     string
	Total       fleetPower
	Node        *nodeChart
}

type rackPowerRow struct {
	telemetry.RackPower
	Name     string
	Chart    template.HTML
	Headroom float64 // percent of the budget left
}

type nodeRow struct {
	telemetry.NodePower
	URL string
}

type nodeChart struct {
	Name, URL string
	Chart     template.HTML
}

// fleetPower sums the report: energy and cost a day, cost per GPU-hour.
type fleetPower struct {
	Nodes             int
	KWhPerDay, PerDay float64
	GPUs              int
	PerGPUHour        float64
	Currency          bool
}

func (s *Server) powerPage(w http.ResponseWriter, r *http.Request, sess *session) error {
	q := r.URL.Query()
	v := powerView{Window: cmp.Or(q.Get("window"), "24h")}
	window := time.Duration(0)
	for _, pw := range powerWindows {
		v.Windows = append(v.Windows, viewLink{Label: pw.Key, URL: Prefix + "power?window=" + pw.Key, Current: pw.Key == v.Window})
		if pw.Key == v.Window {
			window = pw.D
		}
	}
	if window == 0 {
		return &statusError{http.StatusBadRequest, fmt.Sprintf("window %q: expected 1h, 6h, 24h or 7d", v.Window)}
	}
	tel := s.cfg.Telemetry
	if tel == nil {
		v.Off = true
		return s.render(w, r, http.StatusOK, "power", sess, "Power and cost", v)
	}
	rep, err := tel.Report(r.Context(), window, "", 0, 0)
	if err != nil {
		return &statusError{http.StatusBadRequest, err.Error()}
	}
	ms, err := s.cfg.Fleet.List(r.Context(), fleet.Filter{})
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	charts := rackCharts(tel.Aggregates(), ms, now.Add(-window), now)
	for _, rk := range rep.Racks {
		name := cmp.Or(rk.Rack, "(no rack)")
		v.Racks = append(v.Racks, rackPowerRow{RackPower: rk, Name: name, Chart: charts[rk.Rack], Headroom: percent(rk.HeadroomW, rk.BudgetW)})
	}
	v.Total = totals(rep)
	nodes := slices.Clone(rep.Nodes)
	slices.SortStableFunc(nodes, func(a, b telemetry.NodePower) int { return cmp.Compare(b.CostPerDay, a.CostPerDay) })
	for _, n := range nodes {
		if n.Inefficient != "" {
			v.Inefficient = append(v.Inefficient, n)
		}
	}
	v.Page, _ = strconv.Atoi(q.Get("page"))
	v.Page = max(v.Page, 1)
	v.Pages = max(1, (len(nodes)+nodesPerPage-1)/nodesPerPage)
	v.Page = min(v.Page, v.Pages)
	for _, n := range nodes[(v.Page-1)*nodesPerPage : min(len(nodes), v.Page*nodesPerPage)] {
		v.Nodes = append(v.Nodes, nodeRow{NodePower: n, URL: Prefix + "power?" + url.Values{"window": {v.Window}, "node": {n.Machine}}.Encode() + "#node"})
	}
	page := func(p int) string {
		return Prefix + "power?" + url.Values{"window": {v.Window}, "page": {strconv.Itoa(p)}}.Encode() + "#nodes"
	}
	if v.Page > 1 {
		v.PrevURL = page(v.Page - 1)
	}
	if v.Page < v.Pages {
		v.NextURL = page(v.Page + 1)
	}
	if name := q.Get("node"); name != "" {
		v.Node = s.nodeChart(r.Context(), name, now.Add(-window), now)
	}
	return s.render(w, r, http.StatusOK, "power", sess, "Power and cost", v)
}

func totals(rep telemetry.Report) fleetPower {
	var t fleetPower
	for _, n := range rep.Nodes {
		t.Nodes++
		t.KWhPerDay += n.KWhPerDay
		t.PerDay += n.CostPerDay
		if n.Buckets > 0 {
			t.GPUs += n.GPUs
		}
	}
	if t.GPUs > 0 {
		t.PerGPUHour = t.PerDay / 24 / float64(t.GPUs)
	}
	t.Currency = t.PerDay > 0
	return t
}

// rackCharts draws each rack's draw over [from, to]: the sum of its
// machines' 5-minute mean watts, bucket by bucket.
func rackCharts(agg *telemetry.Aggregator, ms []machine.Machine, from, to time.Time) map[string]template.HTML {
	sums := map[string]map[time.Time]float64{}
	for _, m := range ms {
		if m.BMC.Endpoint == "" {
			continue
		}
		if sums[m.Rack] == nil {
			sums[m.Rack] = map[time.Time]float64{}
		}
		for _, b := range agg.Window(m.ID, from, to) {
			sums[m.Rack][b.Start()] += b.MeanWatts()
		}
	}
	out := map[string]template.HTML{}
	for rk, byT := range sums {
		if len(byT) == 0 {
			continue
		}
		var pts []point
		for _, t := range slices.SortedFunc(mapKeys(byT), func(a, b time.Time) int { return a.Compare(b) }) {
			pts = append(pts, point{T: t, V: byT[t]})
		}
		out[rk] = lineChart("Watts of rack "+cmp.Or(rk, "(no rack)")+" (sum of its nodes' 5-minute means)", []series{{Name: rk, Points: pts}}, "W", from, to)
	}
	return out
}

func (s *Server) nodeChart(ctx context.Context, name string, from, to time.Time) *nodeChart {
	m, err := s.cfg.Fleet.Get(ctx, name)
	if err != nil {
		return nil
	}
	var pts []point
	for _, b := range s.cfg.Telemetry.Aggregates().Window(m.ID, from, to) {
		pts = append(pts, point{T: b.Start(), V: b.MeanWatts()})
	}
	nc := &nodeChart{Name: m.Name, URL: machineURL(m.Name)}
	if len(pts) > 0 {
		nc.Chart = lineChart("Watts of "+m.Name+" (5-minute means)", []series{{Name: m.Name, Points: pts}}, "W", from, to)
	}
	return nc
}
