package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/telemetry"
)

func (s *Server) listAlerts(w http.ResponseWriter, _ *http.Request, _ principal) error {
	out := []wire.Alert{}
	if s.telemetry != nil {
		for _, a := range s.telemetry.Alerts() {
			out = append(out, wire.Alert{Rule: a.Rule, Machine: a.Name, Rack: a.Rack, Recipe: a.Recipe, Severity: a.Severity,
				State: a.State, Reading: a.Reading, Threshold: a.Threshold, Summary: a.Summary, Action: a.Action,
				Since: a.Since, FiredAt: a.FiredAt, Silenced: a.Silenced, SilencedBy: a.SilencedBy, SilencedUntil: a.SilencedUntil})
		}
	}
	writeJSON(w, 200, out)
	return nil
}

// errNoTelemetry answers silences on a server that polls no BMCs.
var errNoTelemetry = &httpError{http.StatusNotImplemented, "this server polls no BMCs (serve --telemetry-interval 0): there are no alerts to silence"}

// postSilence silences one machine's alert of one rule: the same rule
// (telemetry.Silence) and event as the dashboard's button.
func (s *Server) postSilence(w http.ResponseWriter, r *http.Request, p principal) error {
	if s.telemetry == nil {
		return errNoTelemetry
	}
	var req wire.SilenceRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	d, err := time.ParseDuration(req.For)
	if err != nil {
		return &httpError{http.StatusBadRequest, fmt.Sprintf("for %q: expected a duration such as 4h (at most %s)", req.For, telemetry.MaxSilence)}
	}
	m, err := s.fleet.Get(r.Context(), req.Machine)
	if err != nil {
		return err
	}
	sl, err := s.telemetry.Silence(r.Context(), m.ID, req.Rule, d, actor(p), strings.TrimSpace(req.Reason))
	if errors.Is(err, telemetry.ErrSilence) {
		return &httpError{http.StatusBadRequest, err.Error()}
	}
	if err != nil {
		return err
	}
	writeJSON(w, 200, wire.Silence{Machine: m.Name, Rule: sl.Rule, Actor: sl.Actor, Reason: sl.Reason, Created: sl.Created, Until: sl.Until})
	return nil
}

// listSilences lists the silences in force, soonest to end first.
func (s *Server) listSilences(w http.ResponseWriter, r *http.Request, _ principal) error {
	out := []wire.Silence{}
	if s.telemetry != nil {
		for _, sl := range s.telemetry.Silences() {
			name := sl.Machine
			if m, err := s.fleet.Get(r.Context(), sl.Machine); err == nil {
				name = m.Name
			}
			out = append(out, wire.Silence{Machine: name, Rule: sl.Rule, Actor: sl.Actor, Reason: sl.Reason, Created: sl.Created, Until: sl.Until})
		}
	}
	writeJSON(w, 200, out)
	return nil
}

func (s *Server) listReadings(w http.ResponseWriter, _ *http.Request, _ principal) error {
	out := []wire.Reading{}
	if s.telemetry != nil {
		for _, c := range s.telemetry.Last() {
			m, r := c.Machine, c.Sample
			out = append(out, wire.Reading{Machine: m.Name, Rack: m.Rack, Recipe: m.Recipe, Time: r.Time, Up: r.Up, Error: r.Err,
				PowerOn: r.PowerOn, Watts: r.Watts, PSUInputWatts: r.PSUInputWatts, PSUOutputWatts: r.PSUOutputWatts,
				PSURedundancyLost: r.PSURedundancyLost, InletC: r.InletC, ExhaustC: r.ExhaustC, CPUMaxC: r.CPUMaxC, GPUMaxC: r.GPUMaxC,
				FansFailed: r.FansFailed, Path: r.Path, PollSeconds: r.Took.Seconds(), Problems: r.Problems})
		}
	}
	writeJSON(w, 200, out)
	return nil
}

func (s *Server) getPowerReport(w http.ResponseWriter, r *http.Request, _ principal) error {
	if s.telemetry == nil {
		return errorf(http.StatusNotImplemented, "this server polls no BMCs (serve --telemetry-interval 0)")
	}
	q := r.URL.Query()
	window := 24 * time.Hour
	if v := q.Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errorf(http.StatusBadRequest, "window %q: expected a duration such as 24h", v)
		}
		window = d
	}
	var num [2]float64
	for i, k := range []string{"tariff", "pue"} {
		if v := q.Get(k); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return errorf(http.StatusBadRequest, "%s %q: expected a number of 0 or more", k, v)
			}
			num[i] = f
		}
	}
	rep, err := s.telemetry.Report(r.Context(), window, q.Get("rack"), num[0], num[1])
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	out := wire.PowerReport{Window: rep.Window.String(), Nodes: []wire.NodePower{}, Racks: []wire.RackPower{}}
	for _, n := range rep.Nodes {
		out.Nodes = append(out.Nodes, wire.NodePower{Machine: n.Machine, Rack: n.Rack, Recipe: n.Recipe, GPUs: n.GPUs, Buckets: n.Buckets,
			MedianWatts: n.MedianW, P95Watts: n.P95W, MeanWatts: n.MeanW, KWhPerDay: n.KWhPerDay, CostPerDay: n.CostPerDay,
			CostPerGPUHour: n.CostPerGPUHour, PSUEfficiency: n.PSUEfficiency, WattsPerGPU: n.WattsPerGPU, Inefficient: n.Inefficient})
	}
	for _, rk := range rep.Racks {
		out.Racks = append(out.Racks, wire.RackPower{Rack: rk.Rack, Nodes: rk.Nodes, MedianWatts: rk.MedianW, P95Watts: rk.P95W,
			BudgetWatts: rk.BudgetW, Headroom: rk.HeadroomW, KWhPerDay: rk.KWhPerDay, CostPerDay: rk.CostPerDay, OverBudget: rk.OverBudget,
			PUE: rk.PUE, Tariff: rk.Tariff})
	}
	writeJSON(w, 200, out)
	return nil
}

func (s *Server) getCapacityPlan(w http.ResponseWriter, r *http.Request, _ principal) error {
	if s.telemetry == nil {
		return errorf(http.StatusNotImplemented, "this server polls no BMCs (serve --telemetry-interval 0)")
	}
	q := r.URL.Query()
	rc, err := s.recipes(q.Get("recipe"))
	if err != nil {
		return errorf(http.StatusBadRequest, "recipe %q: %v", q.Get("recipe"), err)
	}
	count, err := strconv.Atoi(q.Get("count"))
	if err != nil {
		return errorf(http.StatusBadRequest, "count %q: expected a number of servers", q.Get("count"))
	}
	var f [3]float64
	for i, k := range []string{"utilization", "tariff", "pue"} {
		v := q.Get(k)
		if v == "" {
			continue
		}
		if f[i], err = strconv.ParseFloat(v, 64); err != nil || f[i] < 0 {
			return errorf(http.StatusBadRequest, "%s %q: expected a number of 0 or more", k, v)
		}
	}
	if f[0] == 0 {
		f[0] = 0.8 // conservative: GPUs rarely idle in a training fleet
	}
	p, err := s.telemetry.PlanCapacity(r.Context(), rc, count, f[0], f[1], f[2])
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	out := wire.CapacityPlan{Recipe: p.Recipe, Count: p.Count, LoadWatts: p.LoadWatts, IdleWatts: p.IdleWatts, Measured: p.Measured,
		Nodes: p.Nodes, Utilization: p.Utilization, KWhPerMonth: p.KWhPerMonth, CostPerMonth: p.CostPerMonth, CostPerGPUHour: p.CostPerGPUHour,
		PUE: p.PUE, Tariff: p.Tariff, PlannedAtLoadKW: p.PlannedAtLoadKW, Racks: []wire.RackRoom{}}
	for _, rr := range p.Racks {
		out.Racks = append(out.Racks, wire.RackRoom{Rack: rr.Rack, Headroom: rr.HeadroomW, Fits: rr.Fits})
	}
	writeJSON(w, 200, out)
	return nil
}
