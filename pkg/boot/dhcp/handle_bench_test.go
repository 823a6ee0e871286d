package dhcp

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/store"
)

// BenchmarkHandleBolt measures the decision and the lease commit without
// the network: max(b.N, 2000) DORA exchanges (so -benchtime 1x still
// measures), 64 in flight, against the real bbolt store (fsync per round).
//
//	go test -run '^$' -bench HandleBolt ./pkg/boot/dhcp/
func BenchmarkHandleBolt(b *testing.B) {
	st, err := bolt.Open(filepath.Join(b.TempDir(), "ingot.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	pool, _ := ParsePool("10.77.0.0/16,10.77.1.0-10.77.250.255")
	h, err := NewHandler(Config{ServerIP: netip.MustParseAddr("10.77.0.1"), Pools: []Pool{pool}, Store: st,
		Unknown: UnknownIgnore, HTTPBase: "http://10.77.0.1:8080"})
	if err != nil {
		b.Fatal(err)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				mac := net.HardwareAddr{2, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}
				d, _ := dhcpv4.NewDiscovery(mac)
				o, err := h.Handle(context.Background(), d, Meta{Port: 67})
				if err != nil || o == nil {
					b.Error("no offer", err)
					continue
				}
				r, _ := dhcpv4.NewRequestFromOffer(o)
				if a, err := h.Handle(context.Background(), r, Meta{Port: 67}); err != nil || a == nil || a.MessageType() != dhcpv4.MessageTypeAck {
					b.Error("no ack", err)
				}
			}
		}()
	}
	n := max(b.N, 2000)
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "DORA/s")
}
