package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// maxLeasesPerTxn caps the lease writes one group-commit round carries.
// A new lease reads two keys (its MAC's lease, the IP's index entry: two
// compares) and writes two, so 60 fill etcd's 128 compares and operations
// but for a few guards. A lease that moves or takes an address another
// MAC held reads two more; a round that comes out over the limit is
// halved before it is sent (group.commit).
const maxLeasesPerTxn = 60

// leaseOp is one lease write of a round: a put, or a delete of Del's lease.
type leaseOp struct {
	Put *store.Lease
	Del string
}

// PutLease stores l under its MAC and indexes its IP, refusing an IP
// another MAC's live lease holds (store.LeaseConflict). It returns once
// the lease is committed by the cluster (a raft commit: on disk on a
// majority of members). Concurrent calls share one transaction (up to
// maxLeasesPerTxn), which compares every key each lease was checked
// against, so two instances cannot give one address to two MACs.
func (s *Store) PutLease(ctx context.Context, l store.Lease) error {
	l, err := store.NormalizeLease(l)
	if err != nil {
		return fmt.Errorf("storing lease: %w", err)
	}
	if _, err := s.leases.do(ctx, leaseOp{Put: &l}); err != nil {
		return fmt.Errorf("storing lease %s -> %s: %w", l.MAC, l.IP, err)
	}
	return nil
}

// DeleteLease removes the lease of mac and its IP index entry.
func (s *Store) DeleteLease(ctx context.Context, mac string) error {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return fmt.Errorf("deleting lease: %w", err)
	}
	if _, err := s.leases.do(ctx, leaseOp{Del: norm}); err != nil {
		return fmt.Errorf("deleting lease of %s: %w", norm, err)
	}
	return nil
}

// LeaseStats counts the lease group commit's rounds and writes since Open.
func (s *Store) LeaseStats() GroupStats { return s.leases.stats() }

// EventStats counts the event group commit's rounds and appends since Open.
func (s *Store) EventStats() GroupStats { return s.events.stats() }

// applyLeases adds a round of lease writes to t, in queue order: a later
// write of the round sees the earlier ones (t reads its own writes).
func (s *Store) applyLeases(t *tx, calls []*call[leaseOp, struct{}]) error {
	if err := t.prefetchLeases(calls); err != nil {
		return err
	}
	now := s.opts.Now().UTC()
	for _, c := range calls {
		var err error
		if c.in.Put != nil {
			err = t.putLease(*c.in.Put, now)
		} else {
			err = t.deleteLease(c.in.Del)
		}
		if err != nil && !isCallError(err) {
			return err
		}
		c.err = err
	}
	return nil
}

// callError marks an error that is one call's answer (a conflict, no such
// lease), not a failure of the round.
type callError struct{ error }

func (e callError) Unwrap() error { return e.error }

func isCallError(err error) bool {
	_, ok := err.(callError)
	return ok
}

// prefetchLeases reads, in two requests for the whole round, the keys
// putLease and deleteLease will ask for.
func (t *tx) prefetchLeases(calls []*call[leaseOp, struct{}]) error {
	var ks []string
	for _, c := range calls {
		if c.in.Put != nil {
			ks = append(ks, t.s.k.lease(c.in.Put.MAC), t.s.k.leaseIP(c.in.Put.IP.String()))
		} else {
			ks = append(ks, t.s.k.lease(c.in.Del))
		}
	}
	got, err := t.get(ks...)
	if err != nil {
		return err
	}
	var more []string
	for _, c := range calls {
		if c.in.Put == nil {
			continue
		}
		if holder, ok := got[t.s.k.leaseIP(c.in.Put.IP.String())]; ok && string(holder) != c.in.Put.MAC {
			more = append(more, t.s.k.lease(string(holder)))
		}
		if cur, err := decodeLease(got[t.s.k.lease(c.in.Put.MAC)]); err == nil && cur != nil && cur.IP != c.in.Put.IP {
			more = append(more, t.s.k.leaseIP(cur.IP.String()))
		}
	}
	_, err = t.get(more...)
	return err
}

// lease reads mac's current lease (nil when none).
func (t *tx) lease(mac string) (*store.Lease, error) {
	k := t.s.k.lease(mac)
	got, err := t.get(k)
	if err != nil {
		return nil, err
	}
	return decodeLease(got[k])
}

func decodeLease(raw []byte) (*store.Lease, error) {
	if raw == nil {
		return nil, nil
	}
	var l store.Lease
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("decoding lease: %w", err)
	}
	return &l, nil
}

// putLease writes normalized l if no other MAC's live lease holds its IP.
func (t *tx) putLease(l store.Lease, now time.Time) error {
	ipk := t.s.k.leaseIP(l.IP.String())
	got, err := t.get(ipk)
	if err != nil {
		return err
	}
	if holder, ok := got[ipk]; ok && string(holder) != l.MAC {
		other, err := t.lease(string(holder))
		if err != nil {
			return fmt.Errorf("reading the lease of %s, which took %s: %w", holder, l.IP, err)
		}
		if err := store.LeaseConflict(other, l, now); err != nil {
			return callError{err}
		}
	}
	cur, err := t.lease(l.MAC)
	if err != nil {
		return err
	}
	if cur != nil && cur.IP != l.IP {
		if err := t.unindexIP(cur.IP, l.MAC); err != nil {
			return err
		}
	}
	l.Updated = now
	raw, err := json.Marshal(&l)
	if err != nil {
		return callError{err}
	}
	t.put(t.s.k.lease(l.MAC), raw)
	t.put(ipk, []byte(l.MAC))
	return nil
}

// unindexIP deletes ip's index entry if it still points at mac.
func (t *tx) unindexIP(ip netip.Addr, mac string) error {
	k := t.s.k.leaseIP(ip.String())
	got, err := t.get(k)
	if err != nil {
		return err
	}
	if string(got[k]) == mac {
		t.del(k)
	}
	return nil
}

// deleteLease removes mac's lease and its IP's index entry.
func (t *tx) deleteLease(mac string) error {
	cur, err := t.lease(mac)
	if err != nil {
		return err
	}
	if cur == nil {
		return callError{store.ErrNotFound}
	}
	if err := t.unindexIP(cur.IP, mac); err != nil {
		return err
	}
	t.del(t.s.k.lease(mac))
	return nil
}

// LeaseByMAC returns the lease of mac (any notation NormalizeMAC accepts).
func (s *Store) LeaseByMAC(ctx context.Context, mac string) (*store.Lease, error) {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("reading lease: %w", err)
	}
	var l *store.Lease
	err = s.view(ctx, func(t *tx) error {
		var err error
		if l, err = t.lease(norm); err == nil && l == nil {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading lease of %s: %w", norm, err)
	}
	return l, nil
}

// LeaseByIP returns the lease that holds ip now.
func (s *Store) LeaseByIP(ctx context.Context, ip netip.Addr) (*store.Lease, error) {
	ip = ip.Unmap()
	var l *store.Lease
	err := s.view(ctx, func(t *tx) error {
		k := s.k.leaseIP(ip.String())
		got, err := t.get(k)
		if err != nil {
			return err
		}
		mac, ok := got[k]
		if !ok {
			return store.ErrNotFound
		}
		if l, err = t.lease(string(mac)); err != nil {
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
	return l, nil
}

// ListLeases returns every lease, ordered by MAC.
func (s *Store) ListLeases(ctx context.Context) ([]store.Lease, error) {
	var out []store.Lease
	err := s.view(ctx, func(t *tx) error {
		out = nil
		return t.scanPrefix(s.k.leases(), false, func(kv *mvccpb.KeyValue) error {
			l, err := decodeLease(kv.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", kv.Key, err)
			}
			out = append(out, *l)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	slices.SortFunc(out, func(a, b store.Lease) int { return strings.Compare(a.MAC, b.MAC) })
	return out, nil
}
