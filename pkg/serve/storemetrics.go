package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingot-dev/ingot/pkg/store"
)

// storeCollector exports the store backend's own numbers (store.Maintainer
// Stats) as ingot_store_NAME: bbolt's lease log counters, for one (every
// DHCP ACK waits for a round of it, so its write latency is the ACK's floor).
type storeCollector struct{ st store.Maintainer }

func (c storeCollector) desc(s store.Stat) *prometheus.Desc {
	return prometheus.NewDesc("ingot_store_"+s.Name, s.Help, nil, nil)
}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.st.Stats() {
		ch <- c.desc(s)
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.st.Stats() {
		kind := prometheus.GaugeValue
		if s.Counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.desc(s), kind, s.Value)
	}
}
