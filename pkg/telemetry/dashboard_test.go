package telemetry

import (
	"encoding/json"
	"regexp"
	"slices"
	"testing"
)

// Every query of the shipped Grafana dashboard names only metrics the
// collector exports (Grafana is not in Debian: this is its test).
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		t.Fatal(err)
	}
	exported := []string{MetricUp, MetricWatts, MetricTemperature, MetricPSUWatts, MetricPSULost, MetricFansFailed, MetricMemErrors, MetricPollSeconds, MetricAlerts}
	name := regexp.MustCompile(`\bingot_[a-z_]+`)
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if s, ok := v.Query.(string); ok {
			exprs = append(exprs, s)
		}
	}
	used := 0
	for _, e := range exprs {
		for _, m := range name.FindAllString(e, -1) {
			used++
			if !slices.Contains(exported, m) {
				t.Errorf("query %q names %s, which ingot does not export", e, m)
			}
		}
	}
	if used < len(exported)-1 {
		t.Errorf("the dashboard uses %d metric names; expected most of the %d exported", used, len(exported))
	}
}
