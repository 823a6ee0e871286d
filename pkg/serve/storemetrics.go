package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingot-dev/ingot/pkg/store"
)

// leaseLogStore is a store with a lease log (store.Bolt).
type leaseLogStore interface {
	LeaseLogStats() store.LeaseLogStats
}

// leaseLogCollector exports the store's lease log counters: every DHCP ACK
// waits for a round of it, so its write latency is the ACK's floor.
// rate(ingot_store_lease_log_write_seconds_total) /
// rate(ingot_store_lease_log_rounds_total) is the mean round latency.
type leaseLogCollector struct{ st leaseLogStore }

var leaseLogDescs = struct {
	rounds, mutations, writeErrors, writeSeconds, applies, applyErrors, applySeconds, pending *prometheus.Desc
}{
	rounds:       prometheus.NewDesc("ingot_store_lease_log_rounds_total", "Lease log rounds written (one fdatasync each, shared by concurrent DHCP ACKs).", nil, nil),
	mutations:    prometheus.NewDesc("ingot_store_lease_log_mutations_total", "Lease mutations written to the lease log.", nil, nil),
	writeErrors:  prometheus.NewDesc("ingot_store_lease_log_write_errors_total", "Lease log rounds whose write or fdatasync failed (their ACKs were not sent).", nil, nil),
	writeSeconds: prometheus.NewDesc("ingot_store_lease_log_write_seconds_total", "Time spent writing and syncing lease log rounds.", nil, nil),
	applies:      prometheus.NewDesc("ingot_store_lease_log_applies_total", "Lease log segments applied to the database.", nil, nil),
	applyErrors:  prometheus.NewDesc("ingot_store_lease_log_apply_errors_total", "Failed applies of the lease log to the database (retried).", nil, nil),
	applySeconds: prometheus.NewDesc("ingot_store_lease_log_apply_seconds_total", "Time spent applying the lease log to the database.", nil, nil),
	pending:      prometheus.NewDesc("ingot_store_lease_log_pending", "Lease mutations durable in the log, not yet applied to the database.", nil, nil),
}

func (c leaseLogCollector) Describe(ch chan<- *prometheus.Desc) {
	d := leaseLogDescs
	for _, x := range []*prometheus.Desc{d.rounds, d.mutations, d.writeErrors, d.writeSeconds, d.applies, d.applyErrors, d.applySeconds, d.pending} {
		ch <- x
	}
}

func (c leaseLogCollector) Collect(ch chan<- prometheus.Metric) {
	s, d := c.st.LeaseLogStats(), leaseLogDescs
	counter := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v)
	}
	counter(d.rounds, float64(s.Rounds))
	counter(d.mutations, float64(s.Mutations))
	counter(d.writeErrors, float64(s.WriteErrors))
	counter(d.writeSeconds, s.WriteSeconds)
	counter(d.applies, float64(s.Applies))
	counter(d.applyErrors, float64(s.ApplyErrors))
	counter(d.applySeconds, s.ApplySeconds)
	ch <- prometheus.MustNewConstMetric(d.pending, prometheus.GaugeValue, float64(s.Pending))
}
