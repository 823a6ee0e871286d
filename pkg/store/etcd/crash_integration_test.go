//go:build integration

package etcd_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// TestIntegrationPowerCut kills every member of a 3-member cluster with
// SIGKILL (what a power cut leaves: etcd's WAL as fsynced) while writers
// put leases and append events, starts them again, and checks that every
// write acknowledged before the cut is there, the event numbers have no
// gaps, and the prefix is consistent (Check). This is the bbolt backend's
// crash test (a writer killed mid-write) moved to where etcd keeps the
// data: the members.
func TestIntegrationPowerCut(t *testing.T) {
	c := etcdtest.Three(t)
	ctx := context.Background()
	cli := c.Client(t)
	s := openPrefix(t, cli, "/cut/", store.Options{})
	m := machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(ctx, &m); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		leases []string
		events atomic.Int64
		n      atomic.Int64
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				if w%2 == 0 {
					v := n.Add(1)
					mac := fmt.Sprintf("02:00:00:01:%02x:%02x", byte(v>>8), byte(v))
					l := store.Lease{MAC: mac, IP: netip.AddrFrom4([4]byte{10, 5, byte(v >> 8), byte(v)}),
						State: store.LeaseBound, Expires: time.Now().Add(time.Hour)}
					if s.PutLease(wctx, l) == nil {
						mu.Lock()
						leases = append(leases, mac)
						mu.Unlock()
					}
				} else if _, err := s.AppendEvent(wctx, machine.Event{Machine: m.ID, Kind: "x"}); err == nil {
					events.Add(1)
				}
				cancel()
			}
		})
	}
	time.Sleep(2 * time.Second)
	for i := range c.Members { // as close to together as signals go
		go c.Kill(i)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	acked := append([]string(nil), leases...)
	mu.Unlock()
	c.RestartAll()
	after, err := etcd.OpenClient(ctx, cli, "/cut/", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	lost := 0
	for _, mac := range acked {
		if _, err := after.LeaseByMAC(ctx, mac); err != nil {
			lost++
		}
	}
	evs, err := after.Events(ctx, m.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d after the cut; want %d", i, ev.Seq, i+1)
		}
	}
	t.Logf("%d leases and %d events acknowledged before the cut; %d leases lost, %d events stored", len(acked), events.Load(), lost, len(evs))
	if lost > 0 || int64(len(evs)) < events.Load() || len(acked) == 0 || events.Load() == 0 {
		t.Errorf("%d acknowledged leases lost, %d events stored of %d acknowledged; want none lost", lost, len(evs), events.Load())
	}
	if err := after.Check(ctx); err != nil {
		t.Errorf("after the cut: %v", err)
	}
}
