package etcd

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// WatchMembers calls fn with the IDs of the live members (Member.ID)
// each time they change, until ctx ends (a watch that re-lists after a
// compaction, see watcher).
func (s *Store) WatchMembers(ctx context.Context, fn func(ids []string)) {
	live := map[string]bool{}
	emit := func() {
		ids := make([]string, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		fn(ids)
	}
	w := &watcher{s: s, prefix: s.k.members(),
		onList: func(kvs []*mvccpb.KeyValue, _ int64) {
			clear(live)
			for _, kv := range kvs {
				live[strings.TrimPrefix(string(kv.Key), s.k.members())] = true
			}
			emit()
		},
		onEvent: func(ev *clientv3.Event) {
			id := strings.TrimPrefix(string(ev.Kv.Key), s.k.members())
			if ev.Type == clientv3.EventTypeDelete {
				delete(live, id)
			} else {
				live[id] = true
			}
			emit()
		}}
	w.run(ctx)
}

// Lead campaigns for the election name with m's session and, each time
// m wins it, runs fn with a context that ends when m loses the lead (its
// session ends) or ctx ends; it returns when ctx or the membership ends.
// At most one member runs fn at a time (etcd's election: the oldest
// campaign key under elect/<name>/ leads).
func (s *Store) Lead(ctx context.Context, m *Member, name string, fn func(ctx context.Context)) {
	e := concurrency.NewElection(m.Session(), s.k.election(name))
	for ctx.Err() == nil && m.Held() {
		cctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(m.Context(), cancel)
		err := e.Campaign(cctx, m.ID())
		if err == nil {
			s.opts.Logger.Info("leading", "election", name, "member", m.ID())
			fn(cctx)
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = e.Resign(rctx)
			rcancel()
		} else if !errors.Is(err, context.Canceled) {
			s.opts.Logger.Warn("campaigning", "election", name, "err", err)
			sleep(cctx, time.Second)
		}
		stop()
		cancel()
	}
}
