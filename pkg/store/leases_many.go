package store

import (
	"context"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// PutLeases stores many leases in one transaction: one commit, one fsync,
// no batch timer. It is the DHCP server's group commit (pkg/boot/dhcp
// gathers the leases that arrive while the previous round commits). The
// result holds one error per lease: a lease whose IP is held by another
// MAC's live lease gets ErrConflict and the others are still stored; any
// other failure aborts the transaction and is reported for every lease.
// (Added by the DHCP helper; same rules as PutLease, whose code it reuses.)
func (b *Bolt) PutLeases(ctx context.Context, ls []Lease) []error {
	errs := make([]error, len(ls))
	var abort error
	err := b.update(ctx, func(tx *bolt.Tx) error {
		abort = nil
		inTx := func(_ context.Context, fn func(*bolt.Tx) error) error {
			err := fn(tx)
			if err != nil && !errors.Is(err, ErrConflict) {
				abort = err
			}
			return err
		}
		for i, l := range ls {
			if errs[i] = b.putLease(ctx, l, inTx); abort != nil {
				return abort
			}
		}
		return nil
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
