package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/store"
)

// DefaultQuota is etcd's default --quota-backend-bytes (2 GiB). A 3.4
// server does not report its quota, so the store takes it from the URL
// (quota=8GiB) and assumes this when none is given.
const DefaultQuota = 2 << 30

// statusEvery is how old the cluster status Stats reports may be: a scrape
// starts a refresh in the background when the last one is older, and never
// waits for it (Stats runs at every /metrics scrape).
const statusEvery = 15 * time.Second

// Location is the store's URL without credentials or parameters, for logs.
func (s *Store) Location() string {
	return "etcd://" + strings.Join(s.cfg.Endpoints, ",") + strings.TrimSuffix(s.k.p, "/")
}

// Status is what the cluster says about itself, as Stats and the
// maintenance loop read it.
type Status struct {
	Time time.Time
	// DBSize is the largest backend file of the members (what the quota
	// is checked against), DBInUse the largest logical size in it (the
	// rest is free pages a defragmentation returns).
	DBSize, DBInUse int64
	// Quota is the configured quota (Config.QuotaBytes).
	Quota int64
	// Members is how many members the cluster lists, Reachable how many
	// answered their status.
	Members, Reachable int
	// NoSpace: a NOSPACE alarm is raised (the cluster takes no writes but
	// deletions and compactions until it is disarmed).
	NoSpace bool
	// Revision is the cluster's current revision, PrefixKeys how many
	// keys the store's prefix holds.
	Revision   int64
	PrefixKeys int64
	Err        error
}

// Used is the share of the quota the largest member's file takes.
func (st Status) Used() float64 {
	if st.Quota <= 0 {
		return 0
	}
	return float64(st.DBSize) / float64(st.Quota)
}

// statusCache holds the last Status and runs one refresh at a time.
type statusCache struct {
	mu         sync.Mutex
	last       Status
	refreshing atomic.Bool
}

// ClusterStatus asks every member for its status, the alarms and the
// prefix's key count (a few requests; Stats reads a cached copy).
func (s *Store) ClusterStatus(ctx context.Context) Status {
	st := Status{Time: time.Now(), Quota: s.quota()}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	members, err := s.cli.MemberList(ctx)
	if err != nil {
		st.Err = fmt.Errorf("listing members: %w", err)
		return st
	}
	st.Members = len(members.Members)
	for _, m := range members.Members {
		for _, u := range m.ClientURLs {
			rs, err := s.cli.Status(ctx, u)
			if err != nil {
				continue
			}
			st.Reachable++
			st.DBSize, st.DBInUse = max(st.DBSize, rs.DbSize), max(st.DBInUse, rs.DbSizeInUse)
			st.Revision = max(st.Revision, rs.Header.Revision)
			break
		}
	}
	alarms, err := s.cli.AlarmList(ctx)
	if err == nil {
		for _, a := range alarms.Alarms {
			st.NoSpace = st.NoSpace || a.Alarm == etcdserverpb.AlarmType_NOSPACE
		}
	}
	n, cerr := s.cli.Get(ctx, s.k.p, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if cerr == nil {
		st.PrefixKeys = n.Count
	}
	st.Err = errors.Join(err, cerr)
	return st
}

func (s *Store) quota() int64 {
	if s.cfg.QuotaBytes > 0 {
		return s.cfg.QuotaBytes
	}
	return DefaultQuota
}

// cachedStatus returns the last status, starting a refresh in the
// background when it is older than statusEvery.
func (s *Store) cachedStatus() Status {
	s.status.mu.Lock()
	st := s.status.last
	s.status.mu.Unlock()
	if time.Since(st.Time) > statusEvery && !s.closed.Load() && s.status.refreshing.CompareAndSwap(false, true) {
		go func() {
			defer s.status.refreshing.Store(false)
			fresh := s.ClusterStatus(context.Background())
			s.status.mu.Lock()
			s.status.last = fresh
			s.status.mu.Unlock()
		}()
	}
	return st
}

// Stats are the cluster's size against its quota, its members, the
// prefix's keys and the group commits' work (store.Maintainer). The
// cluster's numbers are at most statusEvery old (0 until the first
// refresh has answered).
func (s *Store) Stats() []store.Stat {
	st := s.cachedStatus()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ls, es := s.leases.stats(), s.events.stats()
	return []store.Stat{
		{Name: "etcd_db_size_bytes", Help: "Largest etcd backend file among the members (what the quota is checked against).", Value: float64(st.DBSize)},
		{Name: "etcd_db_size_in_use_bytes", Help: "Largest logical size in use among the members (the rest is free pages that defragmentation returns).", Value: float64(st.DBInUse)},
		{Name: "etcd_quota_bytes", Help: "The cluster's backend quota as configured (quota= in the store URL; etcd 3.4 does not report it).", Value: float64(st.Quota)},
		{Name: "etcd_quota_used_ratio", Help: "etcd_db_size_bytes / etcd_quota_bytes: at 1 the cluster raises NOSPACE and refuses writes.", Value: st.Used()},
		{Name: "etcd_nospace_alarm", Help: "1 while the cluster's NOSPACE alarm is raised (writes refused).", Value: b(st.NoSpace)},
		{Name: "etcd_members", Help: "Members the cluster lists.", Value: float64(st.Members)},
		{Name: "etcd_members_reachable", Help: "Members that answered their status at the last refresh.", Value: float64(st.Reachable)},
		{Name: "etcd_prefix_keys", Help: "Keys under this store's prefix.", Value: float64(st.PrefixKeys)},
		{Name: "etcd_revision", Help: "The cluster's revision at the last refresh.", Value: float64(st.Revision)},
		{Name: "etcd_lease_rounds_total", Help: "Transactions the lease group commit sent.", Value: float64(ls.Rounds), Counter: true},
		{Name: "etcd_leases_written_total", Help: "Lease writes those transactions carried.", Value: float64(ls.Calls), Counter: true},
		{Name: "etcd_event_rounds_total", Help: "Transactions the event group commit sent.", Value: float64(es.Rounds), Counter: true},
		{Name: "etcd_events_written_total", Help: "Events those transactions carried.", Value: float64(es.Calls), Counter: true},
	}
}

// Compact discards the cluster's history before rev (etcd's compaction is
// the cluster's, not the prefix's: every prefix loses it), waiting until
// the members have applied it (physical). A revision already compacted is
// not an error.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	_, err := s.cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	if err != nil && !strings.Contains(err.Error(), "required revision has been compacted") {
		return fmt.Errorf("compacting %s to revision %d: %w", s.Location(), rev, err)
	}
	return nil
}

// Defragment defragments each member whose file holds more than slack
// bytes of free pages, one member at a time (a member answers nothing
// while it defragments), and disarms a NOSPACE alarm once the largest
// file is back under the quota. It returns the members defragmented.
func (s *Store) Defragment(ctx context.Context, slack int64) ([]string, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	members, err := s.cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("defragmenting %s: listing members: %w", s.Location(), err)
	}
	var done []string
	var errs []error
	for _, m := range members.Members {
		if len(m.ClientURLs) == 0 {
			continue
		}
		u := m.ClientURLs[0]
		rs, err := s.cli.Status(ctx, u)
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", m.Name, err))
			continue
		}
		if rs.DbSize-rs.DbSizeInUse <= slack {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err = s.cli.Defragment(dctx, u)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", m.Name, err))
			continue
		}
		done = append(done, m.Name)
	}
	if st := s.ClusterStatus(ctx); st.NoSpace && st.DBSize < s.quota() {
		// The zero AlarmMember disarms every raised alarm.
		if _, err := s.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
			errs = append(errs, fmt.Errorf("disarming NOSPACE: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return done, fmt.Errorf("defragmenting %s: %w", s.Location(), err)
	}
	return done, nil
}
