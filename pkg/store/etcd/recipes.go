package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Recipes are files each instance reads from its own folder; the store
// does not hold them. What it holds is what each live instance has in
// force: rcp/<instance name> is a JSON map of recipe name to digest
// (recipe.Recipe.Digest), under the member's lease, so an instance that
// is gone takes its entry with it. Instances compare the entries
// (scaleout) to say when their folders differ.

// PublishRecipes records the recipes m's instance has in force, under m's
// lease (a key per instance name: a rejoin moves it to the new lease).
func (s *Store) PublishRecipes(ctx context.Context, m *Member, digests map[string]string) error {
	b, err := json.Marshal(digests)
	if err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	if _, err := s.cli.Put(ctx, s.k.recipes(m.Name()), string(b), clientv3.WithLease(m.Session().Lease())); err != nil {
		return fmt.Errorf("publishing %s's %d recipe digests to %s: %w", m.Name(), len(digests), s.Location(), err)
	}
	return nil
}

// WatchRecipes calls fn with every live instance's recipes in force
// (instance name -> recipe name -> digest) each time one changes, until
// ctx ends (a watch that re-lists after a compaction, see watcher). An
// entry that does not decode is left out and logged.
func (s *Store) WatchRecipes(ctx context.Context, fn func(byInstance map[string]map[string]string)) {
	all := map[string]map[string]string{}
	prefix := s.k.recipesAll()
	put := func(kv *mvccpb.KeyValue) {
		name := strings.TrimPrefix(string(kv.Key), prefix)
		var d map[string]string
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			s.opts.Logger.Warn("etcd: an instance's recipe digests do not decode; left out", "key", string(kv.Key), "err", err)
			delete(all, name)
			return
		}
		all[name] = d
	}
	emit := func() {
		out := make(map[string]map[string]string, len(all))
		for n, d := range all {
			out[n] = maps.Clone(d)
		}
		fn(out)
	}
	w := &watcher{s: s, prefix: prefix,
		onList: func(kvs []*mvccpb.KeyValue, _ int64) {
			clear(all)
			for _, kv := range kvs {
				put(kv)
			}
			emit()
		},
		onEvent: func(ev *clientv3.Event) {
			if ev.Type == clientv3.EventTypeDelete {
				delete(all, strings.TrimPrefix(string(ev.Kv.Key), prefix))
			} else {
				put(ev.Kv)
			}
			emit()
		}}
	w.run(ctx)
}
