package etcd

// SetLeaseRound makes s write at most max leases a transaction (1: no
// group commit), for the benchmark that measures what grouping gains.
func SetLeaseRound(s *Store, max int) {
	s.leases.close()
	s.leases = newGroup(s, max, groupWorkers, s.applyLeases)
}

// PauseKeepAlive stops m's keep-alive and nothing else, as a process
// stopped by SIGSTOP: its lease expires in etcd, while its contexts and
// claims stay as they were.
func PauseKeepAlive(m *Member) {
	m.stopKA()
	m.session.Orphan()
}
