package scaleout

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Recipes are files each instance reads from its own folder (give every
// instance the same one); a job runs the recipe pinned in it, so a
// takeover never depends on the new owner's copy. What can still differ
// is what new jobs start with: an operator who updated one host's folder
// and not the others'. Each instance publishes the recipes it has in
// force (name -> digest) under its lease, watches everyone's, and says
// when they differ: RecipesDiffer fires with the recipes and instances
// that disagree, and clears when they agree again.

// recipesEvery is how often an instance compares the recipes in force
// with what it last published (the catalog checks its folder every 2 s).
const recipesEvery = 2 * time.Second

// recipesSettle is how long the instances must differ before it is said:
// a folder deployed host after host differs for a moment on every
// instance, and an instance that joined again is missing until it
// publishes.
const recipesSettle = 10 * time.Second

// shareRecipes publishes this instance's recipes and judges everyone's,
// until ctx ends. RecipesDiffer fires once a difference has lasted
// recipesSettle (again when what differs changes) and clears, with the
// last summary it fired with, as soon as they agree.
func (n *Node) shareRecipes(ctx context.Context) {
	var mu sync.Mutex
	seen := "" // the difference the watch saw last ("": none)
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		n.es.WatchRecipes(ctx, func(by map[string]map[string]string) {
			s := recipeDifferences(by)
			mu.Lock()
			seen = s
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		})
	})
	wg.Go(func() { n.publishRecipes(ctx) })
	defer wg.Wait()
	var since time.Time // when the instances started to differ
	told := ""          // the summary RecipesDiffer fired with ("": not firing)
	t := time.NewTicker(recipesEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		mu.Lock()
		cur := seen
		mu.Unlock()
		switch {
		case cur == "":
			since = time.Time{}
			if told != "" {
				n.log.Info("the instances sharing the store have the same recipes in force again")
				n.tellRecipes(ctx, false, told)
				told = ""
			}
		case since.IsZero():
			since = time.Now()
		case cur != told && time.Since(since) >= recipesSettle:
			n.log.Warn("recipes differ between the instances sharing the store", "summary", cur, "for", time.Since(since).Round(time.Second))
			n.tellRecipes(ctx, true, cur)
			told = cur
		}
	}
}

func (n *Node) tellRecipes(ctx context.Context, firing bool, summary string) {
	if n.cfg.RecipesDiffer != nil {
		n.cfg.RecipesDiffer(ctx, firing, summary)
	}
}

// publishRecipes publishes the recipes in force each time they, or the
// membership they are published under, change.
func (n *Node) publishRecipes(ctx context.Context) {
	var pubMember string
	var pub map[string]string
	t := time.NewTicker(recipesEvery)
	defer t.Stop()
	for {
		if m := n.current(); m != nil && m.Held() {
			cur := n.cfg.Recipes()
			if m.ID() != pubMember || !maps.Equal(cur, pub) {
				if err := n.es.PublishRecipes(ctx, m, cur); err != nil {
					n.log.Warn("publishing the recipes in force", "err", err)
				} else {
					pubMember, pub = m.ID(), cur
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recipeDifferences says which recipes the live instances do not agree
// on (instance -> recipe -> digest): "" when each has the same recipes at
// the same digests. A recipe one instance lacks counts as a difference.
func recipeDifferences(byInstance map[string]map[string]string) string {
	if len(byInstance) < 2 {
		return ""
	}
	instances := slices.Sorted(maps.Keys(byInstance))
	names := map[string]bool{}
	for _, d := range byInstance {
		for r := range d {
			names[r] = true
		}
	}
	var diffs []string
	for _, r := range slices.Sorted(maps.Keys(names)) {
		groups := map[string][]string{} // digest ("": absent) -> instances
		for _, in := range instances {
			d := byInstance[in][r]
			groups[d] = append(groups[d], in)
		}
		if len(groups) == 1 {
			continue
		}
		digests := slices.SortedFunc(maps.Keys(groups), func(a, b string) int {
			if (a == "") != (b == "") {
				return cmp.Compare(b, a) // absent last
			}
			return cmp.Compare(a, b)
		})
		var parts []string
		for _, d := range digests {
			label := "absent"
			if d != "" {
				label = shortDigest(d)
			}
			parts = append(parts, label+" on "+strings.Join(groups[d], ", "))
		}
		diffs = append(diffs, r+" ("+strings.Join(parts, "; ")+")")
	}
	if len(diffs) == 0 {
		return ""
	}
	const most = 5
	summary := fmt.Sprintf("the instances' recipe folders differ in %d recipe(s): %s", len(diffs), strings.Join(diffs[:min(len(diffs), most)], ", "))
	if len(diffs) > most {
		summary += fmt.Sprintf(", and %d more", len(diffs)-most)
	}
	return summary
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
