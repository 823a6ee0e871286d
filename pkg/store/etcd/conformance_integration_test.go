//go:build integration

package etcd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// TestIntegrationConformanceSingle runs the backend conformance suite on a
// one-member etcd, each case under a fresh prefix, each prefix checked
// (Store.Check) when its case ends.
func TestIntegrationConformanceSingle(t *testing.T) {
	runConformance(t, etcdtest.Single(t))
}

// TestIntegrationConformanceThree runs the suite on a three-member
// cluster: every write a raft commit on two of three members.
func TestIntegrationConformanceThree(t *testing.T) {
	runConformance(t, etcdtest.Three(t))
}

func runConformance(t *testing.T, c *etcdtest.Cluster) {
	cli := c.Client(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		return openPrefix(t, cli, fmt.Sprintf("/conformance/%d/", n.Add(1)), opts)
	})
}

// openPrefix opens a store under prefix on cli, closed and checked when t
// ends.
func openPrefix(t testing.TB, cli *clientv3.Client, prefix string, opts store.Options) *etcd.Store {
	t.Helper()
	ctx := context.Background()
	s, err := etcd.OpenClient(ctx, cli, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing: %v", err)
		}
		chk, err := etcd.OpenClient(ctx, cli, prefix, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer chk.Close()
		if err := chk.Check(ctx); err != nil {
			t.Errorf("consistency: %v", err)
		}
	})
	return s
}
