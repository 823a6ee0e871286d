package dhcp

import (
	"errors"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	packets *prometheus.CounterVec
	seconds prometheus.Histogram
	unsents *prometheus.CounterVec
}

// newMetrics registers the DHCP metrics with reg; nil reg = no metrics.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		packets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_dhcp_packets_total",
			Help: "DHCP requests handled, by request type and result (offer, ack, nak, drop, error, stale).",
		}, []string{"type", "result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ingot_dhcp_handle_seconds",
			Help:    "Time to decide a DHCP reply, including the lease commit.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
		}),
		unsents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ingot_dhcp_replies_unsent_total",
			Help: "DHCP replies decided but not sent, by reply type: the socket's send buffer was full (replies to unanswered ARP fill it) or the send failed.",
		}, []string{"type"}),
	}
	var err error
	if m.packets, err = register(reg, m.packets); err != nil {
		return nil, err
	}
	if m.seconds, err = register(reg, m.seconds); err != nil {
		return nil, err
	}
	if m.unsents, err = register(reg, m.unsents); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// its name (a server restarted in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *metrics) observe(req, reply *dhcpv4.DHCPv4, err error, d time.Duration) {
	if m == nil {
		return
	}
	result := "drop"
	switch {
	case err != nil:
		result = "error"
	case reply != nil:
		result = typeLabel(reply.MessageType())
	}
	m.packets.WithLabelValues(typeLabel(req.MessageType()), result).Inc()
	m.seconds.Observe(d.Seconds())
}

// stale counts a request dropped unanswered because it waited too long.
func (m *metrics) stale(req *dhcpv4.DHCPv4) {
	if m == nil {
		return
	}
	m.packets.WithLabelValues(typeLabel(req.MessageType()), "stale").Inc()
}

// unsent counts a reply decided but not sent.
func (m *metrics) unsent(reply *dhcpv4.DHCPv4) {
	if m == nil {
		return
	}
	m.unsents.WithLabelValues(typeLabel(reply.MessageType())).Inc()
}

func typeLabel(t dhcpv4.MessageType) string {
	switch t {
	case dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeOffer, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeDecline,
		dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak, dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeInform:
		return strings.ToLower(t.String())
	}
	return "other"
}
