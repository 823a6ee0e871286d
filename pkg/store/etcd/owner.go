package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/store"
)

// ErrNotOwner: another live instance owns the job, or this instance's
// membership has lapsed.
var ErrNotOwner = errors.New("not this instance's job")

// JobOwner decides which instance runs each job (the engine's Owner, see
// pkg/engine/owner.go): the owner of job J is the member whose ID the
// fence job/J holds. Claim takes a job that is free or whose owner is
// gone (SwapFence from the value it read: of two instances taking one job
// over, one wins) and hands out the context the job's work runs under:
// every write made with it carries the fence (store.WithFence), and it
// ends the moment the ownership does (the member lost, the fence taken).
// Run watches the members, the fences and the jobs, and asks the engine to
// adopt the jobs this instance should pick up.
type JobOwner struct {
	s       *Store
	current func() *Member
	grace   time.Duration

	mu     sync.Mutex
	synced bool             // live and fences hold a full list
	live   map[string]bool  // member IDs alive (inst/)
	fences map[string]fence // job ID -> its fence (f/job/)
	claims map[string]*claim
	todo   chan string // jobs to hand to adopt
	resync chan struct{}
}

// claim is this instance's hold on a job, taken at revision rev.
type claim struct {
	ctx    context.Context
	cancel context.CancelFunc
	member *Member
	rev    int64
}

// fence is what a job's fence holds (member ID) since revision rev.
type fence struct {
	owner string
	rev   int64
}

type heldKey struct{}

// jobFence is the fence key of a job.
func jobFence(id string) string { return "job/" + id }

// NewJobOwner makes the job ownership of the instance whose membership
// current returns (nil while it rejoins). A running job without a fence
// is taken only once it has not changed for grace (its creator claims it
// first; DefaultTTL when 0).
func (s *Store) NewJobOwner(current func() *Member, grace time.Duration) *JobOwner {
	if grace <= 0 {
		grace = DefaultTTL
	}
	return &JobOwner{s: s, current: current, grace: grace, live: map[string]bool{}, fences: map[string]fence{},
		claims: map[string]*claim{}, todo: make(chan string, 4096), resync: make(chan struct{}, 1)}
}

// Claim makes this instance the job's owner (see JobOwner) and returns the
// context its work runs under, derived from ctx. A job already claimed
// returns the same context.
func (o *JobOwner) Claim(ctx context.Context, jobID string) (context.Context, error) {
	m := o.current()
	if m == nil || !m.Held() {
		return nil, fmt.Errorf("job %s: %w: this instance's membership has lapsed", jobID, ErrNotOwner)
	}
	o.mu.Lock()
	if c := o.claims[jobID]; c != nil && c.member == m && c.ctx.Err() == nil {
		o.mu.Unlock()
		return c.ctx, nil
	}
	have, known := o.fences[jobID].owner, o.synced
	alive := o.live[have]
	o.mu.Unlock()
	if !known {
		var err error
		if have, err = o.s.Fence(ctx, jobFence(jobID)); err != nil {
			return nil, err
		}
		ids, err := o.s.Members(ctx)
		if err != nil {
			return nil, err
		}
		alive = contains(ids, have)
	}
	if have != "" && have != m.ID() && alive {
		return nil, fmt.Errorf("job %s: %w: instance %s owns it", jobID, ErrNotOwner, have)
	}
	var rev int64
	if have != m.ID() {
		var err error
		if rev, err = o.s.swapFence(ctx, jobFence(jobID), have, m.ID()); err != nil {
			return nil, fmt.Errorf("job %s: %w: %w", jobID, ErrNotOwner, err)
		}
		o.s.opts.Logger.Info("took a job", "job", jobID, "member", m.ID(), "from", orNone(have))
	}
	return o.hold(ctx, jobID, m, rev), nil
}

// hold records the claim of jobID by m at revision rev and returns its
// context.
func (o *JobOwner) hold(ctx context.Context, jobID string, m *Member, rev int64) context.Context {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(m.Context(), cancel)
	cctx = context.WithValue(store.WithFence(cctx, jobFence(jobID), m.ID()), heldKey{}, m)
	c := &claim{ctx: cctx, cancel: func() { stop(); cancel() }, member: m, rev: rev}
	o.mu.Lock()
	if old := o.claims[jobID]; old != nil {
		old.cancel()
	}
	o.claims[jobID] = c
	if rev > o.fences[jobID].rev {
		o.fences[jobID] = fence{owner: m.ID(), rev: rev}
	}
	o.mu.Unlock()
	return cctx
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Holds fails when ctx was handed out by Claim and its membership is not
// certainly alive now (Member.Held: the local clock against the lease,
// not a timer): the engine asks before every BMC call, so an instance
// paused past its TTL makes no call when it runs again.
func (o *JobOwner) Holds(ctx context.Context) error {
	m, ok := ctx.Value(heldKey{}).(*Member)
	if !ok {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: the job's claim ended: %w", ErrNotOwner, err)
	}
	if !m.Held() {
		return fmt.Errorf("%w: membership %s may have lapsed (%s)", ErrNotOwner, m.ID(), orNone(m.Why()))
	}
	return nil
}

// Release gives up this instance's claim of a job that ended: the fence
// is removed and the claim's context ends.
func (o *JobOwner) Release(ctx context.Context, jobID string) {
	o.mu.Lock()
	c := o.claims[jobID]
	delete(o.claims, jobID)
	o.mu.Unlock()
	if c == nil {
		return
	}
	c.cancel()
	if err := o.s.SwapFence(ctx, jobFence(jobID), c.member.ID(), ""); err != nil && !errors.Is(err, store.ErrStale) {
		o.s.opts.Logger.Warn("releasing a job's fence", "job", jobID, "err", err)
	}
}

// Run follows the members, the job fences and the jobs until ctx ends,
// and calls adopt (one call at a time) with each running job this
// instance should look at: one whose owner is gone (a member's key
// deleted), one without an owner for longer than the grace, every one
// after this instance rejoined, and one of its own that another instance
// moved to a BMC step (an agent's report that arrived there). Each watch
// re-lists after a compaction.
func (o *JobOwner) Run(ctx context.Context, adopt func(ctx context.Context, jobID string)) error {
	var wg sync.WaitGroup
	for _, w := range []*watcher{
		{s: o.s, prefix: o.s.k.members(), onList: o.listMembers, onEvent: o.memberEvent},
		{s: o.s, prefix: o.s.k.fence(jobFence("")), onList: o.listFences, onEvent: o.fenceEvent},
		{s: o.s, prefix: o.s.k.jobs(), onList: func([]*mvccpb.KeyValue, int64) { o.wake() }, onEvent: o.jobEvent},
	} {
		wg.Go(func() { w.run(ctx) })
	}
	wg.Go(func() { o.rescan(ctx) })
	var last *Member
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case id := <-o.todo:
			adopt(ctx, id)
		case <-time.After(time.Second):
		}
		if m := o.current(); m != last && m != nil {
			last = m
			o.wake() // a new membership: the jobs of the old one are orphans now
		}
	}
}

// wake asks rescan for a pass now.
func (o *JobOwner) wake() {
	select {
	case o.resync <- struct{}{}:
	default:
	}
}

// rescan lists the running jobs on every wake and every grace, and queues
// those that are orphans (owner gone, or no owner past the grace) or this
// instance's own.
func (o *JobOwner) rescan(ctx context.Context) {
	t := time.NewTicker(o.grace)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.resync:
		case <-t.C:
		}
		jobs, err := o.s.ListJobs(ctx, store.JobRunning)
		if err != nil {
			continue
		}
		m := o.current()
		for _, j := range jobs {
			o.mu.Lock()
			have := o.fences[j.ID].owner
			orphan := (have == "" && time.Since(j.Updated) > o.grace) || (have != "" && !o.live[have])
			mine := m != nil && have == m.ID() && o.claims[j.ID] == nil
			o.mu.Unlock()
			if orphan || mine {
				o.queue(j.ID)
			}
		}
	}
}

func (o *JobOwner) queue(id string) {
	select {
	case o.todo <- id:
	default: // full: the next rescan queues it again
	}
}

func (o *JobOwner) listMembers(kvs []*mvccpb.KeyValue, _ int64) {
	o.mu.Lock()
	clear(o.live)
	for _, kv := range kvs {
		o.live[strings.TrimPrefix(string(kv.Key), o.s.k.members())] = true
	}
	o.mu.Unlock()
	o.wake()
}

func (o *JobOwner) memberEvent(ev *clientv3.Event) {
	id := strings.TrimPrefix(string(ev.Kv.Key), o.s.k.members())
	o.mu.Lock()
	if ev.Type == clientv3.EventTypeDelete {
		delete(o.live, id)
	} else {
		o.live[id] = true
	}
	o.mu.Unlock()
	if ev.Type == clientv3.EventTypeDelete {
		o.wake() // its jobs are orphans now
	}
}

// listFences replaces the fences with a list read at rev, and ends the
// claims it shows taken (those newer than the list are left alone).
func (o *JobOwner) listFences(kvs []*mvccpb.KeyValue, rev int64) {
	p := o.s.k.fence(jobFence(""))
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.fences
	o.fences = map[string]fence{}
	for _, kv := range kvs {
		o.fences[strings.TrimPrefix(string(kv.Key), p)] = fence{owner: string(kv.Value), rev: kv.ModRevision}
	}
	for id, f := range old {
		if f.rev > rev { // learnt after the list was read
			o.fences[id] = f
		}
	}
	for id, c := range o.claims {
		if c.rev <= rev && o.fences[id].owner != c.member.ID() {
			o.drop(id, c)
		}
	}
	o.synced = true
}

// fenceEvent keeps the fences, and ends a claim whose fence another
// instance took (this one paused past its TTL and was taken over).
func (o *JobOwner) fenceEvent(ev *clientv3.Event) {
	id := strings.TrimPrefix(string(ev.Kv.Key), o.s.k.fence(jobFence("")))
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Kv.ModRevision <= o.fences[id].rev {
		return // older than what hold recorded
	}
	f := fence{rev: ev.Kv.ModRevision}
	if ev.Type != clientv3.EventTypeDelete {
		f.owner = string(ev.Kv.Value)
	}
	o.fences[id] = f
	if c := o.claims[id]; c != nil && f.rev > c.rev && f.owner != c.member.ID() {
		o.drop(id, c)
	}
}

// drop ends a claim another instance took; o.mu is held.
func (o *JobOwner) drop(id string, c *claim) {
	o.s.opts.Logger.Warn("a job this instance held was taken over", "job", id, "member", c.member.ID(), "by", orNone(o.fences[id].owner))
	c.cancel()
	delete(o.claims, id)
}

// jobEvent queues every change of a job this instance owns: the engine
// kicks a BMC step another instance's write asked for (an agent's report
// arrived there), and releases a job that ended.
func (o *JobOwner) jobEvent(ev *clientv3.Event) {
	if ev.Type == clientv3.EventTypeDelete {
		return
	}
	id := strings.TrimPrefix(string(ev.Kv.Key), o.s.k.jobs())
	m := o.current()
	o.mu.Lock()
	mine := m != nil && o.fences[id].owner == m.ID()
	o.mu.Unlock()
	if mine {
		o.queue(id)
	}
}
