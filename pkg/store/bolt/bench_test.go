package bolt_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
)

// BenchmarkPutLease compares PutLease (the lease log: one fdatasync per
// round, shared by concurrent callers) from 64 goroutines and from one,
// with what PutLease did before the log: one fsynced bbolt db.Update per
// lease (two fsyncs and the B-tree pages).
//
//	go test -run '^$' -bench PutLease -benchtime 2s ./pkg/store/
//
// The "speedup" case writes 640 leases each way and reports the ratio.
func BenchmarkPutLease(b *testing.B) {
	var n atomic.Uint32
	lease := func() store.Lease {
		v := n.Add(1)
		return store.Lease{
			MAC:   fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", byte(v>>24), byte(v>>16), byte(v>>8), byte(v)),
			IP:    netip.AddrFrom4([4]byte{10, byte(v >> 16), byte(v >> 8), byte(v)}),
			State: "bound", Expires: time.Now().Add(time.Hour),
		}
	}
	ctx := context.Background()
	b.Run("log-64-goroutines", func(b *testing.B) {
		s := openTest(b, store.Options{})
		b.SetParallelism((64 + 1) / 2) // RunParallel starts parallelism*GOMAXPROCS goroutines
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.PutLease(ctx, lease()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("bolt-update-sequential", func(b *testing.B) {
		s := openTest(b, store.Options{})
		for i := 0; i < b.N; i++ {
			if err := s.PutLeaseUpdate(ctx, lease()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("log-sequential", func(b *testing.B) {
		s := openTest(b, store.Options{})
		for i := 0; i < b.N; i++ {
			if err := s.PutLease(ctx, lease()); err != nil {
				b.Fatal(err)
			}
		}
	})
	// One run of each, side by side, reported as a ratio.
	b.Run("speedup", func(b *testing.B) {
		const writes = 640
		var batch, update time.Duration
		for i := 0; i < b.N; i++ {
			s := openTest(b, store.Options{})
			start := time.Now()
			var wg sync.WaitGroup
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; k < writes/64; k++ {
						if err := s.PutLease(ctx, lease()); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			batch += time.Since(start)
			start = time.Now()
			for k := 0; k < writes; k++ {
				if err := s.PutLeaseUpdate(ctx, lease()); err != nil {
					b.Fatal(err)
				}
			}
			update += time.Since(start)
		}
		b.ReportMetric(float64(update)/float64(batch), "log-speedup-x")
		b.ReportMetric(float64(batch.Nanoseconds())/float64(writes*b.N), "log-ns/lease")
		b.ReportMetric(float64(update.Nanoseconds())/float64(writes*b.N), "update-ns/lease")
	})
}
