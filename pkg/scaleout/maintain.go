package scaleout

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/etcd"
)

// Maintenance is what the group's leader (one instance, elected through
// etcd) does to the cluster on a schedule. etcd keeps every old revision
// of every key until it is compacted, and a compacted database keeps its
// free pages until it is defragmented; an instance of ingot is the one
// writer who knows its own pace, so its leader does both (leave etcd's
// own --auto-compaction-* off, or set CompactEvery to 0 and let etcd do
// it). The zero value is the defaults.
type Maintenance struct {
	// CompactEvery: every so often the leader compacts the cluster to the
	// revision it saw the time before, so at least CompactEvery of history
	// stays for watches that lag (default 1h; negative: never).
	CompactEvery time.Duration
	// DefragEvery: every so often the leader defragments each member whose
	// file holds more than DefragSlack bytes of free pages, one at a time
	// (default 6h and 64 MiB; negative: never).
	DefragEvery time.Duration
	DefragSlack int64
	// QuotaWarn is the share of the quota at which the leader alerts
	// (default 0.8); at NOSPACE it compacts and defragments at once.
	QuotaWarn float64
	// CheckEvery is how often the quota is looked at (default 30 s).
	CheckEvery time.Duration
	// Alert is told when the quota alarm fires and clears (besides the
	// log line); nil: the log line only.
	Alert func(ctx context.Context, firing bool, summary string)
}

func (m Maintenance) withDefaults() Maintenance {
	if m.CompactEvery == 0 {
		m.CompactEvery = time.Hour
	}
	if m.DefragEvery == 0 {
		m.DefragEvery = 6 * time.Hour
	}
	if m.DefragSlack <= 0 {
		m.DefragSlack = 64 << 20
	}
	if m.QuotaWarn <= 0 {
		m.QuotaWarn = 0.8
	}
	if m.CheckEvery <= 0 {
		m.CheckEvery = 30 * time.Second
	}
	return m
}

// maintainer runs Maintenance while this instance leads.
type maintainer struct {
	es     *etcd.Store
	cfg    Maintenance
	log    *slog.Logger
	firing bool
}

func newMaintainer(es *etcd.Store, cfg Maintenance, log *slog.Logger) *maintainer {
	return &maintainer{es: es, cfg: cfg.withDefaults(), log: log}
}

// run is the leader's loop: until ctx ends (the lead lost).
func (m *maintainer) run(ctx context.Context) {
	check := time.NewTicker(m.cfg.CheckEvery)
	defer check.Stop()
	compact, defrag := ticker(m.cfg.CompactEvery), ticker(m.cfg.DefragEvery)
	defer compact.Stop()
	defer defrag.Stop()
	var mark int64 // the revision seen at the last compaction tick
	if st := m.es.ClusterStatus(ctx); st.Err == nil {
		mark = st.Revision
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			m.checkQuota(ctx)
		case <-compact.C:
			mark = m.compact(ctx, mark)
		case <-defrag.C:
			m.defrag(ctx)
		}
	}
}

// ticker is a time.Ticker, or one that never fires for d < 0.
func ticker(d time.Duration) *time.Ticker {
	if d < 0 {
		t := time.NewTicker(time.Hour)
		t.Stop()
		return t
	}
	return time.NewTicker(d)
}

// compact compacts to mark (a revision at least CompactEvery old) and
// returns the revision now, the next tick's mark.
func (m *maintainer) compact(ctx context.Context, mark int64) int64 {
	st := m.es.ClusterStatus(ctx)
	if mark > 0 {
		if err := m.es.Compact(ctx, mark); err != nil {
			m.log.Warn("compacting etcd", "revision", mark, "err", err)
		} else {
			m.log.Info("compacted etcd", "revision", mark)
		}
	}
	if st.Err != nil {
		return mark
	}
	return st.Revision
}

func (m *maintainer) defrag(ctx context.Context) {
	done, err := m.es.Defragment(ctx, m.cfg.DefragSlack)
	if err != nil {
		m.log.Warn("defragmenting etcd", "err", err)
	}
	if len(done) > 0 {
		m.log.Info("defragmented etcd members", "members", done)
	}
}

// checkQuota alerts when the database nears its quota, and at NOSPACE
// compacts everything but the last revision and defragments at once (the
// cluster refuses writes until then).
func (m *maintainer) checkQuota(ctx context.Context) {
	st := m.es.ClusterStatus(ctx)
	if st.Err != nil && st.Reachable == 0 {
		return
	}
	if st.NoSpace {
		m.log.Error("etcd raised NOSPACE: writes are refused; compacting and defragmenting now", "db_bytes", st.DBSize, "quota_bytes", st.Quota)
		if err := m.es.Compact(ctx, st.Revision); err != nil {
			m.log.Warn("compacting etcd", "err", err)
		}
		// Every member, whatever its free pages: the file must shrink
		// under the quota before the alarm can be disarmed.
		if done, err := m.es.Defragment(ctx, 0); err != nil {
			m.log.Warn("defragmenting etcd", "err", err)
		} else {
			m.log.Info("defragmented etcd members", "members", done)
		}
		st = m.es.ClusterStatus(ctx)
	}
	firing := st.NoSpace || st.Used() >= m.cfg.QuotaWarn
	if firing == m.firing {
		return
	}
	m.firing = firing
	summary := fmt.Sprintf("etcd database %d MiB of its %d MiB quota (%.0f%%; alert at %.0f%%)",
		st.DBSize>>20, st.Quota>>20, 100*st.Used(), 100*m.cfg.QuotaWarn)
	if firing {
		m.log.Error("etcd nears its quota: "+summary+"; see README 'The etcd store' for what grows and what to do", "db_bytes", st.DBSize, "in_use_bytes", st.DBInUse)
	} else {
		m.log.Info("etcd is back under its quota alarm: " + summary)
	}
	if m.cfg.Alert != nil {
		m.cfg.Alert(ctx, firing, summary)
	}
}
