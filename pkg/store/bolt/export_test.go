package bolt

import (
	"context"
	"io"

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

// OpenAs opens path as a binary that knows the first version schema steps
// would (an older ingot, for the upgrade and downgrade tests).
func OpenAs(path string, opts store.Options, version int) (*Store, error) {
	return open(path, opts, migrations()[:version], true)
}

// RestoreAs is Restore by a binary that knows the first version steps.
func RestoreAs(path string, src io.Reader, opts store.Options, version int) (string, error) {
	return restore(path, src, opts, migrations()[:version])
}

// LeaseLogRecord is the lease log's record of writing l (a segment is
// such records one after another).
func LeaseLogRecord(l store.Lease) []byte {
	b, err := appendLeaseRecord(nil, leaseOp{Put: &l})
	if err != nil {
		panic(err)
	}
	return b
}
