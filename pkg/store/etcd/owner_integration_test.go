//go:build integration

package etcd_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// TestIntegrationJobTakeover: instance A owns a running job; B cannot
// claim it while A's lease lives. A pauses (its keep-alive stops, its
// contexts stay: a SIGSTOP): within the TTL and a few seconds B's owner
// finds the job orphaned and takes it over; A's claim then fails Holds
// (what the engine asks before a BMC call) and its late write is refused
// with ErrFenced, writing nothing; B's write goes through; when the job
// ends, B releases its fence.
func TestIntegrationJobTakeover(t *testing.T) {
	c := etcdtest.Single(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sa := openPrefix(t, c.Client(t), "/own/", store.Options{})
	sb := openPrefix(t, c.Client(t), "/own/", store.Options{})
	const ttl = 5 * time.Second
	ma, err := sa.Join(ctx, "ingot-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := sb.Join(ctx, "ingot-b", ttl)
	if err != nil {
		t.Fatal(err)
	}
	oa := sa.NewJobOwner(func() *etcd.Member { return ma }, ttl)
	ob := sb.NewJobOwner(func() *etcd.Member { return mb }, ttl)
	j := store.Job{Kind: "reimage", State: store.JobRunning, Step: "bmc"}
	if err := sa.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	actx, err := oa.Claim(ctx, j.ID)
	if err != nil {
		t.Fatalf("A claims a free job: %v", err)
	}
	var mu sync.Mutex
	var bctx context.Context
	adopted := make(chan struct{}, 16)
	go ob.Run(ctx, func(ctx context.Context, id string) {
		if cur, err := sb.GetJob(ctx, id); err == nil && cur.State != store.JobRunning {
			ob.Release(ctx, id)
			return
		}
		if got, err := ob.Claim(ctx, id); err == nil {
			mu.Lock()
			bctx = got
			mu.Unlock()
			adopted <- struct{}{}
		}
	})
	if _, err := ob.Claim(ctx, j.ID); !errors.Is(err, etcd.ErrNotOwner) {
		t.Fatalf("B claims A's job while A lives: %v; want ErrNotOwner", err)
	}
	if _, err := sa.UpdateJob(actx, j.ID, func(j *store.Job) error { j.Attempt = 1; return nil }); err != nil {
		t.Fatalf("A writes its job: %v", err)
	}
	paused := time.Now()
	etcd.PauseKeepAlive(ma)
	if _, err := ob.Claim(ctx, j.ID); !errors.Is(err, etcd.ErrNotOwner) {
		t.Fatalf("B claims A's job just after A paused: %v; want ErrNotOwner (A's lease still runs)", err)
	}
	select {
	case <-adopted:
	case <-time.After(ttl + 15*time.Second):
		t.Fatal("B did not take the job over within the TTL and 15 s")
	}
	took := time.Since(paused)
	t.Logf("B took the job over %s after A paused (TTL %s)", took.Round(time.Millisecond), ttl)
	if took < ttl-2*time.Second {
		t.Errorf("B took the job over %s after A paused; want not before A's lease could expire (%s)", took, ttl)
	}
	if err := oa.Holds(actx); err == nil {
		t.Error("A's claim still Holds after its lease expired; want an error (no BMC call)")
	}
	if _, err := sa.UpdateJob(actx, j.ID, func(j *store.Job) error { j.Step = "late"; return nil }); !errors.Is(err, store.ErrFenced) {
		t.Errorf("A's late write: %v; want ErrFenced", err)
	}
	mu.Lock()
	b := bctx
	mu.Unlock()
	up, err := sb.UpdateJob(b, j.ID, func(j *store.Job) error { j.State = store.JobSucceeded; return nil })
	if err != nil || up.Step == "late" {
		t.Fatalf("B's write: %+v, %v; want it written over A's refused one", up, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := sb.Fence(ctx, "job/"+j.ID)
		if err == nil && v == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fence of the ended job still holds %q, %v; want B to release it", v, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
