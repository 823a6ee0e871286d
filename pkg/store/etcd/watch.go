package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watcher follows the keys under a prefix: a full list, then every change
// after it. When the watch cannot go on (the revision it resumes from was
// compacted away: ErrCompacted; the member lost its leader; the stream
// failed), it lists again and watches from the new list's revision: what
// changed meanwhile is in the new list. Nothing is resumed blindly from a
// revision that is gone, and nothing is missed.
type watcher struct {
	s      *Store
	prefix string
	// onList gets every key under the prefix at revision rev (a fresh
	// start: the receiver replaces what it knew).
	onList func(kvs []*mvccpb.KeyValue, rev int64)
	// onEvent gets each change after the list, in order.
	onEvent func(ev *clientv3.Event)
	// afterList runs between a list and its watch (tests compact there).
	afterList func(rev int64)
	// relists counts the lists after the first (Relists).
	relists int
}

// errRelist ends a watch stream that must start over from a list.
var errRelist = errors.New("watch must re-list")

// run lists and watches until ctx ends.
func (w *watcher) run(ctx context.Context) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			w.relists++
		}
		rev, err := w.list(ctx)
		if err != nil {
			w.s.opts.Logger.Warn("etcd watch: listing failed; trying again", "prefix", w.prefix, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		if w.afterList != nil {
			w.afterList(rev)
		}
		err = w.follow(ctx, rev+1)
		if ctx.Err() != nil {
			return
		}
		w.s.opts.Logger.Info("etcd watch: re-listing", "prefix", w.prefix, "reason", err)
		sleep(ctx, 100*time.Millisecond)
	}
}

func (w *watcher) list(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := w.s.cli.Get(lctx, w.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	w.onList(resp.Kvs, resp.Header.Revision)
	return resp.Header.Revision, nil
}

// follow delivers the changes from rev until the stream ends, and says
// why it ended.
func (w *watcher) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := w.s.cli.Watch(wctx, w.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithPrevKV())
	for resp := range ch {
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return errors.Join(errRelist, err) // history gone: start from a list
			}
			return err
		}
		for _, ev := range resp.Events {
			w.onEvent(ev)
		}
	}
	return errors.Join(errRelist, errors.New("watch stream closed"))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
