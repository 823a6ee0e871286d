package etcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ingot-dev/ingot/pkg/store"
)

// etcd's documented limits (etcd --max-txn-ops and --max-request-bytes,
// at their defaults). A transaction stays under both: maxOps compares and
// maxOps operations (etcd counts each list apart), and maxTxnBytes of keys
// and values, leaving room under 1.5 MiB for the request's framing and the
// guards a caller adds.
const (
	maxOps      = 128
	maxTxnBytes = 1 << 20
)

// errRetry: a transaction's compares failed (another writer changed a key
// it read) or its pinned revision was compacted: run it again.
var errRetry = errors.New("etcd store: transaction lost a race")

// errTooBig is wrapped by a transaction that would pass etcd's limits.
var errTooBig = errors.New("over etcd's limits for one transaction")

// maxAttempts bounds the optimistic retries of one write.
const maxAttempts = 200

// tx is one optimistic transaction. Reads go to etcd (the first read pins
// the revision every later read of the transaction is made at, so fn sees
// one state) and record the revision of each key they saw; writes are kept
// here, the last one to a key winning, and read back by later reads. commit
// sends one etcd Txn that applies the writes only if every key read still
// has the revision it had, and every guard holds.
type tx struct {
	s      *Store
	ctx    context.Context
	rev    int64               // revision reads are pinned to; 0 before the first
	serial bool                // read serializably (see update)
	seen   map[string]readMark // keys read and what the commit compares
	writes map[string]*write   // final state of each key written
	order  []string            // keys in the order first written
	ranges [][2]string         // key ranges [start, end) deleted
	guards []guard             // fences of the context (store.Fences)
	bytes  int
}

// readMark is what a key looked like when read.
type readMark struct {
	exists      bool
	val         []byte
	mod, create int64
	// byCreate: compare the create revision (the key is the same
	// incarnation: a machine may be updated meanwhile, but not deleted
	// and made again), not the mod revision (unchanged).
	byCreate bool
}

// write is the pending state of a key: a value, or deleted.
type write struct {
	val []byte
	del bool
}

// update runs fn in a transaction and commits it, running it again (fn
// on fresh reads) when another writer got in between. It returns the
// revision the commit made: the mod revision of every key written. fn
// MAY run more than once and must only set what it sets on every run.
//
// The first attempt reads serializably (from the member the request
// reaches, without asking the leader: one round trip less), which is
// safe because the commit compares the revision of every key read: a
// stale read fails the compare and the next attempt reads linearizably.
// What the commit does not check is confirmed the same way: an attempt
// that writes nothing, or that fn refused (store.ErrNotFound, ErrStale, a
// key taken), runs again on linearizable reads before its answer stands.
func (s *Store) update(ctx context.Context, fn func(*tx) error) (int64, error) {
	return s.write(ctx, true, fn)
}

// updateLinearizable is update reading linearizably from the first
// attempt, for writes that run the caller's function on what they read:
// UpdateMachineRev and UpdateJobRev must not run it on a revision that is
// already stale (a member behind the leader still has the old one), and
// no caller's function should see a state older than its own last write.
func (s *Store) updateLinearizable(ctx context.Context, fn func(*tx) error) (int64, error) {
	return s.write(ctx, false, fn)
}

// write is update, the first attempt reading serializably if serial.
func (s *Store) write(ctx context.Context, serial bool, fn func(*tx) error) (int64, error) {
	if err := s.ready(ctx); err != nil {
		return 0, err
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		t := &tx{s: s, ctx: ctx, serial: serial, seen: map[string]readMark{}, writes: map[string]*write{}}
		t.guards = s.guards(ctx)
		err := fn(t)
		if err == nil && t.ops() == 0 && t.serial && t.rev != 0 {
			serial = false // nothing to commit, so nothing checks the reads: read again
			continue
		}
		if err == nil {
			var rev int64
			if rev, err = t.commit(); err == nil {
				return rev, nil
			}
		}
		if !errors.Is(err, errRetry) {
			if t.serial && t.rev != 0 && !errors.Is(err, errTooBig) && !errors.Is(err, store.ErrFenced) {
				serial = false // a refusal decided on a member's local state: confirm it
				continue
			}
			return 0, s.mapErr(err)
		}
		serial = false
		if attempt == maxAttempts {
			return 0, fmt.Errorf("gave up after %d attempts, each lost to a concurrent writer: %w", attempt, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return 0, s.mapErr(err)
		}
	}
}

// guards are the fences every write of ctx must find holding their values
// (store.Fences): each becomes a compare of the commit, so the check and
// the write are one etcd transaction. A fence whose value is "" must be
// absent (a value compare on a missing key always fails in etcd).
func (s *Store) guards(ctx context.Context) []guard {
	var out []guard
	for _, f := range store.Fences(ctx) {
		k := s.k.fence(f.Key)
		c := clientv3.Compare(clientv3.Value(k), "=", f.Value)
		if f.Value == "" {
			c = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
		}
		out = append(out, guard{f: f, key: k, cmp: c})
	}
	return out
}

// guard is one fence a write checks.
type guard struct {
	f   store.Fence
	key string
	cmp clientv3.Cmp
}

// fenced reads the guards' keys from the Else branch of a failed commit
// (the same revision the compares saw): the fence that does not hold, as
// store.CheckFence words it, or nil when every fence held and the commit
// lost a race instead.
func fenced(gs []guard, resp *clientv3.TxnResponse) error {
	for i, g := range gs {
		have := ""
		if i < len(resp.Responses) {
			if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
				have = string(kvs[0].Value)
			}
		}
		if err := store.CheckFence(g.f, have); err != nil {
			return err
		}
	}
	return nil
}

// backoff sleeps a random while that grows with attempt (at most 50ms),
// so writers that keep colliding spread out.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(min(time.Duration(attempt)*time.Millisecond, 50*time.Millisecond)))) + 100*time.Microsecond
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get reads keys (pending writes of t first) and returns what it found by
// key; a key absent from the map does not exist. The commit compares each
// key's mod revision.
func (t *tx) get(keys ...string) (map[string][]byte, error) { return t.read(false, keys) }

// getSame is get comparing create revisions: the keys may change, but
// not be deleted (and made again), before the commit.
func (t *tx) getSame(keys ...string) (map[string][]byte, error) { return t.read(true, keys) }

func (t *tx) read(byCreate bool, keys []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	var want []string
	for _, k := range keys {
		if w, ok := t.writes[k]; ok {
			if !w.del {
				out[k] = w.val
			}
			continue
		}
		if m, ok := t.seen[k]; ok {
			if !byCreate && m.byCreate {
				m.byCreate = false // the stricter compare wins
				t.seen[k] = m
			}
			if m.exists {
				out[k] = m.val
			}
			continue
		}
		if !slices.Contains(want, k) {
			want = append(want, k)
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	kvs, err := t.fetch(want)
	if err != nil {
		return nil, err
	}
	for i, k := range want {
		m := readMark{byCreate: byCreate}
		if kv := kvs[i]; kv != nil {
			m.exists, m.val, m.mod, m.create = true, kv.Value, kv.ModRevision, kv.CreateRevision
			out[k] = kv.Value
		}
		t.seen[k] = m
	}
	return out, nil
}

// modRev is the mod revision key had when t read it (0: absent or unread).
func (t *tx) modRev(key string) int64 { return t.seen[key].mod }

// fetch reads keys in one request at the transaction's revision (pinning
// it on the first read); nil for a key that does not exist.
func (t *tx) fetch(keys []string) ([]*mvccpb.KeyValue, error) {
	out := make([]*mvccpb.KeyValue, 0, len(keys))
	for chunk := range slices.Chunk(keys, maxOps) {
		ops := make([]clientv3.Op, len(chunk))
		for i, k := range chunk {
			var opts []clientv3.OpOption
			if t.rev != 0 {
				opts = append(opts, clientv3.WithRev(t.rev))
			}
			if t.serial {
				opts = append(opts, clientv3.WithSerializable())
			}
			ops[i] = clientv3.OpGet(k, opts...)
		}
		resp, err := t.s.cli.Txn(t.ctx).Then(ops...).Commit()
		if errors.Is(err, rpctypes.ErrCompacted) || errors.Is(err, rpctypes.ErrFutureRev) || transient(err) {
			// Compacted away, a member behind the one that pinned it, or
			// a leader election under way: a read, so read again.
			return nil, fmt.Errorf("reading at revision %d: %v: %w", t.rev, err, errRetry)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", chunk[0], err)
		}
		if t.rev == 0 {
			t.rev = resp.Header.Revision
			if !t.serial {
				t.s.saw(t.rev)
			}
		}
		for _, r := range resp.Responses {
			var kv *mvccpb.KeyValue
			if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
				kv = kvs[0]
			}
			out = append(out, kv)
		}
	}
	return out, nil
}

// put sets key to val at the commit.
func (t *tx) put(key string, val []byte) {
	t.set(key, &write{val: val})
	t.bytes += len(key) + len(val)
}

// del deletes key at the commit.
func (t *tx) del(key string) {
	t.set(key, &write{del: true})
	t.bytes += len(key)
}

func (t *tx) set(key string, w *write) {
	if _, ok := t.writes[key]; !ok {
		t.order = append(t.order, key)
	}
	t.writes[key] = w
}

// delPrefix deletes every key under prefix at the commit. The keys are not
// read; a write to one of them in the same transaction is not allowed by
// etcd (keys of a transaction's operations must not overlap).
func (t *tx) delPrefix(prefix string) { t.delRange(prefix, prefixEnd(prefix)) }

// delRange deletes the keys from start up to (not including) end.
func (t *tx) delRange(start, end string) {
	t.ranges = append(t.ranges, [2]string{start, end})
	t.bytes += len(start) + len(end)
}

// unset forgets a write t was to make.
func (t *tx) unset(key string) {
	if _, ok := t.writes[key]; !ok {
		return
	}
	delete(t.writes, key)
	t.order = slices.DeleteFunc(t.order, func(k string) bool { return k == key })
}

// ops is how many operations the commit sends.
func (t *tx) ops() int { return len(t.order) + len(t.ranges) }

// fits reports whether adding ops operations and bytes bytes keeps t
// within one etcd transaction (for callers that fill one in rounds).
func (t *tx) fits(ops, compares, bytes int) bool {
	return t.ops()+ops <= maxOps && len(t.seen)+len(t.guards)+compares <= maxOps && t.bytes+bytes <= maxTxnBytes
}

// commit sends the transaction. It returns the commit's revision, errRetry
// when a compare of a read failed, store.ErrFenced when a guard failed
// (not retried: the job belongs to another instance now), or errTooBig. A
// transaction that writes nothing but carries guards is still sent, so a
// fenced caller learns that its fence is gone.
func (t *tx) commit() (int64, error) {
	if t.ops() == 0 && len(t.guards) == 0 {
		return t.rev, nil // nothing to write; the reads were one state
	}
	cmps := make([]clientv3.Cmp, 0, len(t.guards)+len(t.seen))
	orElse := make([]clientv3.Op, 0, len(t.guards))
	for _, g := range t.guards {
		cmps = append(cmps, g.cmp)
		orElse = append(orElse, clientv3.OpGet(g.key))
	}
	for _, k := range slices.Sorted(maps.Keys(t.seen)) {
		m := t.seen[k]
		if m.byCreate {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", m.create))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", m.mod))
		}
	}
	if len(cmps) > maxOps || t.ops() > maxOps || t.bytes > maxTxnBytes {
		return 0, fmt.Errorf("%d compares, %d operations and %d bytes: %w (at most %d, %d and %d)",
			len(cmps), t.ops(), t.bytes, errTooBig, maxOps, maxOps, maxTxnBytes)
	}
	resp, err := t.s.cli.Txn(t.ctx).If(cmps...).Then(t.writeOps()...).Else(orElse...).Commit()
	if err != nil {
		return 0, fmt.Errorf("committing %d writes: %w", t.ops(), err)
	}
	if !resp.Succeeded {
		if err := fenced(t.guards, resp); err != nil {
			return 0, err
		}
		return 0, errRetry
	}
	t.s.saw(resp.Header.Revision)
	return resp.Header.Revision, nil
}

// writeOps are the operations of the commit: puts and deletes in the order
// first written, then the deleted ranges.
func (t *tx) writeOps() []clientv3.Op {
	ops := make([]clientv3.Op, 0, t.ops())
	for _, k := range t.order {
		if w := t.writes[k]; w.del {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(w.val)))
		}
	}
	for _, r := range t.ranges {
		ops = append(ops, clientv3.OpDelete(r[0], clientv3.WithRange(r[1])))
	}
	return ops
}

// view runs fn on a transaction that is never committed: its reads are one
// state (one revision). It runs fn again if that revision is compacted
// away while fn reads.
func (s *Store) view(ctx context.Context, fn func(*tx) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		t := &tx{s: s, ctx: ctx, seen: map[string]readMark{}, writes: map[string]*write{}}
		err := fn(t)
		if !errors.Is(err, errRetry) || attempt == maxAttempts {
			return s.mapErr(err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return s.mapErr(err)
		}
	}
}

// viewFresh is view reading from the member the request reaches
// (serializably: no round trip through the leader), unless that member
// has not yet applied every write this Store made or read: then it reads
// again linearizably. A read after this process's write sees it, as the
// contract asks; another instance's write of the last milliseconds may
// not be seen yet (lookups by MAC on the boot path, where a client that
// finds nothing asks again).
func (s *Store) viewFresh(ctx context.Context, fn func(*tx) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	t := &tx{s: s, ctx: ctx, serial: true, seen: map[string]readMark{}, writes: map[string]*write{}}
	err := fn(t)
	if err == nil || errors.Is(err, store.ErrNotFound) {
		if t.rev != 0 && t.rev >= s.applied.Load() {
			return s.mapErr(err)
		}
	}
	return s.view(ctx, fn)
}

// saw records that revision rev is applied where this Store wrote or read.
func (s *Store) saw(rev int64) {
	for {
		cur := s.applied.Load()
		if rev <= cur || s.applied.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// scanPage is how many keys one request of a scan returns.
const scanPage = 500

// scan calls fn for each key in [start, end) in key order, at the
// transaction's revision, a page at a time. Keys scanned are not compared
// at the commit: a scan serves reads and deletions that hold whatever was
// added meanwhile.
func (t *tx) scan(start, end string, keysOnly bool, fn func(kv *mvccpb.KeyValue) error) error {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(scanPage)}
		if t.rev != 0 {
			opts = append(opts, clientv3.WithRev(t.rev))
		}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := t.s.cli.Get(t.ctx, start, opts...)
		if errors.Is(err, rpctypes.ErrCompacted) || transient(err) {
			return fmt.Errorf("scanning at revision %d: %v: %w", t.rev, err, errRetry)
		}
		if err != nil {
			return fmt.Errorf("scanning %s: %w", start, err)
		}
		if t.rev == 0 {
			t.rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// scanPrefix is scan over every key under prefix.
func (t *tx) scanPrefix(prefix string, keysOnly bool, fn func(kv *mvccpb.KeyValue) error) error {
	return t.scan(prefix, prefixEnd(prefix), keysOnly, fn)
}

// rangeKeys reads at most limit keys of [start, end) with their values at
// the transaction's revision, and whether more follow.
func (t *tx) rangeKeys(start, end string, limit int) ([]*mvccpb.KeyValue, bool, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(limit))}
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.s.cli.Get(t.ctx, start, opts...)
	if errors.Is(err, rpctypes.ErrCompacted) || transient(err) {
		return nil, false, fmt.Errorf("reading at revision %d: %v: %w", t.rev, err, errRetry)
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading keys from %s: %w", start, err)
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	return resp.Kvs, resp.More, nil
}

// transient reports an error of a read that a member going away or a
// leader election causes (the connection to a stopped member broke, the
// member lost its leader, or it changed while a linearizable read
// waited: gRPC's Unavailable): reading again, from another member or once
// there is a leader, answers it. Only reads are retried on it: a write
// that failed so may have been applied.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, rpctypes.ErrLeaderChanged) || errors.Is(err, rpctypes.ErrNoLeader) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) {
		return true
	}
	return status.Code(err) == codes.Unavailable
}
