// Package etcd is the store.Store kept in an etcd cluster (etcd 3.4 and
// later; client pinned to 3.5, see the README), under a key prefix so
// several sites share one cluster. It is opened by an etcd:// URL
// (ParseURL, OpenURL) and judged by the conformance suite like every
// backend (storetest.Run); keys.go lists the layout.
//
// Every write is one etcd transaction built by tx (txn.go): reads record
// the revision they saw, writes are buffered, and the commit applies them
// only if every key read is unchanged, else the write runs again on fresh
// reads. Transactions stay under etcd's limits (128 compares, 128
// operations, about 1 MiB). Leases and events are group-committed
// (group.go). Backup writes the bbolt backend's file (backup.go), and
// Check names every broken invariant of a prefix (check.go).
//
// Extension points for the rest of issue 23:
//   - Conditional writes (fencing a job's writes by its owner key): guards
//     in txn.go is the one place that adds a compare to every write's
//     transaction. When it is added, update must tell a failed guard
//     (an error for the caller, not retried) from a lost race (retried):
//     on a failed commit, read the guard keys again.
//   - The store registry (issue 22): one line registering "etcd" with
//     OpenURL; Client exposes the client for leases, sessions, elections
//     and watches, which live beside the store, not in it.
//   - Quota, compaction and defragmentation: Client's Status and
//     AlarmList (a 3.4 server does not report its quota: configure it).
//   - Migration from bbolt: every record type has an exported writer with
//     the contract's semantics; a migration that must keep sequence
//     numbers and timestamps as they are wants a raw import beside
//     writeBolt (backup.go), its reverse.
package etcd
