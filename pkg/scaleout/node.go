// Package scaleout is one ingot instance's part in a group of instances
// that share one store (etcd): its membership (a lease the instance keeps
// alive, joined again when it lapses), which jobs it runs (the engine's
// Owner), which machines it polls (Ring: rendezvous hashing on the
// machine ID over the live instances, rebalanced as they join and
// leave), whether it may answer DHCP (Serving), and the maintenance its
// leader runs on a schedule (compaction, defragmentation, the quota
// alarm). On a store that one process holds (bbolt) it is a group of one:
// every job and machine is this instance's, and nothing is maintained.
package scaleout

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
)

// Config configures a Node. The zero value works.
type Config struct {
	// Name is this instance's name among the others (default: the host
	// name). Two instances must not share one.
	Name string
	// TTL is the membership lease: how long a dead instance's jobs wait
	// before another takes them over (default 15 s; 5 s at least).
	TTL    time.Duration
	Logger *slog.Logger
	// Maintenance is what the leader runs (see Maintenance).
	Maintenance Maintenance
	// Recipes, when set, is the recipes this instance has in force (name
	// -> digest); the instances compare theirs (recipes.go).
	Recipes func() map[string]string
	// RecipesDiffer is told when the live instances' recipes stop or start
	// agreeing (firing with a summary naming recipes and instances).
	RecipesDiffer func(ctx context.Context, firing bool, summary string)
}

// Node is this instance in its group. Build it with Join; Run keeps it
// in the group (a supervisor service).
type Node struct {
	cfg    Config
	log    *slog.Logger
	es     *etcd.Store // nil: a group of one
	member atomic.Pointer[etcd.Member]
	owner  engine.Owner
	ring   *Ring
	maint  *maintainer
}

// Join makes this instance a member of the group st is shared by: on an
// etcd store it joins (an error when etcd does not answer), on any other
// it is a group of one.
func Join(ctx context.Context, st store.Store, cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("scale-out: naming this instance: %w (give one)", err)
		}
		cfg.Name = h
	}
	n := &Node{cfg: cfg, log: cfg.Logger, ring: newRing(cfg.Name)}
	es, ok := st.(*etcd.Store)
	if !ok {
		n.owner = engine.Solo{}
		n.ring.solo = true
		return n, nil
	}
	m, err := es.Join(ctx, cfg.Name, cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("scale-out: %w", err)
	}
	n.es = es
	n.member.Store(m)
	n.ring.held = n.Serving
	n.owner = es.NewJobOwner(n.current, cfg.TTL)
	n.maint = newMaintainer(es, cfg.Maintenance, n.log)
	n.log.Info("joined the instances sharing the store", "member", m.ID(), "store", es.Location())
	return n, nil
}

// current is the membership now (nil while joining again).
func (n *Node) current() *etcd.Member { return n.member.Load() }

// Owner is the engine's Owner: which jobs this instance runs.
func (n *Node) Owner() engine.Owner { return n.owner }

// Ring says which machines this instance polls.
func (n *Node) Ring() *Ring { return n.ring }

// Name is this instance's name.
func (n *Node) Name() string { return n.cfg.Name }

// Shared reports whether several instances may share the store (etcd).
func (n *Node) Shared() bool { return n.es != nil }

// Serving reports whether this instance may answer for the group now:
// always for a group of one; on etcd while its membership is certainly
// alive. An instance that cannot reach etcd (its lease not renewed) stops
// answering DHCP rather than answer from a state others may have changed.
func (n *Node) Serving() bool {
	if n.es == nil {
		return true
	}
	m := n.current()
	return m != nil && m.Held()
}

// Run keeps this instance in the group until ctx ends: it joins again
// when the membership lapses, follows the live members (the Ring), and
// campaigns to lead the maintenance. It leaves the group on return, so
// the others take its jobs over at once instead of after the TTL.
func (n *Node) Run(ctx context.Context) error {
	if n.es == nil {
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { n.es.WatchMembers(ctx, n.ring.set) })
	wg.Go(func() { n.lead(ctx) })
	if n.cfg.Recipes != nil {
		wg.Go(func() { n.shareRecipes(ctx) })
	}
	n.stayJoined(ctx)
	wg.Wait()
	if m := n.current(); m != nil {
		if err := m.Leave(context.WithoutCancel(ctx)); err != nil {
			n.log.Warn("leaving the group", "err", err)
		}
	}
	return nil
}

// stayJoined joins again each time the membership is lost, until ctx ends.
func (n *Node) stayJoined(ctx context.Context) {
	for {
		m := n.current()
		if m == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.Done():
		}
		if ctx.Err() != nil {
			return // stopping: the membership ended with it
		}
		n.log.Warn("this instance's membership lapsed: its jobs stop; joining again", "member", m.ID(), "why", m.Why())
		n.member.Store(nil)
		for ctx.Err() == nil {
			next, err := n.es.Join(ctx, n.cfg.Name, n.cfg.TTL)
			if err == nil {
				n.member.Store(next)
				n.log.Info("joined again", "member", next.ID())
				break
			}
			n.log.Warn("joining again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// lead campaigns for the maintenance lead with each membership in turn.
func (n *Node) lead(ctx context.Context) {
	for ctx.Err() == nil {
		m := n.current()
		if m == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		n.es.Lead(ctx, m, "maintenance", n.maint.run)
		select {
		case <-ctx.Done():
		case <-m.Done():
		}
	}
}
