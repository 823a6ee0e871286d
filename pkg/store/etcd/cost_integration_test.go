//go:build integration

package etcd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// countingKV counts the keys etcd returns to reads (Get and the ranges of
// transactions): what a call costs the cluster.
type countingKV struct {
	clientv3.KV
	keys *atomic.Int64
}

func (c countingKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	r, err := c.KV.Get(ctx, key, opts...)
	if err == nil {
		c.keys.Add(int64(len(r.Kvs)))
	}
	return r, err
}

func (c countingKV) Txn(ctx context.Context) clientv3.Txn {
	return &countingTxn{Txn: c.KV.Txn(ctx), keys: c.keys}
}

type countingTxn struct {
	clientv3.Txn
	keys *atomic.Int64
}

func (t *countingTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *countingTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *countingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *countingTxn) Commit() (*clientv3.TxnResponse, error) {
	r, err := t.Txn.Commit()
	if err == nil {
		for _, op := range r.Responses {
			if rr := op.GetResponseRange(); rr != nil {
				t.keys.Add(int64(len(rr.Kvs)))
			}
		}
	}
	return r, err
}

// TestIntegrationCostOfAPage fills a prefix with 1,000 machines, 600
// ended jobs and 600 machine tokens, then counts the keys etcd returns to
// a page of 10 machines, the running jobs and one machine's tokens: each
// costs its answer (a few dozen keys), not the fleet (the contract's
// "a page costs about its machines", "ListJobs and FindTokens at a cost
// independent of other states and tokens").
func TestIntegrationCostOfAPage(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	cli := c.Client(t)
	var keys atomic.Int64
	cli.KV = countingKV{KV: cli.KV, keys: &keys}
	s, err := etcd.OpenClient(ctx, cli, "/cost/", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				m := machine.Machine{Name: fmt.Sprintf("gpu-%04d", i), Recipe: "h100"}
				if err := s.CreateMachine(ctx, &m); err != nil {
					errs <- err
					return
				}
				j := store.Job{Kind: "reimage", State: store.JobSucceeded, Machines: []string{m.ID}}
				if i%2 == 0 && s.CreateJob(ctx, &j) != nil {
					errs <- fmt.Errorf("job of %s", m.Name)
				}
				h := sha256.Sum256([]byte(m.ID))
				if i%2 == 1 && s.PutToken(ctx, store.Token{ID: "t-" + m.ID, Hash: hex.EncodeToString(h[:]), Scope: "machine:" + m.ID}) != nil {
					errs <- fmt.Errorf("token of %s", m.Name)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	running := store.Job{Kind: "reimage", State: store.JobRunning}
	if err := s.CreateJob(ctx, &running); err != nil {
		t.Fatal(err)
	}
	cost := func(what string, limit int64, fn func() (int, error)) {
		t.Helper()
		keys.Store(0)
		got, err := fn()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %d results for %d keys read", what, got, keys.Load())
		if keys.Load() > limit {
			t.Errorf("%s read %d keys; want at most %d (its answer, not the fleet)", what, keys.Load(), limit)
		}
	}
	cost("a page of 10 machines", 25, func() (int, error) {
		ms, err := s.ListMachines(ctx, store.MachineFilter{After: "gpu-0500", Limit: 10})
		if err == nil && (len(ms) != 10 || ms[0].Name != "gpu-0501") {
			err = fmt.Errorf("page = %d machines from %v; want 10 from gpu-0501", len(ms), ms)
		}
		return len(ms), err
	})
	cost("the running jobs", 5, func() (int, error) {
		js, err := s.ListJobs(ctx, store.JobRunning)
		if err == nil && len(js) != 1 {
			err = fmt.Errorf("%d running jobs; want 1", len(js))
		}
		return len(js), err
	})
	cost("one machine's tokens", 5, func() (int, error) {
		m, err := s.GetMachine(ctx, "gpu-0777")
		if err != nil {
			return 0, err
		}
		keys.Store(0)
		ts, err := s.FindTokens(ctx, store.TokenFilter{Scope: "machine:" + m.ID})
		if err == nil && len(ts) != 1 {
			err = fmt.Errorf("%d tokens; want 1", len(ts))
		}
		return len(ts), err
	})
	// The whole list reads every machine: the counter sees them.
	keys.Store(0)
	if ms, err := s.ListMachines(ctx, store.MachineFilter{}); err != nil || len(ms) != n || keys.Load() < n {
		t.Errorf("the whole list: %d machines, %d keys read, %v; want %d of each", len(ms), keys.Load(), err, n)
	}
}
