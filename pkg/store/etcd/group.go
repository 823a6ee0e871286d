package etcd

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// group is a group commit: concurrent calls join a queue, and one of
// them, the leader, writes what is queued (up to max calls) in one etcd
// transaction, then hands the lead to the first call that queued
// meanwhile, so no call waits for more rounds than its own. Each etcd
// transaction is one raft entry, committed when a majority has it on
// disk; sharing one among many calls is what makes a DHCP storm or an
// agent storm cheap (etcd's raft loop also batches concurrent entries
// into one fsync, but each still costs a request, an entry and an apply).
type group[In, Out any] struct {
	s   *Store
	max int
	// apply adds the calls to t (reading what it needs through t) and sets
	// each call's out or err; an error of one call is its own and the
	// others still commit, while an error apply returns (etcd unreachable)
	// is every call's. A call that would not fit in t (see tx.fits) is
	// marked deferred and goes back to the front of the queue; the first
	// call of a round is never deferred.
	apply func(t *tx, calls []*call[In, Out]) error

	mu      sync.Mutex
	queue   []*call[In, Out]
	leading bool

	rounds, calls atomic.Uint64
}

// call is one caller's request in a group.
type call[In, Out any] struct {
	ctx      context.Context
	in       In
	out      Out
	err      error
	deferred bool
	lead     bool
	wake     chan struct{}
}

func newGroup[In, Out any](s *Store, max int, apply func(*tx, []*call[In, Out]) error) *group[In, Out] {
	return &group[In, Out]{s: s, max: max, apply: apply}
}

// do queues in and returns once the round that holds it has committed.
func (g *group[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{ctx: ctx, in: in, wake: make(chan struct{})}
	if err := g.s.ready(ctx); err != nil {
		return c.out, err
	}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.leading {
		g.mu.Unlock()
		<-c.wake
		if !c.lead {
			return c.out, c.err
		}
	} else {
		g.leading = true
		g.mu.Unlock()
	}
	// Lead rounds until c is written (c heads the queue: a call finds no
	// leader only when the queue is empty, and the lead goes to the head).
	for {
		g.mu.Lock()
		n := min(len(g.queue), g.max)
		round := slices.Clone(g.queue[:n])
		g.queue = slices.Clone(g.queue[n:])
		g.mu.Unlock()
		g.commit(round)
		var back []*call[In, Out]
		for _, r := range round {
			if r.deferred {
				r.deferred = false
				back = append(back, r)
			}
		}
		g.mu.Lock()
		g.queue = append(back, g.queue...)
		mine := !slices.Contains(back, c)
		if mine {
			if len(g.queue) > 0 {
				g.queue[0].lead = true
				close(g.queue[0].wake)
			} else {
				g.leading = false
			}
		}
		g.mu.Unlock()
		for _, r := range round {
			if r != c && !slices.Contains(back, r) {
				close(r.wake)
			}
		}
		if mine {
			return c.out, c.err
		}
	}
}

// commit writes one round. A call whose context is done before the round
// starts gets its context's error and is left out.
func (g *group[In, Out]) commit(round []*call[In, Out]) {
	var live []*call[In, Out]
	for _, c := range round {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	var zero Out
	_, err := g.s.update(context.Background(), func(t *tx) error {
		for _, c := range live {
			c.out, c.err, c.deferred = zero, nil, false
		}
		return g.apply(t, live)
	})
	g.rounds.Add(1)
	for _, c := range live {
		if err != nil && c.err == nil && !c.deferred {
			c.out, c.err = zero, err
		}
		if !c.deferred && c.err == nil {
			g.calls.Add(1)
		}
	}
}

// GroupStats counts a group commit's work since Open.
type GroupStats struct {
	// Rounds is how many transactions were sent, Calls how many calls
	// they wrote: Calls/Rounds is the calls one transaction carried.
	Rounds, Calls uint64
}

func (g *group[In, Out]) stats() GroupStats {
	return GroupStats{Rounds: g.rounds.Load(), Calls: g.calls.Load()}
}
