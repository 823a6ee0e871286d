package telemetry

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
)

// Several ingot instances sharing one store (etcd, pkg/scaleout) split the
// polling: each polls the machines Config.Mine gives it (rendezvous
// hashing on the machine ID over the live instances) and stores their
// state and aggregates as one instance does. The others' machines are
// "remote" here: not polled, not judged, not stored; their last sample,
// alerts and buckets of today and yesterday are read back from the store
// at each flush (syncRemote), so /metrics, the alert list and the power
// report of any instance show the whole fleet, at most two flush
// intervals old for the machines it does not poll. An alert is judged and
// delivered by the poller only: no transition is sent twice. When the
// instances change, refresh moves machines between local and remote: the
// instance that gives one up stores its state at once (handOver), the one
// that takes it starts from what was stored.

// mine reports whether this instance polls machine id.
func (s *Service) mine(id string) bool { return s.cfg.Mine == nil || s.cfg.Mine(id) }

// reassign makes n local or remote as Mine says now, and reports whether
// this instance just gave it up. s.mu is held.
func (s *Service) reassign(n *node, now time.Time) bool {
	mine := s.mine(n.m.ID)
	switch {
	case n.remote && mine:
		n.remote = false
		n.next = now.Add(offset(n.m.ID, s.cfg.Interval))
		s.cfg.Logger.Info("telemetry: polling a machine another instance polled", "machine", n.m.Name)
	case !n.remote && !mine:
		n.remote = true
		return true
	}
	return false
}

// handOver stores the state and today's buckets of machines this instance
// stopped polling, for the instance that polls them now.
func (s *Service) handOver(ctx context.Context, ids []string) error {
	if len(ids) == 0 || s.cfg.Store == nil {
		return nil
	}
	day := s.cfg.Now().UTC().Truncate(24 * time.Hour)
	var days []store.PowerDay
	nodes, err := s.nodeRecords(func(id string, _ *node) bool { return slices.Contains(ids, id) })
	if err != nil {
		return err
	}
	for _, nt := range nodes {
		if bs := s.agg.Window(nt.Machine, day, day.Add(24*time.Hour)); len(bs) > 0 {
			days = append(days, store.PowerDay{Machine: nt.Machine, Day: day.Format(time.DateOnly), Buckets: encodeBuckets(bs)})
		}
	}
	s.cfg.Logger.Info("telemetry: handing machines over to the instances that poll them now", "machines", len(nodes))
	if err := s.cfg.Store.PutTelemetry(ctx, nodes, days); err != nil {
		return fmt.Errorf("handing %d machines over: %w", len(nodes), err)
	}
	return nil
}

// syncRemote reads what the other instances stored of the machines they
// poll: each one's last sample and alerts, and its buckets of yesterday
// and today (replacing what this instance held of those days).
func (s *Service) syncRemote(ctx context.Context) error {
	if s.cfg.Mine == nil || s.cfg.Store == nil {
		return nil
	}
	recs, err := s.cfg.Store.ListNodeTelemetry(ctx)
	if err != nil {
		return err
	}
	var remote []string
	s.mu.Lock()
	for _, r := range recs {
		if n, ok := s.nodes[r.Machine]; ok && n.remote {
			if err := n.applyRecord(r.State); err != nil {
				s.cfg.Logger.Warn("telemetry: another instance's state of a machine is damaged", "machine", r.Machine, "err", err)
				continue
			}
			remote = append(remote, r.Machine)
		}
	}
	s.mu.Unlock()
	from := s.cfg.Now().UTC().AddDate(0, 0, -1).Truncate(24 * time.Hour)
	for _, id := range remote {
		stored, err := s.cfg.Store.PowerDays(ctx, id, from.Format(time.DateOnly))
		if err != nil {
			return err
		}
		var bs []Bucket
		for _, d := range stored {
			b, err := decodeBuckets(d.Buckets)
			if err != nil {
				s.cfg.Logger.Warn("telemetry: another instance's power day is damaged; skipped", "machine", id, "day", d.Day, "err", err)
				continue
			}
			bs = append(bs, b...)
		}
		s.agg.replace(id, from, bs)
	}
	return nil
}

// replace puts bs in place of a machine's buckets from from on.
func (a *Aggregator) replace(machineID string, from time.Time, bs []Bucket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cut := from.Unix()
	keep := a.by[machineID][:0:0]
	for _, b := range a.by[machineID] {
		if b.start < cut {
			keep = append(keep, b)
		}
	}
	keep = append(keep, bs...)
	slicesSortBuckets(keep)
	a.by[machineID] = keep
}
