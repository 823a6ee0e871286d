//go:build integration

package scaleout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// TestIntegrationQuotaAlarmAndRecovery fills a one-member cluster with a
// 64 MiB quota by rewriting one key (etcd keeps every revision until it is
// compacted): the leader's check alerts past 80 % of the quota; writes
// go on until etcd raises NOSPACE and refuses them; the next check
// compacts, defragments and disarms the alarm, and writes go through
// again, with the alert cleared.
func TestIntegrationQuotaAlarmAndRecovery(t *testing.T) {
	const quota = 64 << 20
	c := etcdtest.Start(t, 1, etcdtest.Options{QuotaBytes: quota})
	ctx := context.Background()
	cfg, err := etcd.ParseURL(c.URL("quota") + fmt.Sprintf("?quota=%d", quota))
	if err != nil {
		t.Fatal(err)
	}
	es, err := etcd.Open(ctx, cfg, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	var mu sync.Mutex
	var alerts []string
	m := newMaintainer(es, Maintenance{Alert: func(_ context.Context, firing bool, summary string) {
		mu.Lock()
		defer mu.Unlock()
		alerts = append(alerts, fmt.Sprintf("%v %s", firing, summary))
	}}, slog.New(slog.DiscardHandler))
	cli := c.Client(t)
	value := strings.Repeat("x", 512<<10)
	var full error
	for i := 0; full == nil && i < 400; i++ {
		_, full = cli.Put(ctx, "/quota-filler", value+fmt.Sprint(i))
		if i%8 == 0 {
			m.checkQuota(ctx)
		}
	}
	if !errors.Is(full, rpctypes.ErrNoSpace) {
		t.Fatalf("writing 200 MiB past a 64 MiB quota: %v; want NOSPACE", full)
	}
	mu.Lock()
	fired := len(alerts) > 0 && strings.HasPrefix(alerts[0], "true")
	mu.Unlock()
	if !fired {
		t.Fatalf("no alert before NOSPACE; alerts %v", alerts)
	}
	m.checkQuota(ctx) // NOSPACE: compact, defragment, disarm
	if _, err := es.Client().Put(ctx, "/after", "ok"); err != nil {
		t.Fatalf("a write after the leader's recovery: %v", err)
	}
	st := es.ClusterStatus(ctx)
	t.Logf("after recovery: %d MiB of %d MiB (in use %d MiB), alerts %v", st.DBSize>>20, st.Quota>>20, st.DBInUse>>20, alerts)
	m.checkQuota(ctx)
	mu.Lock()
	defer mu.Unlock()
	if last := alerts[len(alerts)-1]; !strings.HasPrefix(last, "false") || st.NoSpace {
		t.Errorf("after recovery: last alert %q, NOSPACE %v; want cleared", last, st.NoSpace)
	}
}

// TestIntegrationCompactionKeepsAnInterval: each compaction tick compacts
// to the revision the tick before saw, so at least one interval of
// history stays readable and older revisions go.
func TestIntegrationCompactionKeepsAnInterval(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	es, err := etcd.OpenURL(ctx, c.URL("compact"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	m := newMaintainer(es, Maintenance{}, slog.New(slog.DiscardHandler))
	cli := c.Client(t)
	put := func(v string) int64 {
		r, err := cli.Put(ctx, "/compact/k", v)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	r1 := put("1")
	mark := m.compact(ctx, 0) // first tick: nothing compacted, the mark is now
	r2 := put("2")
	m.compact(ctx, mark) // second tick: compacted to the first tick's revision
	if _, err := cli.Get(ctx, "/compact/k", clientv3.WithRev(r1-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("reading before the first tick's revision: %v; want ErrCompacted", err)
	}
	if r, err := cli.Get(ctx, "/compact/k", clientv3.WithRev(r2-1)); err != nil || string(r.Kvs[0].Value) != "1" {
		t.Errorf("reading the interval since the first tick: %v; want the value then", err)
	}
}
