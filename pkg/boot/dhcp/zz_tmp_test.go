package dhcp

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/store"
)

func TestTmpHandlerThroughput(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pool, _ := ParsePool("10.77.0.0/16,10.77.1.0-10.77.250.255")
	h, err := NewHandler(Config{ServerIP: netip.MustParseAddr("10.77.0.1"), Pools: []Pool{pool}, Store: st, Unknown: UnknownIgnore})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{64, 256} {
		var dt, rt atomic.Int64
		n := 3000
		next := make(chan int)
		var wg sync.WaitGroup
		start := time.Now()
		for range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					mac := net.HardwareAddr{2, byte(w), 0, byte(i >> 16), byte(i >> 8), byte(i)}
					d, _ := dhcpv4.NewDiscovery(mac)
					t0 := time.Now()
					o, err := h.Handle(context.Background(), d, Meta{Port: 67})
					dt.Add(int64(time.Since(t0)))
					if err != nil || o == nil {
						t.Error(err)
						return
					}
					r, _ := dhcpv4.NewRequestFromOffer(o)
					t0 = time.Now()
					a, err := h.Handle(context.Background(), r, Meta{Port: 67})
					rt.Add(int64(time.Since(t0)))
					if err != nil || a == nil || a.MessageType() != dhcpv4.MessageTypeAck {
						t.Error(err, a)
						return
					}
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		el := time.Since(start)
		t.Logf("window %d: %.0f DORA/s; mean discover %v, request %v", w, float64(n)/el.Seconds(), time.Duration(dt.Load()/int64(n)), time.Duration(rt.Load()/int64(n)))
	}
}
