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
// commit on 2 of 3 members, or bbolt's lease log fdatasync), machine
// enrolments from 16 (a machine and its first event, as pkg/fleet writes
// one) and the store writes of reimage jobs from 16 (jobWrites: what the
// engine writes for one reimage), on a 3-member etcd cluster on this
// machine and on bbolt (bolt.Open in a temporary directory), in one run,
// reported as rates and the ratio etcd/bolt.
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
	b.Run("Enrol-16-writers", func(b *testing.B) {
		const machines = 1000
		var etcdD, boltD time.Duration
		for range b.N {
			e, bs := open(b)
			etcdD += timeCreates(b, ctx, e, machines, 16)
			boltD += timeCreates(b, ctx, bs, machines, 16)
		}
		report(b, "enrolments", machines*b.N, "etcd", etcdD, "bolt", boltD)
	})
	b.Run("ReimageJobs-16-at-once", func(b *testing.B) {
		const jobs = 160
		var etcdD, boltD time.Duration
		for range b.N {
			e, bs := open(b)
			etcdD += timeJobs(b, ctx, e, jobs, 16)
			boltD += timeJobs(b, ctx, bs, jobs, 16)
		}
		report(b, "jobs", jobs*b.N, "etcd", etcdD, "bolt", boltD)
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
				if err := s.CreateMachine(ctx, &m, machine.Event{Kind: "enrolled", Actor: "bench", Message: "enrolled by the operator API"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// timeJobs runs n reimage jobs' store writes (jobWrites), writers at once,
// each on a machine of its own, and returns how long.
func timeJobs(b *testing.B, ctx context.Context, s store.Store, n, writers int) time.Duration {
	ids := make([]string, n)
	for i := range ids {
		m := machine.Machine{Name: fmt.Sprintf("node-%04d", i), MACs: []string{fmt.Sprintf("52:54:00:02:%02x:%02x", byte(i>>8), byte(i))}, State: machine.StateReady}
		if err := s.CreateMachine(ctx, &m); err != nil {
			b.Fatal(err)
		}
		ids[i] = m.ID
	}
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for v := next.Add(1); v <= int64(n); v = next.Add(1) {
				if err := jobWrites(ctx, s, ids[v-1]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// jobWrites are the store writes of one reimage as the engine, the fleet
// and agentauth make them (counted from pkg/engine: run.go, agent.go,
// reimage.go): the job, the machine's four state changes with their
// events, eleven step changes, progress updates and the end, nine events
// of BMC and agent steps, two inventories, three credentials issued and
// deleted: 33 writes, each durable before the next.
func jobWrites(ctx context.Context, s store.Store, machineID string) error {
	j := store.Job{Kind: "reimage", State: store.JobRunning, Step: "bmc", Machines: []string{machineID}, Spec: []byte(`{"machine":"` + machineID + `"}`)}
	if err := s.CreateJob(ctx, &j); err != nil {
		return err
	}
	state := func(to machine.State) error {
		_, err := s.ChangeMachine(ctx, machineID, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
			m.State = to
			return []machine.Event{{Kind: "state", Actor: "engine", Message: "to " + string(to), Fields: map[string]string{"job": j.ID}}}, nil
		}})
		return err
	}
	step := func(to string) error {
		_, err := s.UpdateJob(ctx, j.ID, func(j *store.Job) error { j.Step, j.Status = to, []byte(`{"phases":{"bmc":{}}}`); return nil })
		return err
	}
	event := func(kind string) error {
		_, err := s.AppendEvent(ctx, machine.Event{Machine: machineID, Kind: kind, Actor: "engine", Message: kind + " for job " + j.ID})
		return err
	}
	var hashes []string
	token := func(kind string) error {
		h := fmt.Sprintf("%064x", fmt.Sprintf("%s/%s", j.ID, kind))[:64]
		hashes = append(hashes, h)
		return s.PutToken(ctx, store.Token{ID: "t-" + kind, Hash: h, Scope: "machine:" + machineID, JobID: j.ID, Kind: kind})
	}
	writes := []func() error{
		func() error { return state(machine.StateReimaging) }, func() error { return step("bmc") },
		func() error { return event("bmc.boot") }, func() error { return token("boot") }, func() error { return step("boot") },
		func() error { return state(machine.StateProvisioning) }, func() error { return token("agent") },
		func() error { return event("agent.task") }, func() error { return step("inventory") },
		func() error { _, err := s.PutInventory(ctx, machineID, machine.Inventory{Source: "agent"}); return err },
		func() error { return event("inventory") }, func() error { return step("image") }, func() error { return step("image") },
		func() error { return step("image") }, func() error { return event("image") }, func() error { return step("checks") },
		func() error { return event("checks") }, func() error { return token("firstboot") }, func() error { return step("handoff") },
		func() error { return event("bmc.handoff") }, func() error { return step("firstboot") },
		func() error { return state(machine.StateVerifying) }, func() error { return event("firstboot") },
		func() error {
			_, err := s.PutInventory(ctx, machineID, machine.Inventory{Source: "verified"})
			return err
		},
		func() error { return step("verify") }, func() error { return event("verify") }, func() error { return state(machine.StateReady) },
		func() error { return event("job.done") },
		func() error {
			_, err := s.UpdateJob(ctx, j.ID, func(j *store.Job) error { j.State = store.JobSucceeded; return nil })
			return err
		},
	}
	for _, w := range writes {
		if err := w(); err != nil {
			return err
		}
	}
	for _, h := range hashes {
		if err := s.DeleteToken(ctx, h); err != nil {
			return err
		}
	}
	return nil
}
