package telemetry

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
)

// What survives a restart (Config.Store): each machine's last sample, its
// alerts (a firing alert stays firing, so it is not delivered again) and
// its rule memory, one record a machine; and its 5-minute aggregates, one
// record a machine and day (288 buckets x 38 bytes = 11 KiB: today's is
// rewritten at each flush, a finished day's once), and its daily
// summaries (summary.go: 42 bytes a day, kept a year). For 500 machines
// that is 8 day records a machine (the 7-day window reaches into an eighth
// day), 44 MiB of values, plus 7.5 MiB of summaries; BenchmarkPoll500Store
// measured the bbolt file at 83 MiB once the window held, growing 9.6 MiB
// a day over the first week. On etcd a flush of 500 machines must be split
// into transactions of at most 128 operations (etcd's default).

const bucketBytes = 8 + 3*2 + 6*4

// encodeBuckets writes buckets in a fixed little-endian layout.
func encodeBuckets(bs []Bucket) []byte {
	out := make([]byte, 0, len(bs)*bucketBytes)
	for _, b := range bs {
		out = binary.LittleEndian.AppendUint64(out, uint64(b.start))
		for _, v := range []uint16{b.n, b.nw, b.npw} {
			out = binary.LittleEndian.AppendUint16(out, v)
		}
		for _, f := range []float32{b.sumW, b.maxW, b.maxInlet, b.maxGPU, b.psuIn, b.psuOut} {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
		}
	}
	return out
}

// decodeBuckets reads encodeBuckets' layout; a record of another length
// is damaged and named by the caller.
func decodeBuckets(b []byte) ([]Bucket, error) {
	if len(b)%bucketBytes != 0 {
		return nil, fmt.Errorf("%d bytes: not a whole number of %d-byte buckets", len(b), bucketBytes)
	}
	out := make([]Bucket, 0, len(b)/bucketBytes)
	for i := 0; i < len(b); i += bucketBytes {
		r := b[i:]
		k := Bucket{start: int64(binary.LittleEndian.Uint64(r)), n: binary.LittleEndian.Uint16(r[8:]),
			nw: binary.LittleEndian.Uint16(r[10:]), npw: binary.LittleEndian.Uint16(r[12:])}
		f := func(j int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(r[14+4*j:])) }
		k.sumW, k.maxW, k.maxInlet, k.maxGPU, k.psuIn, k.psuOut = f(0), f(1), f(2), f(3), f(4), f(5)
		out = append(out, k)
	}
	return out, nil
}

// nodeRecord is a machine's state as stored.
type nodeRecord struct {
	Last      Sample           `json:"last"`
	Alerts    map[string]Alert `json:"alerts,omitempty"`
	CorrBase  int64            `json:"corr_base,omitempty"`
	CorrSince time.Time        `json:"corr_since,omitzero"`
}

// load brings back what the store kept (Run calls it once at start).
func (s *Service) load(ctx context.Context) error {
	st := s.cfg.Store
	if st == nil {
		return nil
	}
	recs, err := st.ListNodeTelemetry(ctx)
	if err != nil {
		return err
	}
	from := s.cfg.Now().Add(-Retention).UTC().Format(time.DateOnly)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		n := &node{interval: s.cfg.Interval}
		n.m.ID = r.Machine
		if err := n.applyRecord(r.State); err != nil {
			s.cfg.Logger.Warn("telemetry: a machine's stored state is damaged; starting it afresh", "machine", r.Machine, "err", err)
			continue
		}
		s.restored[r.Machine] = n
		days, err := st.PowerDays(ctx, r.Machine, from)
		if err != nil {
			return err
		}
		for _, d := range days {
			bs, err := decodeBuckets(d.Buckets)
			if err != nil {
				s.cfg.Logger.Warn("telemetry: a stored power day is damaged; skipped", "machine", r.Machine, "day", d.Day, "err", err)
				continue
			}
			s.agg.restore(r.Machine, bs)
		}
		stored, err := st.PowerSummaries(ctx, r.Machine, s.cfg.Now().Add(-SummaryRetention).UTC().Format(time.DateOnly))
		if err != nil {
			return err
		}
		var ss []Summary
		for _, d := range stored {
			sm, err := decodeSummary(d.Buckets)
			if err != nil {
				s.cfg.Logger.Warn("telemetry: a stored daily power summary is damaged; skipped", "machine", r.Machine, "day", d.Day, "err", err)
				continue
			}
			ss = append(ss, sm)
		}
		s.agg.restoreSummaries(r.Machine, ss)
	}
	return nil
}

// flush summarizes the days that ended, writes every machine's state, the
// aggregates of today and yesterday and the new summaries, and drops days
// older than Retention and summaries older than SummaryRetention.
func (s *Service) flush(ctx context.Context) error {
	now := s.cfg.Now().UTC()
	sums := s.agg.summarize(now)
	st := s.cfg.Store
	if st == nil {
		return nil
	}
	var days []store.PowerDay
	nodes, err := s.nodeRecords(func(_ string, n *node) bool { return !n.remote }) // a remote one's poller stores it
	if err != nil {
		return err
	}
	// Today's record every flush; yesterday's once more after midnight
	// (its last buckets), then never again: it no longer changes.
	yesterday := now.AddDate(0, 0, -1).Truncate(24 * time.Hour).Format(time.DateOnly)
	var closed []string
	for _, nt := range nodes {
		for _, d := range []time.Time{now.AddDate(0, 0, -1), now} {
			day := d.Truncate(24 * time.Hour)
			name := day.Format(time.DateOnly)
			if name == yesterday && s.closedDay[nt.Machine] == yesterday {
				continue
			}
			bs := s.agg.Window(nt.Machine, day, day.Add(24*time.Hour))
			if len(bs) > 0 {
				days = append(days, store.PowerDay{Machine: nt.Machine, Day: name, Buckets: encodeBuckets(bs)})
			}
			if name == yesterday {
				closed = append(closed, nt.Machine)
			}
		}
	}
	if err := st.PutTelemetry(ctx, nodes, days); err != nil {
		return err
	}
	for _, id := range closed {
		s.closedDay[id] = yesterday
	}
	if _, err := st.DeletePowerDaysBefore(ctx, now.Add(-Retention).Format(time.DateOnly)); err != nil {
		return err
	}
	var put []store.PowerDay
	for id, ss := range sums {
		if !s.mine(id) {
			continue // its poller stores them
		}
		for _, sm := range ss {
			put = append(put, store.PowerDay{Machine: id, Day: sm.Day().Format(time.DateOnly), Buckets: encodeSummary(sm)})
		}
	}
	if len(put) > 0 {
		if err := st.PutPowerSummaries(ctx, put); err != nil {
			return err
		}
	}
	_, err = st.DeletePowerSummariesBefore(ctx, now.Add(-SummaryRetention).Format(time.DateOnly))
	return err
}

// nodeRecords is the stored state of the nodes keep selects.
func (s *Service) nodeRecords(keep func(id string, n *node) bool) ([]store.NodeTelemetry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.NodeTelemetry
	for id, n := range s.nodes {
		if !keep(id, n) {
			continue
		}
		b, err := n.record()
		if err != nil {
			return nil, err
		}
		out = append(out, store.NodeTelemetry{Machine: id, State: b})
	}
	return out, nil
}

// record is n's state as stored. s.mu is held.
func (n *node) record() ([]byte, error) {
	nr := nodeRecord{Last: n.last, Alerts: map[string]Alert{}, CorrBase: n.state.mem.corrBase, CorrSince: n.state.mem.corrSince}
	for k, a := range n.state.alerts {
		nr.Alerts[k] = *a
	}
	return json.Marshal(nr)
}

// applyRecord sets n's last sample, alerts and rule memory from a stored
// record. s.mu is held (or n is not shared yet).
func (n *node) applyRecord(raw []byte) error {
	var nr nodeRecord
	if err := json.Unmarshal(raw, &nr); err != nil {
		return err
	}
	n.last = nr.Last
	n.state.alerts = map[string]*Alert{}
	for k, a := range nr.Alerts {
		n.state.alerts[k] = &a
	}
	n.state.mem = memory{corrBase: nr.CorrBase, corrSince: nr.CorrSince}
	return nil
}

// restore puts stored buckets back (at start, before any sample).
func (a *Aggregator) restore(machineID string, bs []Bucket) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := append(a.by[machineID], bs...)
	slicesSortBuckets(cur)
	a.by[machineID] = cur
}
