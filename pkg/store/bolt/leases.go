package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// leaseApplyDelay is how long logged lease mutations gather before one
// bbolt transaction applies them (see leaselog.go).
const leaseApplyDelay = 100 * time.Millisecond

// PutLease stores l under its MAC (normalized) and indexes its IP. An IP held
// by another MAC's live lease (LeaseLive at the store's clock) gives
// ErrConflict (LeaseConflict). It returns once the lease is durable in the
// lease log, sharing the fdatasync with concurrent callers.
func (b *Store) PutLease(ctx context.Context, l store.Lease) error {
	return b.PutLeases(ctx, []store.Lease{l})[0]
}

// PutLeases stores many leases with one fdatasync (shared, like PutLease's,
// with concurrent callers). The result holds one error per lease: a lease
// whose IP is held by another MAC's live lease gets ErrConflict, an invalid
// one its own error, and the others are still stored; a failure to write
// the log is reported for every lease.
func (b *Store) PutLeases(ctx context.Context, ls []store.Lease) []error {
	ops := make([]leaseOp, len(ls))
	errs := make([]error, len(ls))
	for i, l := range ls {
		l, err := store.NormalizeLease(l)
		if err != nil {
			errs[i] = fmt.Errorf("storing lease: %w", err)
			continue
		}
		ops[i] = leaseOp{Put: &l}
	}
	errs = b.logLeases(ctx, ops, errs)
	for i, err := range errs {
		if err != nil && ops[i].Put != nil {
			errs[i] = fmt.Errorf("storing lease %s -> %s: %w", ops[i].Put.MAC, ops[i].Put.IP, err)
		}
	}
	return errs
}

// DeleteLease removes the lease of mac and its IP index entry.
func (b *Store) DeleteLease(ctx context.Context, mac string) error {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return fmt.Errorf("deleting lease: %w", err)
	}
	if err := b.logLeases(ctx, []leaseOp{{Del: norm}}, []error{nil})[0]; err != nil {
		return fmt.Errorf("deleting lease of %s: %w", norm, err)
	}
	return nil
}

// logLeases is the group commit: ops join the queue; a caller that finds
// no leader leads one round (everything queued), then hands the lead to the
// oldest caller that queued meanwhile. An op with a preset error is skipped.
func (b *Store) logLeases(ctx context.Context, ops []leaseOp, errs []error) []error {
	if err := b.ready(ctx); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	lg := b.leases
	req := &leaseReq{ops: ops, errs: errs, wake: make(chan struct{})}
	defer func() {
		span := req.written - req.queued
		for old := lg.maxSpan.Load(); span > old && !lg.maxSpan.CompareAndSwap(old, span); old = lg.maxSpan.Load() {
		}
	}()
	lg.qmu.Lock()
	req.queued = lg.rounds.Load()
	lg.queue = append(lg.queue, req)
	if lg.leading {
		lg.qmu.Unlock()
		<-req.wake
		if !req.lead {
			return req.errs // a leader wrote it
		}
	} else {
		lg.leading = true
		lg.qmu.Unlock()
	}
	// Lead one round: everything queued, req included. Then hand the lead
	// to the first caller that queued meanwhile, so no caller waits for
	// more rounds than its own.
	lg.qmu.Lock()
	round := lg.queue
	lg.queue = nil
	lg.qmu.Unlock()
	b.writeLeaseRound(round)
	n := lg.rounds.Add(1)
	for _, r := range round {
		r.written = n
	}
	lg.qmu.Lock()
	if len(lg.queue) > 0 {
		next := lg.queue[0]
		next.lead = true
		close(next.wake)
	} else {
		lg.leading = false
	}
	lg.qmu.Unlock()
	for _, r := range round {
		if r != req {
			close(r.wake)
		}
	}
	return req.errs
}

// writeLeaseRound checks a round's mutations against the current leases
// (bbolt plus the overlay plus the round's earlier mutations), logs the
// accepted ones with one fdatasync, and only then shows them to readers.
func (b *Store) writeLeaseRound(round []*leaseReq) {
	lg := b.leases
	lg.wmu.Lock()
	defer lg.wmu.Unlock()
	fail := func(err error) {
		for _, r := range round {
			for i := range r.ops {
				if r.errs[i] == nil {
					r.errs[i] = err
				}
			}
		}
	}
	if b.closed.Load() {
		fail(store.ErrClosed)
		return
	}
	rc := &roundCheck{b: b, now: b.opts.Now().UTC(), local: map[string]leaseOp{}, localIP: map[netip.Addr]string{}}
	lg.mu.RLock()
	err := b.db.View(func(tx *bbolt.Tx) error {
		rc.tx = tx
		for _, r := range round {
			for i, op := range r.ops {
				if r.errs[i] == nil {
					r.errs[i] = rc.accept(op)
				}
			}
		}
		return nil
	})
	lg.mu.RUnlock()
	if err != nil {
		fail(b.mapErr(err))
		return
	}
	if len(rc.buf) == 0 {
		return
	}
	start := time.Now()
	err = lg.write(rc.buf)
	lg.stats.writeNanos.Add(int64(time.Since(start)))
	if err != nil {
		lg.stats.writeErrors.Add(1)
		fail(err)
		lg.kickApplier() // it heals the log (applyLeases)
		return
	}
	lg.stats.mutations.Add(uint64(len(rc.accepted)))
	lg.remember(rc.accepted)
}

// roundCheck judges a round's mutations one by one, each against the
// leases as the ones accepted before it in the round leave them.
type roundCheck struct {
	b        *Store
	tx       *bbolt.Tx
	now      time.Time
	buf      []byte                // the accepted mutations, framed for the log
	accepted []leaseOp             // in order
	local    map[string]leaseOp    // this round's accepted mutations by MAC
	localIP  map[netip.Addr]string // this round's puts by IP
}

// current is mac's lease with this round's accepted mutations applied.
func (rc *roundCheck) current(mac string) (*store.Lease, error) {
	if op, ok := rc.local[mac]; ok {
		return op.Put, nil
	}
	return rc.b.currentLease(rc.tx, mac)
}

// accept checks one mutation and, when it holds, adds it to the round.
func (rc *roundCheck) accept(op leaseOp) error {
	mac := op.mac()
	if op.Put != nil {
		l := *op.Put
		holder, ok := rc.localIP[l.IP]
		if !ok {
			holder = rc.b.ipHolder(rc.tx, l.IP)
		}
		if holder != "" && holder != mac {
			other, err := rc.current(holder)
			if err != nil {
				return fmt.Errorf("reading the lease of %s, which took %s: %w", holder, l.IP, err)
			}
			if err := store.LeaseConflict(other, l, rc.now); err != nil {
				return err
			}
		}
		l.Updated = rc.now
		op = leaseOp{Put: &l}
		rc.localIP[l.IP] = mac
	} else {
		cur, err := rc.current(mac)
		if err != nil {
			return err
		}
		if cur == nil {
			return store.ErrNotFound
		}
	}
	buf, err := appendLeaseRecord(rc.buf, op)
	if err != nil {
		return err
	}
	rc.buf = buf
	rc.local[mac] = op
	rc.accepted = append(rc.accepted, op)
	return nil
}

// currentLease is the lease of mac as readers see it: the overlay's
// mutation if there is one, else bbolt's record; nil when there is none.
// The caller holds lg.mu (read) and tx.
func (b *Store) currentLease(tx *bbolt.Tx, mac string) (*store.Lease, error) {
	if e, ok := b.leases.byMAC[mac]; ok {
		return e.op.Put, nil
	}
	l, err := getLease(tx, []byte(mac))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return l, err
}

// ipHolder is the MAC that took ip last (it may since have moved on:
// check its current lease). The caller holds lg.mu (read) and tx.
func (b *Store) ipHolder(tx *bbolt.Tx, ip netip.Addr) string {
	if mac, ok := b.leases.byIP[ip]; ok {
		return mac
	}
	return string(tx.Bucket(bIdxIP).Get([]byte(ip.String())))
}

// LeaseByMAC returns the lease of mac (any notation net.ParseMAC accepts).
func (b *Store) LeaseByMAC(ctx context.Context, mac string) (*store.Lease, error) {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("reading lease: %w", err)
	}
	var l *store.Lease
	err = b.viewLeases(ctx, func(tx *bbolt.Tx) error {
		l, err = b.currentLease(tx, norm)
		if err == nil && l == nil {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading lease of %s: %w", norm, err)
	}
	c := *l
	return &c, nil
}

// LeaseByIP returns the lease that holds ip.
func (b *Store) LeaseByIP(ctx context.Context, ip netip.Addr) (*store.Lease, error) {
	ip = ip.Unmap()
	var l *store.Lease
	err := b.viewLeases(ctx, func(tx *bbolt.Tx) error {
		mac := b.ipHolder(tx, ip)
		if mac == "" {
			return store.ErrNotFound
		}
		var err error
		if l, err = b.currentLease(tx, mac); err != nil {
			return err
		}
		if l == nil || l.IP != ip {
			return store.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading lease of IP %s: %w", ip, err)
	}
	c := *l
	return &c, nil
}

func getLease(tx *bbolt.Tx, mac []byte) (*store.Lease, error) {
	var l store.Lease
	ok, err := getJSON(tx.Bucket(bLeases), mac, &l)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, store.ErrNotFound
	}
	return &l, nil
}

// ListLeases returns every lease, ordered by MAC.
func (b *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	var out []store.Lease
	err := b.viewLeases(ctx, func(tx *bbolt.Tx) error {
		err := tx.Bucket(bLeases).ForEach(func(k, v []byte) error {
			if _, ok := b.leases.byMAC[string(k)]; ok {
				return nil // the overlay has a newer mutation
			}
			var l store.Lease
			if err := json.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("decoding lease %s: %w", k, err)
			}
			out = append(out, l)
			return nil
		})
		for _, e := range b.leases.byMAC {
			if e.op.Put != nil {
				out = append(out, *e.op.Put)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return strings.Compare(a.MAC, b.MAC) })
	return out, nil
}

// viewLeases is view with the overlay held still, so bbolt and the overlay
// are read as one state (the applier forgets entries only after bbolt has
// them).
func (b *Store) viewLeases(ctx context.Context, fn func(*bbolt.Tx) error) error {
	b.leases.mu.RLock()
	defer b.leases.mu.RUnlock()
	return b.view(ctx, fn)
}

// applyLeaseOp writes one logged mutation to bbolt, keeping the IP index in
// step: the index entry of an address the MAC left is removed if it still
// points at the MAC.
func applyLeaseOp(tx *bbolt.Tx, op leaseOp) error {
	leases, ips := tx.Bucket(bLeases), tx.Bucket(bIdxIP)
	mac := []byte(op.mac())
	old, err := getLease(tx, mac)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		// An undecodable record is replaced, not allowed to stop every
		// other lease from being applied; only its IP index entry stays.
		old = nil
	}
	if old != nil && (op.Put == nil || old.IP != op.Put.IP) {
		if key := []byte(old.IP.String()); string(ips.Get(key)) == string(mac) {
			if err := ips.Delete(key); err != nil {
				return err
			}
		}
	}
	if op.Put == nil {
		return leases.Delete(mac)
	}
	if err := ips.Put([]byte(op.Put.IP.String()), mac); err != nil {
		return err
	}
	return putJSON(leases, mac, op.Put)
}

// commitLeaseOps applies ops to bbolt in order and records, in the same
// transaction, that the log is applied through segment seg.
func (b *Store) commitLeaseOps(ops []leaseOp, seg uint64) error {
	return b.db.Update(func(tx *bbolt.Tx) error {
		for _, op := range ops {
			if err := applyLeaseOp(tx, op); err != nil {
				return fmt.Errorf("applying logged lease of %s: %w", op.mac(), err)
			}
		}
		return tx.Bucket(bMeta).Put(kLeaseLogApplied, u64(seg))
	})
}

// applyLeases moves the logged mutations into bbolt, in the order they
// were logged. Unless final, it first seals the segment being written (new
// mutations go to the next one), so it applies only whole segments; a seal
// whose apply failed is retried before another is made. final (Close)
// applies everything with the writer stopped.
func (b *Store) applyLeases(final bool) error {
	lg := b.leases
	lg.wmu.Lock()
	sealed := lg.seg
	switch {
	case final:
		defer lg.wmu.Unlock()
	case lg.unapplied != 0: // an earlier seal failed to apply
		sealed = lg.unapplied
		lg.wmu.Unlock()
	default:
		if len(lg.ops) == 0 && lg.size == 0 && lg.broken == nil {
			lg.wmu.Unlock()
			return nil
		}
		f, err := lg.create(sealed + 1)
		if err != nil {
			lg.wmu.Unlock()
			return err
		}
		old := lg.f
		lg.f, lg.seg, lg.size = f, sealed+1, 0
		lg.unapplied = sealed
		lg.wmu.Unlock()
		old.Close()
	}
	entries := lg.sealed(sealed)
	if final && len(entries) == 0 {
		// Nothing logged since the last apply (a CLI command, say): the
		// segment is empty, and the database needs no write.
		return lg.removeUpTo(sealed)
	}
	ops := make([]leaseOp, len(entries))
	for i, e := range entries {
		ops[i] = e.op
	}
	start := time.Now()
	err := b.commitLeaseOps(ops, sealed)
	lg.stats.applyNanos.Add(int64(time.Since(start)))
	if err != nil {
		lg.stats.applyErrors.Add(1)
		return fmt.Errorf("applying the lease log to %s: %w", b.path, err)
	}
	lg.stats.applies.Add(1)
	lg.forget(len(entries))
	if !final {
		lg.wmu.Lock()
		lg.unapplied = 0
		if lg.brokenSeg <= sealed {
			// The damaged segment is applied: replay skips it now, so its
			// undone tail cannot come back, and writing resumes.
			lg.broken, lg.brokenSeg = nil, 0
		}
		lg.wmu.Unlock()
	}
	return lg.removeUpTo(sealed)
}

// applyLoop applies the log leaseApplyDelay after the first mutation of a
// batch, until Close. A failed apply is retried with a growing delay.
func (b *Store) applyLoop() {
	lg := b.leases
	defer close(lg.done)
	delay := leaseApplyDelay
	for {
		select {
		case <-lg.kick:
		case <-lg.stop:
			return
		}
		select {
		case <-time.After(delay):
		case <-lg.stop:
			return
		}
		if err := b.applyLeases(false); err != nil {
			b.opts.Logger.Warn("store: lease log not applied; retrying", "in", delay*2, "err", err)
			delay = min(delay*2, 10*time.Second)
			lg.kickApplier()
			continue
		}
		delay = leaseApplyDelay
	}
}

// openLeases replays the segments left by a process that did not close the
// store, starts a fresh segment and the applier.
func (b *Store) openLeases() error {
	lg := newLeaseLog(b.path)
	b.leases = lg
	last, err := b.replayLeases(lg)
	if err != nil {
		return err
	}
	if lg.f, err = lg.create(last + 1); err != nil {
		return err
	}
	lg.seg = last + 1
	go b.applyLoop()
	return nil
}

// replayLeases applies to the file the segments of lg a process left
// unapplied (it died, or the file is opened to be migrated) and removes
// them; it returns the last segment number seen.
func (b *Store) replayLeases(lg *leaseLog) (uint64, error) {
	segs, err := lg.segments()
	if err != nil {
		return 0, err
	}
	var applied uint64
	if err := b.db.View(func(tx *bbolt.Tx) error {
		if raw := tx.Bucket(bMeta).Get(kLeaseLogApplied); len(raw) == 8 {
			applied = binary.BigEndian.Uint64(raw)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	last := applied
	var ops []leaseOp
	for _, n := range segs {
		last = max(last, n)
		if n <= applied {
			continue // applied; its deletion did not survive a crash
		}
		data, err := os.ReadFile(lg.segPath(n))
		if err != nil {
			return 0, fmt.Errorf("replaying lease log: %w", err)
		}
		seg, skips, tail := recoverLeaseLog(data)
		if tail != nil {
			b.opts.Logger.Warn("store: lease log segment ends in a partial record (being written when the process died or its write failed, never acknowledged); dropped",
				"segment", lg.segPath(n), "why", tail)
		}
		if len(skips) > 0 {
			lg.keepDamaged(n, data, skips, b.opts.Logger)
		}
		ops = append(ops, seg...)
	}
	if last > applied {
		if err := b.commitLeaseOps(ops, last); err != nil {
			return 0, fmt.Errorf("replaying lease log: %w", err)
		}
		if len(ops) > 0 {
			b.opts.Logger.Info("store: replayed lease log", "mutations", len(ops))
		}
	}
	return last, lg.removeUpTo(last)
}

// closeLeases stops the applier, applies what is left and removes the log.
func (b *Store) closeLeases() error {
	lg := b.leases
	close(lg.stop)
	<-lg.done
	err := b.applyLeases(true)
	lg.f.Close()
	return err
}

// LeaseLogStats returns the lease log's counters since Open.
func (b *Store) LeaseLogStats() LeaseLogStats {
	lg := b.leases
	c := &lg.stats
	lg.mu.RLock()
	pending := len(lg.ops)
	lg.mu.RUnlock()
	return LeaseLogStats{Rounds: lg.rounds.Load(), Mutations: c.mutations.Load(), WriteErrors: c.writeErrors.Load(),
		WriteSeconds: time.Duration(c.writeNanos.Load()).Seconds(), Applies: c.applies.Load(),
		ApplyErrors: c.applyErrors.Load(), ApplySeconds: time.Duration(c.applyNanos.Load()).Seconds(), Pending: pending}
}
