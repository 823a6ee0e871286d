package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Member is one ingot instance's membership of the instances sharing a
// prefix: an etcd session (a lease with a TTL, kept alive by this
// process) and the key inst/<name>/<lease> under it, which etcd deletes
// when the lease expires. Its ID, name/lease in hex, is what the
// instance writes into the fences of the jobs it owns: a membership that
// lapsed never comes back (a rejoin is a new lease, a new ID), so its
// fences name an instance that is gone and another may take them over.
//
// Held says, from this process's clock alone, whether the lease is
// certainly still alive: it is renewed by a keep-alive whose request was
// sent at t0, so etcd keeps it until at least t0 + TTL; Held is false from
// t0 + TTL - margin on. A process paused past its TTL (SIGSTOP, a long GC,
// a stuck disk) finds Held false the moment it runs again, before any
// timer fires: the engine checks it before every BMC call.
type Member struct {
	s       *Store
	name    string
	session *concurrency.Session
	ttl     time.Duration
	margin  time.Duration
	expiry  atomic.Int64 // unix nanoseconds
	done    chan struct{}
	lost    sync.Once
	ctx     context.Context // ends when the membership does
	cancel  context.CancelFunc
	stopKA  context.CancelFunc // stops the keep-alive alone (tests: a paused process)
	why     atomic.Value       // string: why the membership was lost
}

// DefaultTTL is the membership lease's time to live: how long a dead
// instance's jobs wait before another takes them over.
const DefaultTTL = 15 * time.Second

// Join makes this process a member named name (a host name: letters,
// digits, '.', '_', '-') with a lease of ttl (DefaultTTL when 0; at least
// 5 s). The membership lasts until Leave, ctx ends, or the lease cannot
// be renewed in time (Done is closed then, and stays closed: join again).
func (s *Store) Join(ctx context.Context, name string, ttl time.Duration) (*Member, error) {
	if !prefixSegment.MatchString(name) {
		return nil, fmt.Errorf("joining %s: instance name %q: expected letters, digits, '.', '_' or '-'", s.Location(), name)
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 5*time.Second {
		return nil, fmt.Errorf("joining %s: TTL %s: at least 5s (a shorter lease expires under an election)", s.Location(), ttl)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	t0 := time.Now()
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(int(ttl/time.Second)), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("joining %s: starting a session: %w", s.Location(), err)
	}
	m := &Member{s: s, name: name, session: sess, ttl: ttl, margin: max(time.Second, ttl/10), done: make(chan struct{})}
	m.expiry.Store(t0.Add(ttl - m.margin).UnixNano())
	pctx, cancel := s.reqCtx(ctx)
	_, err = s.cli.Put(pctx, s.k.member(m.ID()), strconv.FormatInt(time.Now().Unix(), 10), clientv3.WithLease(sess.Lease()))
	cancel()
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("joining %s: registering %s: %w", s.Location(), m.ID(), err)
	}
	kctx, kcancel := context.WithCancel(context.WithoutCancel(ctx))
	m.ctx, m.cancel = kctx, kcancel
	kactx, stopKA := context.WithCancel(kctx)
	m.stopKA = stopKA
	go m.keepAlive(kactx)
	context.AfterFunc(ctx, func() { m.lose("the instance is stopping") })
	return m, nil
}

// ID is name/lease: the value of the fences this member holds.
func (m *Member) ID() string { return m.name + "/" + strconv.FormatInt(int64(m.session.Lease()), 16) }

// Name is the instance name the member joined with.
func (m *Member) Name() string { return m.name }

// Held reports whether the lease is certainly alive now (see Member).
func (m *Member) Held() bool {
	select {
	case <-m.done:
		return false
	default:
	}
	return time.Now().UnixNano() < m.expiry.Load()
}

// Done is closed when the membership is lost (or left).
func (m *Member) Done() <-chan struct{} { return m.done }

// Context ends when the membership does.
func (m *Member) Context() context.Context { return m.ctx }

// Why says why the membership was lost ("" while it holds).
func (m *Member) Why() string {
	w, _ := m.why.Load().(string)
	return w
}

// Session is the etcd session (for elections and locks bound to it).
func (m *Member) Session() *concurrency.Session { return m.session }

// Leave ends the membership now (the lease revoked: its key and every key
// bound to the session go at once, so others need not wait for the TTL).
func (m *Member) Leave(ctx context.Context) error {
	m.lose("left")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := m.s.cli.Revoke(ctx, m.session.Lease())
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("leaving %s: %w", m.s.Location(), err)
	}
	return nil
}

// lose ends the membership once.
func (m *Member) lose(why string) {
	m.lost.Do(func() {
		m.why.Store(why)
		close(m.done)
		if m.cancel != nil {
			m.cancel()
		}
		m.session.Orphan() // stop its own keep-alive; the lease expires or is revoked
	})
}

// keepAlive renews the lease every TTL/3 with one request at a time,
// moving the local expiry to (send time + TTL - margin) on each answer.
// The membership is lost when etcd says the lease is gone, or when the
// local expiry passes without a renewal (etcd unreachable, or this
// process paused).
func (m *Member) keepAlive(ctx context.Context) {
	tick := time.NewTicker(m.ttl / 3)
	defer tick.Stop()
	for {
		left := time.Until(time.Unix(0, m.expiry.Load()))
		if left <= 0 {
			m.lose(fmt.Sprintf("the lease was not renewed within its TTL of %s", m.ttl))
			return
		}
		expire := time.NewTimer(left)
		select {
		case <-ctx.Done():
			expire.Stop()
			return
		case <-expire.C:
			continue // checked at the top
		case <-tick.C:
			expire.Stop()
		}
		t0 := time.Now()
		rctx, cancel := context.WithDeadline(ctx, time.Unix(0, m.expiry.Load()))
		resp, err := m.s.cli.KeepAliveOnce(rctx, m.session.Lease())
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			m.lose("etcd says the lease is gone (it expired while this instance was away)")
			return
		case err != nil:
			m.s.opts.Logger.Warn("renewing the instance's lease", "member", m.ID(), "err", err)
		case resp.TTL > 0:
			if next := t0.Add(time.Duration(resp.TTL)*time.Second - m.margin).UnixNano(); next > m.expiry.Load() {
				m.expiry.Store(next)
			}
		}
	}
}

// Members lists the IDs of the live members (their keys), sorted.
func (s *Store) Members(ctx context.Context) ([]string, error) {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.k.members(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("listing instances of %s: %w", s.Location(), err)
	}
	out := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), s.k.members()))
	}
	return out, nil
}
