package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// PutLease stores l under its MAC (normalized) and indexes its IP. An IP held
// by another MAC's live lease (offered or bound, not expired by the store's
// clock) gives ErrConflict. It returns after the commit, sharing the fsync
// with concurrent callers (db.Batch).
func (b *Bolt) PutLease(ctx context.Context, l Lease) error {
	return b.putLease(ctx, l, b.batch)
}

// putLease is PutLease with the transaction runner chosen by the caller
// (benchmarks compare Batch with Update).
func (b *Bolt) putLease(ctx context.Context, l Lease, run func(context.Context, func(*bolt.Tx) error) error) error {
	mac, err := machine.NormalizeMAC(l.MAC)
	if err != nil {
		return fmt.Errorf("storing lease: %w", err)
	}
	if !l.IP.IsValid() {
		return fmt.Errorf("storing lease for %s: IP is missing", mac)
	}
	l.MAC = mac
	l.IP = l.IP.Unmap()
	now := b.opts.Now().UTC()
	l.Updated = now
	err = run(ctx, func(tx *bolt.Tx) error {
		leases, ips := tx.Bucket(bLeases), tx.Bucket(bIdxIP)
		ipKey := []byte(l.IP.String())
		if holder := ips.Get(ipKey); holder != nil && string(holder) != mac {
			var other Lease
			if _, err := getJSON(leases, holder, &other); err != nil {
				return err
			}
			if other.IP == l.IP && other.live(now) {
				return fmt.Errorf("IP %s is leased to %s until %s: %w", l.IP, holder, other.Expires.Format("2006-01-02T15:04:05Z"), ErrConflict)
			}
		}
		var old Lease
		if ok, err := getJSON(leases, []byte(mac), &old); err != nil {
			return err
		} else if ok && old.IP != l.IP {
			oldKey := []byte(old.IP.String())
			if string(ips.Get(oldKey)) == mac {
				if err := ips.Delete(oldKey); err != nil {
					return err
				}
			}
		}
		if err := ips.Put(ipKey, []byte(mac)); err != nil {
			return err
		}
		return putJSON(leases, []byte(mac), &l)
	})
	if err != nil {
		return fmt.Errorf("storing lease %s -> %s: %w", mac, l.IP, err)
	}
	return nil
}

// live reports whether the lease still holds its address at now.
func (l *Lease) live(now time.Time) bool {
	return (l.State == "offered" || l.State == "bound") && now.Before(l.Expires)
}

// LeaseByMAC returns the lease of mac (any notation net.ParseMAC accepts).
func (b *Bolt) LeaseByMAC(ctx context.Context, mac string) (*Lease, error) {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("reading lease: %w", err)
	}
	var l *Lease
	err = b.view(ctx, func(tx *bolt.Tx) error {
		l, err = getLease(tx, []byte(norm))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading lease of %s: %w", norm, err)
	}
	return l, nil
}

// LeaseByIP returns the lease that last took ip.
func (b *Bolt) LeaseByIP(ctx context.Context, ip netip.Addr) (*Lease, error) {
	var l *Lease
	err := b.view(ctx, func(tx *bolt.Tx) error {
		mac := tx.Bucket(bIdxIP).Get([]byte(ip.Unmap().String()))
		if mac == nil {
			return ErrNotFound
		}
		var err error
		l, err = getLease(tx, mac)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading lease of IP %s: %w", ip, err)
	}
	return l, nil
}

func getLease(tx *bolt.Tx, mac []byte) (*Lease, error) {
	var l Lease
	ok, err := getJSON(tx.Bucket(bLeases), mac, &l)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return &l, nil
}

// ListLeases returns every lease, ordered by MAC.
func (b *Bolt) ListLeases(ctx context.Context) ([]Lease, error) {
	var out []Lease
	err := b.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bLeases).ForEach(func(k, v []byte) error {
			var l Lease
			if err := json.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("decoding lease %s: %w", k, err)
			}
			out = append(out, l)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing leases: %w", err)
	}
	return out, nil
}

// DeleteLease removes the lease of mac and its IP index entry.
func (b *Bolt) DeleteLease(ctx context.Context, mac string) error {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return fmt.Errorf("deleting lease: %w", err)
	}
	err = b.update(ctx, func(tx *bolt.Tx) error {
		l, err := getLease(tx, []byte(norm))
		if err != nil {
			return err
		}
		ips := tx.Bucket(bIdxIP)
		if key := []byte(l.IP.String()); string(ips.Get(key)) == norm {
			if err := ips.Delete(key); err != nil {
				return err
			}
		}
		return tx.Bucket(bLeases).Delete([]byte(norm))
	})
	if err != nil {
		return fmt.Errorf("deleting lease of %s: %w", norm, err)
	}
	return nil
}
