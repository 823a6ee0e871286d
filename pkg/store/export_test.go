package store

import "context"

// PutLeaseUpdate is PutLease with one db.Update per call instead of
// db.Batch, for BenchmarkPutLease.
func (b *Bolt) PutLeaseUpdate(ctx context.Context, l Lease) error {
	return b.putLease(ctx, l, b.update)
}
