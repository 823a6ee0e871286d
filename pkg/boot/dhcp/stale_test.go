package dhcp

import (
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestCopiesStale: a request is dropped after waiting for a worker only
// when a newer copy of it is queued (its client sent it again), or when it
// waited past staleAfter. A DISCOVER that waited 2 s for a worker, the only
// copy queued, is answered: PXE firmware would otherwise wait 4 s for its
// retransmission (it was dropped after 1 s before).
func TestCopiesStale(t *testing.T) {
	t0 := time.Unix(100, 0)
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	req := func(mac net.HardwareAddr, xid byte, typ dhcpv4.MessageType) *dhcpv4.DHCPv4 {
		m, err := dhcpv4.New(dhcpv4.WithHwAddr(mac), dhcpv4.WithTransactionID(dhcpv4.TransactionID{0, 0, 0, xid}), dhcpv4.WithMessageType(typ))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	disc := req(mac, 1, dhcpv4.MessageTypeDiscover)
	type arrival struct {
		req *dhcpv4.DHCPv4
		at  time.Duration
	}
	tests := map[string]struct {
		queued []arrival
		take   arrival // the copy a worker takes
		now    time.Duration
		want   bool
	}{
		"the only copy, 2 s old: answered": {
			[]arrival{{disc, 0}}, arrival{disc, 0}, 2 * time.Second, false},
		"the only copy, past staleAfter: dropped": {
			[]arrival{{disc, 0}}, arrival{disc, 0}, staleAfter + time.Millisecond, true},
		"a newer copy is queued: the old one is dropped": {
			[]arrival{{disc, 0}, {disc, time.Second}}, arrival{disc, 0}, 1100 * time.Millisecond, true},
		"the newer copy itself: answered": {
			[]arrival{{disc, 0}, {disc, time.Second}}, arrival{disc, time.Second}, 1100 * time.Millisecond, false},
		"another client's copy is no retransmission": {
			[]arrival{{disc, 0}, {req(net.HardwareAddr{0x02, 0, 0, 0, 0, 2}, 1, dhcpv4.MessageTypeDiscover), time.Second}},
			arrival{disc, 0}, 1100 * time.Millisecond, false},
		"another transaction is no retransmission": {
			[]arrival{{disc, 0}, {req(mac, 2, dhcpv4.MessageTypeDiscover), time.Second}}, arrival{disc, 0}, 1100 * time.Millisecond, false},
		"the REQUEST after a DISCOVER is no retransmission": {
			[]arrival{{disc, 0}, {req(mac, 1, dhcpv4.MessageTypeRequest), time.Second}}, arrival{disc, 0}, 1100 * time.Millisecond, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCopies()
			for _, a := range tc.queued {
				c.arrived(job{req: a.req, at: t0.Add(a.at)})
			}
			if got := c.stale(job{req: tc.take.req, at: t0.Add(tc.take.at)}, t0.Add(tc.now)); got != tc.want {
				t.Errorf("stale = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCopiesForget: taking the latest copy forgets the request, so the
// table holds only requests still queued.
func TestCopiesForget(t *testing.T) {
	c := newCopies()
	m, _ := dhcpv4.NewDiscovery(net.HardwareAddr{0x02, 0, 0, 0, 0, 1})
	t0 := time.Unix(100, 0)
	c.arrived(job{req: m, at: t0})
	c.arrived(job{req: m, at: t0.Add(time.Second)})
	c.stale(job{req: m, at: t0}, t0.Add(time.Second))
	if len(c.latest) != 1 {
		t.Fatalf("after taking the older copy: %d entries, want 1 (the newer is still queued)", len(c.latest))
	}
	c.stale(job{req: m, at: t0.Add(time.Second)}, t0.Add(time.Second))
	if len(c.latest) != 0 {
		t.Fatalf("after taking the latest copy: %d entries, want 0", len(c.latest))
	}
}
