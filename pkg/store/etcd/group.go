package etcd

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ingot-dev/ingot/pkg/store"
)

// group is a group commit: concurrent calls join a queue, and each of a
// few workers takes what is queued (up to max calls) and writes it in one
// etcd transaction. Each etcd transaction is one raft entry, committed
// when a majority has it on disk; sharing one among many calls is what
// makes a DHCP storm or an agent storm cheap. Several workers keep
// several transactions in flight (etcd's raft loop batches concurrent
// entries into one fsync); rounds of different workers that touch one
// key are ordered by etcd, the later one reading again (optimistic
// concurrency), so a MAC's two leases or a machine's two events never
// both win.
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

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*call[In, Out]
	closed bool
	done   sync.WaitGroup

	rounds, calls atomic.Uint64
}

// call is one caller's request in a group.
type call[In, Out any] struct {
	ctx      context.Context
	in       In
	out      Out
	err      error
	deferred bool
	wake     chan struct{}
}

// newGroup starts workers goroutines that write rounds until close.
func newGroup[In, Out any](s *Store, max, workers int, apply func(*tx, []*call[In, Out]) error) *group[In, Out] {
	g := &group[In, Out]{s: s, max: max, apply: apply}
	g.cond = sync.NewCond(&g.mu)
	for range workers {
		g.done.Add(1)
		go g.work()
	}
	return g
}

// do queues in and returns once the round that holds it has committed.
func (g *group[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{ctx: ctx, in: in, wake: make(chan struct{})}
	if err := g.s.ready(ctx); err != nil {
		return c.out, err
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return c.out, store.ErrClosed
	}
	g.queue = append(g.queue, c)
	g.cond.Signal()
	g.mu.Unlock()
	<-c.wake
	return c.out, c.err
}

// work writes rounds until the group is closed and its queue empty.
func (g *group[In, Out]) work() {
	defer g.done.Done()
	for {
		g.mu.Lock()
		for len(g.queue) == 0 && !g.closed {
			g.cond.Wait()
		}
		if len(g.queue) == 0 {
			g.mu.Unlock()
			return
		}
		n := min(len(g.queue), g.max)
		round := slices.Clone(g.queue[:n])
		g.queue = slices.Clone(g.queue[n:])
		g.mu.Unlock()
		g.commit(round)
		var back []*call[In, Out]
		for _, c := range round {
			if c.deferred {
				c.deferred = false
				back = append(back, c)
				continue
			}
			close(c.wake)
		}
		if len(back) > 0 {
			g.mu.Lock()
			g.queue = append(back, g.queue...)
			g.cond.Signal()
			g.mu.Unlock()
		}
	}
}

// close stops the workers once the queue is empty (what is queued gets
// ErrClosed from the store).
func (g *group[In, Out]) close() {
	g.mu.Lock()
	g.closed = true
	g.cond.Broadcast()
	g.mu.Unlock()
	g.done.Wait()
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
	var zero Out
	for len(live) > 0 {
		_, err := g.s.update(context.Background(), func(t *tx) error {
			for _, c := range live {
				c.out, c.err, c.deferred = zero, nil, false
			}
			return g.apply(t, live)
		})
		if errors.Is(err, errTooBig) && len(live) > 1 {
			// Refused before it was sent: the calls read or write more
			// keys than one transaction takes. Write the first half; the
			// second goes back to the queue.
			half := len(live) / 2
			for _, c := range live[half:] {
				c.deferred = true
			}
			live = live[:half]
			continue
		}
		g.rounds.Add(1)
		for _, c := range live {
			if err != nil && c.err == nil && !c.deferred {
				c.out, c.err = zero, err
			}
			if !c.deferred && c.err == nil {
				g.calls.Add(1)
			}
		}
		return
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
