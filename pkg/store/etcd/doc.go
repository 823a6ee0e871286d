// Package etcd is the store.Store kept in an etcd cluster (etcd 3.4 and
// later; client pinned to 3.5, see the README), under a key prefix so
// several sites share one cluster. It is opened by an etcd:// URL
// (ParseURL, OpenURL, Backend for the registry in pkg/store/backends) and
// judged by the conformance suite like every backend (storetest.Run);
// keys.go lists the layout.
//
// Every write is one etcd transaction built by tx (txn.go): reads record
// the revision they saw, writes are buffered, and the commit applies them
// only if every key read is unchanged, else the write runs again on fresh
// reads. The fences of the write's context (store.Fences) are compares of
// the same commit; when one fails the write returns store.ErrFenced and
// is not run again (the Else branch of the commit reads the fences, so a
// lost race and a lost fence are told apart from one answer).
// Transactions stay under etcd's limits (128 compares, 128 operations,
// about 1 MiB). Leases and events are group-committed (group.go); an
// event under a fence is written alone. Secondary indexes (names for
// paging, job states, token scopes and jobs) are written in the
// transaction of their record, so a page, the running jobs or a machine's
// credentials cost their answer, not the prefix.
//
// Backup writes the portable backup with the bbolt backend's writer
// (backup.go, bolt.Writer); Restore reads one into an empty prefix
// (restore.go); Check names every broken invariant of a prefix
// (check.go); maintain.go has the cluster's status against its quota
// (Stats), compaction and defragmentation, which the scale-out leader
// runs on a schedule (pkg/scaleout).
package etcd
