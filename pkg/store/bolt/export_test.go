package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

// PutLeaseUpdate writes l straight into bbolt with one fsynced db.Update,
// bypassing the lease log (what PutLease did before the log), for
// BenchmarkPutLease. Only for fresh stores with distinct MACs.
func (b *Store) PutLeaseUpdate(ctx context.Context, l store.Lease) error {
	return b.update(ctx, func(tx *bbolt.Tx) error { return applyLeaseOp(tx, leaseOp{Put: &l}) })
}

// ApplyLeaseLog applies the lease log now, as the applier does after
// leaseApplyDelay.
func (b *Store) ApplyLeaseLog() error { return b.applyLeases(false) }

// LeaseLogSegments lists the lease log's segment files.
func (b *Store) LeaseLogSegments() ([]string, error) {
	segs, err := b.leases.segments()
	var out []string
	for _, n := range segs {
		out = append(out, b.leases.segPath(n))
	}
	return out, err
}

// HighWater is the file size a bbolt file's meta page 0 says it needs.
func HighWater(b []byte) int {
	m, err := parseMeta(b[:4096])
	if err != nil {
		return 0
	}
	return int(m.pgid) * int(m.pageSize)
}
