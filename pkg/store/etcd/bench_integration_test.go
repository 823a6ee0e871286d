//go:build integration

package etcd_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// BenchmarkEtcdVsBolt measures the cost of consensus: PutLease from 64
// concurrent writers (every lease durable before the call returns: a raft
// commit on 2 of 3 members, or bbolt's lease log fdatasync) and machine
// creates from 16, on a 3-member etcd cluster on this machine and on
// bbolt (bolt.Open in a temporary directory), in one run, reported as
// rates and the ratio etcd/bolt.
//
//	go test -tags integration -run '^$' -bench EtcdVsBolt -benchtime 1x ./pkg/store/etcd/
func BenchmarkEtcdVsBolt(b *testing.B) {
	c := etcdtest.Three(b)
	cli := c.Client(b)
	ctx := context.Background()
	var run atomic.Int64
	open := func(b *testing.B) (etcdS *etcd.Store, boltS store.Store) {
		n := run.Add(1)
		e := openPrefix(b, cli, fmt.Sprintf("/bench/%d/", n), store.Options{})
		bs, err := bolt.Open(filepath.Join(b.TempDir(), "ingot.db"), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bs.Close() })
		return e, bs
	}
	b.Run("PutLease-64-writers", func(b *testing.B) {
		const leases = 4000
		var etcdD, boltD time.Duration
		for range b.N {
			e, bs := open(b)
			etcdD += timeLeases(b, ctx, e, leases, 64)
			boltD += timeLeases(b, ctx, bs, leases, 64)
			st := e.LeaseStats()
			b.ReportMetric(float64(st.Calls)/float64(st.Rounds), "leases/txn")
		}
		report(b, "leases", leases*b.N, "etcd", etcdD, "bolt", boltD)
	})
	// What group commit gains: the same 64 writers, one transaction a
	// lease against up to 60.
	b.Run("PutLease-64-writers-grouped-vs-one-txn-a-lease", func(b *testing.B) {
		const leases = 2000
		var grouped, single time.Duration
		for range b.N {
			g, _ := open(b)
			grouped += timeLeases(b, ctx, g, leases, 64)
			one, _ := open(b)
			etcd.SetLeaseRound(one, 1)
			single += timeLeases(b, ctx, one, leases, 64)
		}
		report(b, "leases", leases*b.N, "grouped", grouped, "one-txn-a-lease", single)
	})
	b.Run("CreateMachine-16-writers", func(b *testing.B) {
		const machines = 1000
		var etcdD, boltD time.Duration
		for range b.N {
			e, bs := open(b)
			etcdD += timeCreates(b, ctx, e, machines, 16)
			boltD += timeCreates(b, ctx, bs, machines, 16)
		}
		report(b, "creates", machines*b.N, "etcd", etcdD, "bolt", boltD)
	})
}

// report puts the rates of two runs of n writes (a against b) and their
// ratio in the result.
func report(tb *testing.B, what string, n int, a string, aD time.Duration, b string, bD time.Duration) {
	ar, br := float64(n)/aD.Seconds(), float64(n)/bD.Seconds()
	tb.ReportMetric(ar, a+"-"+what+"/s")
	tb.ReportMetric(br, b+"-"+what+"/s")
	tb.ReportMetric(ar/br, a+"/"+b)
	tb.Logf("%s: %s %.0f/s, %s %.0f/s, ratio %.2f", what, a, ar, b, br, ar/br)
}

// timeLeases puts n leases from writers goroutines and returns how long.
func timeLeases(b *testing.B, ctx context.Context, s store.Store, n, writers int) time.Duration {
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for v := next.Add(1); v <= int64(n); v = next.Add(1) {
				l := store.Lease{MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", byte(v>>8), byte(v)),
					IP: netip.AddrFrom4([4]byte{10, 3, byte(v >> 8), byte(v)}), State: store.LeaseBound, Expires: time.Now().Add(time.Hour)}
				if err := s.PutLease(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// timeCreates creates n machines (a MAC, a serial and a BMC each) from
// writers goroutines and returns how long.
func timeCreates(b *testing.B, ctx context.Context, s store.Store, n, writers int) time.Duration {
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for v := next.Add(1); v <= int64(n); v = next.Add(1) {
				m := machine.Machine{Name: fmt.Sprintf("gpu-%05d", v), MACs: []string{fmt.Sprintf("52:54:00:01:%02x:%02x", byte(v>>8), byte(v))},
					Serial: fmt.Sprintf("SN%05d", v), BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.4.%d.%d", byte(v>>8), byte(v))}}
				if err := s.CreateMachine(ctx, &m); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
