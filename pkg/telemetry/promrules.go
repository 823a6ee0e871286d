package telemetry

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// PrometheusRules writes ingot's alert rules for recipes as a Prometheus
// rules file over the metrics the collector exports, one group per recipe
// with that recipe's limits: Prometheus users alert from their own
// history with the same thresholds ingot holds the machines to.
func PrometheusRules(recipes []*recipe.Recipe) ([]byte, error) {
	type rule struct {
		Alert       string            `yaml:"alert"`
		Expr        string            `yaml:"expr"`
		For         string            `yaml:"for,omitempty"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	type group struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	}
	var groups []group
	sort.Slice(recipes, func(i, j int) bool { return recipes[i].Name < recipes[j].Name })
	for _, r := range recipes {
		if r.Template {
			continue
		}
		l := LimitsOf(r)
		sel := fmt.Sprintf(`recipe=%q`, r.Name)
		forS := promDuration(l.For)
		mk := func(name, severity, expr, summary, action string) rule {
			return rule{Alert: name, Expr: expr, For: forS, Labels: map[string]string{"severity": severity, "source": "ingot"},
				Annotations: map[string]string{"summary": summary + " on {{ $labels.machine }} (rack {{ $labels.rack }}): {{ $value }}", "action": action}}
		}
		g := group{Name: "ingot-" + r.Name}
		for _, rl := range rules {
			var expr string
			switch rl.name {
			case "bmc-unreachable":
				expr = fmt.Sprintf("%s{%s} == 0", MetricUp, sel)
			case "inlet-temperature":
				expr = fmt.Sprintf(`%s{%s,sensor="inlet"} > %g`, MetricTemperature, sel, l.InletMaxC)
			case "gpu-temperature":
				expr = fmt.Sprintf(`%s{%s,sensor="gpu_max"} > %g`, MetricTemperature, sel, l.GPUMaxC)
			case "fan-failed":
				expr = fmt.Sprintf("%s{%s} > 0", MetricFansFailed, sel)
			case "psu-redundancy-lost":
				expr = fmt.Sprintf("%s{%s} == 1", MetricPSULost, sel)
			case "watts-above-load":
				if l.LoadWatts == 0 {
					continue
				}
				expr = fmt.Sprintf("%s{%s} > %g", MetricWatts, sel, l.LoadWatts*(1+l.WattsMarginPct/100))
			case "memory-errors":
				expr = fmt.Sprintf("increase(%s{%s}[1d]) > %d", MetricMemErrors, sel, l.CorrectablePerDay)
			default:
				continue // judged by ingot only (its alert shows as ingot_alerts)
			}
			g.Rules = append(g.Rules, mk(promName(rl.name), rl.severity, expr, rl.summary, rl.action))
		}
		groups = append(groups, g)
	}
	// Everything ingot itself judges firing, whatever the recipe.
	groups = append(groups, group{Name: "ingot", Rules: []rule{{
		Alert: "IngotAlert", Expr: fmt.Sprintf(`%s{state="firing"} == 1`, MetricAlerts),
		Labels:      map[string]string{"severity": "{{ $labels.severity }}", "source": "ingot"},
		Annotations: map[string]string{"summary": "ingot alert {{ $labels.rule }} firing on {{ $labels.machine }} (rack {{ $labels.rack }}); see ingot alerts"},
	}}})
	return yaml.Marshal(map[string]any{"groups": groups})
}

// promName turns inlet-temperature into IngotInletTemperature.
func promName(s string) string {
	var b strings.Builder
	b.WriteString("Ingot")
	for _, w := range strings.Split(s, "-") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// promDuration writes d as Prometheus does (5m, 90s, 1h).
func promDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}
