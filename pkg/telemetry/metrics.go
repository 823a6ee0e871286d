package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names the Prometheus collector exports (and the Grafana
// dashboard and the rules file use). Labels: machine, recipe, rack (one
// series per machine: bounded by the fleet), plus sensor, direction, rule,
// severity and state where named.
const (
	MetricUp          = "ingot_node_bmc_up"
	MetricWatts       = "ingot_node_power_watts"
	MetricTemperature = "ingot_node_temperature_celsius"
	MetricPSUWatts    = "ingot_node_psu_watts"
	MetricPSULost     = "ingot_node_psu_redundancy_lost"
	MetricFansFailed  = "ingot_node_fans_failed"
	MetricMemErrors   = "ingot_node_memory_correctable_errors"
	MetricPollSeconds = "ingot_node_bmc_poll_seconds"
	MetricAlerts      = "ingot_alerts"
	MetricSELEntries  = "ingot_node_bmc_log_entries_total"
)

var (
	nodeLabels = []string{"machine", "recipe", "rack"}
	descUp     = prometheus.NewDesc(MetricUp, "1 when the node's BMC answered its last poll.", nodeLabels, nil)
	descWatts  = prometheus.NewDesc(MetricWatts, "Node power draw from its BMC, watts (absent when unknown or 0 W while on).", nodeLabels, nil)
	descTemp   = prometheus.NewDesc(MetricTemperature, "Temperatures from the BMC: inlet, exhaust, hottest CPU, hottest GPU.",
		append(nodeLabels[:3:3], "sensor"), nil)
	descPSU      = prometheus.NewDesc(MetricPSUWatts, "Summed PSU input and output watts (their ratio is the measured efficiency).", append(nodeLabels[:3:3], "direction"), nil)
	descPSULost  = prometheus.NewDesc(MetricPSULost, "1 when PSU redundancy is lost.", nodeLabels, nil)
	descFans     = prometheus.NewDesc(MetricFansFailed, "Fans the BMC reports failed.", nodeLabels, nil)
	descMem      = prometheus.NewDesc(MetricMemErrors, "The BMC's count of correctable memory errors.", nodeLabels, nil)
	descPoll     = prometheus.NewDesc(MetricPollSeconds, "How long the last BMC poll took.", nodeLabels, nil)
	descAlerts   = prometheus.NewDesc(MetricAlerts, "1 for every pending or firing ingot alert.", append(nodeLabels[:3:3], "rule", "severity", "state"), nil)
	descSEL      = prometheus.NewDesc(MetricSELEntries, "BMC event log (SEL) entries seen since ingot serve started.", nodeLabels, nil)
	allMetricDef = []*prometheus.Desc{descUp, descWatts, descTemp, descPSU, descPSULost, descFans, descMem, descPoll, descAlerts, descSEL}
)

// Collector exports the last readings and the alerts.
func (s *Service) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Service }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allMetricDef {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, cur := range c.s.Last() {
		m, smp := cur.Machine, cur.Sample
		l := []string{m.Name, m.Recipe, m.Rack}
		up := 0.0
		if smp.Up {
			up = 1
		}
		g(descUp, up, l...)
		g(descPoll, smp.Took.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(descSEL, prometheus.CounterValue, float64(cur.SELEntries), l...)
		if !smp.Up {
			continue
		}
		if smp.Watts > 0 {
			g(descWatts, smp.Watts, l...)
		}
		for sensor, v := range map[string]float64{"inlet": smp.InletC, "exhaust": smp.ExhaustC, "cpu_max": smp.CPUMaxC, "gpu_max": smp.GPUMaxC} {
			if v != 0 {
				g(descTemp, v, append(l, sensor)...)
			}
		}
		if smp.PSUInputWatts > 0 {
			g(descPSU, smp.PSUInputWatts, append(l, "input")...)
		}
		if smp.PSUOutputWatts > 0 {
			g(descPSU, smp.PSUOutputWatts, append(l, "output")...)
		}
		lost := 0.0
		if smp.PSURedundancyLost {
			lost = 1
		}
		g(descPSULost, lost, l...)
		g(descFans, float64(len(smp.FansFailed)), l...)
		if smp.MemCorrectable >= 0 {
			g(descMem, float64(smp.MemCorrectable), l...)
		}
	}
	for _, a := range c.s.Alerts() {
		g(descAlerts, 1, a.Name, a.Recipe, a.Rack, a.Rule, a.Severity, a.State)
	}
}
