package etcd

// SetLeaseRound makes s write at most max leases a transaction (1: no
// group commit), for the benchmark that measures what grouping gains.
func SetLeaseRound(s *Store, max int) {
	s.leases.close()
	s.leases = newGroup(s, max, groupWorkers, s.applyLeases)
}
