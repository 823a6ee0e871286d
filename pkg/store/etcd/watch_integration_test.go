//go:build integration

package etcd

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// TestIntegrationWatchRelistsAfterCompaction: the revision a watch
// resumes from is compacted away (keys written and the history compacted
// between its list and its watch): the watcher gets ErrCompacted, lists
// again and ends up holding every key, the ones written in the gap too.
func TestIntegrationWatchRelistsAfterCompaction(t *testing.T) {
	c := etcdtest.Single(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cli := c.Client(t)
	s, err := OpenClient(ctx, cli, "/watch/", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	have := map[string]bool{}
	w := &watcher{s: s, prefix: "/watch/x/",
		onList: func(kvs []*mvccpb.KeyValue, _ int64) {
			mu.Lock()
			defer mu.Unlock()
			clear(have)
			for _, kv := range kvs {
				have[string(kv.Key)] = true
			}
		},
		onEvent: func(ev *clientv3.Event) {
			mu.Lock()
			defer mu.Unlock()
			have[string(ev.Kv.Key)] = ev.Type == clientv3.EventTypePut
		}}
	first := true
	w.afterList = func(rev int64) {
		if !first {
			return
		}
		first = false
		for i := range 5 {
			if _, err := cli.Put(ctx, fmt.Sprintf("/watch/x/%d", i), "v"); err != nil {
				t.Error(err)
			}
		}
		r, err := cli.Get(ctx, "/watch/x/0")
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := cli.Compact(ctx, r.Header.Revision); err != nil {
			t.Error(err)
		}
	}
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := len(have)
		mu.Unlock()
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher holds %d keys; want the 5 written while its revision was compacted", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	if w.relists < 1 {
		t.Errorf("relists = %d; want a list again after ErrCompacted", w.relists)
	}
}
