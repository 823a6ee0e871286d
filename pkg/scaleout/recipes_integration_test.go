//go:build integration

package scaleout

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// TestIntegrationRecipesCompared: two instances on one real etcd publish
// the recipes they have in force. The same recipes say nothing; a recipe
// changed on one host fires the alert on both once it has lasted
// recipesSettle, naming the recipe, its digests and the instances; a
// recipe only one has changes the summary; when the instance that differs
// leaves (its lease revoked, its entry gone), the other's alert clears
// with the summary it fired with.
func TestIntegrationRecipesCompared(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	d1, d2, d3 := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	type instance struct {
		recipes atomic.Pointer[map[string]string]
		alerts  chan string
		stop    context.CancelFunc
		done    chan struct{}
	}
	start := func(name string, recipes map[string]string) *instance {
		es, err := etcd.OpenURL(ctx, c.URL("recipes"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		in := &instance{alerts: make(chan string, 16), done: make(chan struct{})}
		in.recipes.Store(&recipes)
		n, err := Join(ctx, es, Config{Name: name, TTL: 5 * time.Second, Maintenance: Maintenance{CompactEvery: -1},
			Recipes: func() map[string]string { return *in.recipes.Load() },
			RecipesDiffer: func(_ context.Context, firing bool, summary string) {
				in.alerts <- fmt.Sprintf("%v %s", firing, summary)
			}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		in.stop = stop
		go func() { defer close(in.done); n.Run(rctx) }()
		t.Cleanup(func() { stop(); <-in.done; es.Close() })
		return in
	}
	next := func(in *instance, who, want string) {
		t.Helper()
		select {
		case got := <-in.alerts:
			if got != want {
				t.Fatalf("%s was told %q; want %q", who, got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s was told nothing within 30 s; want %q", who, want)
		}
	}
	a := start("ingot-a", map[string]string{"gpu": d1, "lab": d2})
	b := start("ingot-b", map[string]string{"gpu": d1, "lab": d2})
	select {
	case got := <-a.alerts:
		t.Fatalf("the same recipes on both: a was told %q", got)
	case <-time.After(2 * recipesEvery):
	}

	b.recipes.Store(&map[string]string{"gpu": d3, "lab": d2})
	changed := time.Now()
	differ := "true the instances' recipe folders differ in 1 recipe(s): gpu (111111111111 on ingot-a; 333333333333 on ingot-b)"
	next(a, "a", differ)
	if d := time.Since(changed); d < recipesSettle {
		t.Errorf("a was told %s after b's folder changed; want it said once it has lasted %s (a deploy host after host differs for a moment)", d, recipesSettle)
	}
	next(b, "b", differ)

	b.recipes.Store(&map[string]string{"gpu": d1, "lab": d2, "new": d3})
	next(a, "a", "true the instances' recipe folders differ in 1 recipe(s): new (333333333333 on ingot-b; absent on ingot-a)")

	b.stop()
	<-b.done
	next(a, "a", "false the instances' recipe folders differ in 1 recipe(s): new (333333333333 on ingot-b; absent on ingot-a)")
}
