package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// maxEventsPerTxn caps the events one group-commit round writes: each
// reads at most 4 keys (the machine by ID, by name, its record, its
// counter: 4 compares) and writes 2 (the event, the counter), so 24 stay
// under etcd's 128 compares with room for guards.
const maxEventsPerTxn = 24

// counter reads the decimal counter at key (0 when absent).
func counter(got map[string][]byte, key string) (uint64, error) {
	raw, ok := got[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter %s is %q, expected a number", key, raw)
	}
	return n, nil
}

// PutInventory stores a snapshot of the machine (ID or name) and returns its
// seq: the machine's counter and the snapshot written together with the
// snapshots below store.OldestKept deleted, in one transaction that
// compares the counter (no two snapshots get one seq) and the machine's
// create revision (it was not deleted meanwhile).
func (s *Store) PutInventory(ctx context.Context, machineID string, inv machine.Inventory) (uint64, error) {
	var seq uint64
	_, err := s.update(ctx, func(t *tx) error {
		id, _, err := t.resolve(machineID, false)
		if err != nil {
			return err
		}
		ck := s.k.invSeq(id)
		got, err := t.get(ck)
		if err != nil {
			return err
		}
		last, err := counter(got, ck)
		if err != nil {
			return err
		}
		seq = store.NextSeq(last)
		snap := store.Snapshot{Seq: seq, MachineID: id, Taken: inv.Taken, Inventory: inv}
		if snap.Taken.IsZero() {
			snap.Taken = s.opts.Now().UTC()
		}
		raw, err := json.Marshal(&snap)
		if err != nil {
			return err
		}
		t.put(s.k.inventory(id, seq), raw)
		t.put(ck, []byte(strconv.FormatUint(seq, 10)))
		if oldest := store.OldestKept(seq, s.opts.History); oldest > 1 {
			t.delRange(s.k.inventories(id), s.k.inventory(id, oldest))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storing inventory of machine %s: %w", machineID, err)
	}
	return seq, nil
}

// Inventories returns the kept snapshots of the machine, oldest first.
func (s *Store) Inventories(ctx context.Context, machineID string) ([]store.Snapshot, error) {
	var out []store.Snapshot
	err := s.view(ctx, func(t *tx) error {
		out = []store.Snapshot{}
		id, _, err := t.resolve(machineID, false)
		if err != nil {
			return err
		}
		return t.scanPrefix(s.k.inventories(id), false, func(kv *mvccpb.KeyValue) error {
			var sn store.Snapshot
			if err := json.Unmarshal(kv.Value, &sn); err != nil {
				return fmt.Errorf("decoding snapshot %s: %w", kv.Key, err)
			}
			out = append(out, sn)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading inventory history of machine %s: %w", machineID, err)
	}
	return out, nil
}

// Inventory returns one snapshot; seq 0 means the latest.
func (s *Store) Inventory(ctx context.Context, machineID string, seq uint64) (*store.Snapshot, error) {
	var sn *store.Snapshot
	err := s.view(ctx, func(t *tx) error {
		id, _, err := t.resolve(machineID, false)
		if err != nil {
			return err
		}
		var raw []byte
		if seq == 0 {
			raw, err = t.last(s.k.inventories(id))
		} else {
			k := s.k.inventory(id, seq)
			var got map[string][]byte
			got, err = t.get(k)
			raw = got[k]
		}
		if err != nil {
			return err
		}
		if raw == nil {
			return store.ErrNotFound
		}
		sn = new(store.Snapshot)
		return json.Unmarshal(raw, sn)
	})
	if err != nil {
		return nil, fmt.Errorf("reading inventory %d of machine %s: %w", seq, machineID, err)
	}
	return sn, nil
}

// last is the value of the greatest key under prefix at t's revision; nil
// when there is none.
func (t *tx) last(prefix string) ([]byte, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(prefixEnd(prefix)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1)}
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.s.cli.Get(t.ctx, prefix, opts...)
	if errors.Is(err, rpctypes.ErrCompacted) || transient(err) {
		return nil, fmt.Errorf("reading the last key under %s at revision %d: %v: %w", prefix, t.rev, err, errRetry)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the last key under %s: %w", prefix, err)
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// AppendEvent adds ev to its machine's log and returns it with Seq,
// Machine (the ID) and, if zero, Time set. Concurrent appends share
// transactions (a group commit): each round reads the counters of the
// machines it touches, numbers its events in queue order and writes them
// and the counters in one transaction that compares the counters, so
// seqs have no gaps and no repeats whatever the concurrency, across
// instances too.
func (s *Store) AppendEvent(ctx context.Context, ev machine.Event) (machine.Event, error) {
	ev, err := store.NewEventRecord(ev, s.opts.Now())
	if err != nil {
		return ev, fmt.Errorf("appending event to machine %s: %w", ev.Machine, err)
	}
	var out machine.Event
	if len(store.Fences(ctx)) > 0 {
		out, err = s.appendFenced(ctx, ev)
	} else {
		out, err = s.events.do(ctx, ev)
	}
	if err != nil {
		return ev, fmt.Errorf("appending %s event to machine %s: %w", ev.Kind, ev.Machine, err)
	}
	return out, nil
}

// appendFenced appends ev in a transaction of its own: a round of the
// group commit carries the calls of many contexts, and one caller's fence
// must not fail (or pass) another's event.
func (s *Store) appendFenced(ctx context.Context, ev machine.Event) (machine.Event, error) {
	var out machine.Event
	_, err := s.update(ctx, func(t *tx) error {
		id, _, err := t.resolve(ev.Machine, false)
		if err != nil {
			return err
		}
		evs, err := t.appendEvents(id, []machine.Event{ev})
		if err == nil {
			out = evs[0]
		}
		return err
	})
	return out, err
}

// applyEvents adds a round of events to t (see group.apply).
func (s *Store) applyEvents(t *tx, calls []*call[machine.Event, machine.Event]) error {
	if err := t.prefetchMachines(calls); err != nil {
		return err
	}
	last := map[string]uint64{}
	for i, c := range calls {
		id, _, err := t.resolve(c.in.Machine, false)
		if isNotFound(err) {
			c.err = err
			continue
		}
		if err != nil {
			return err
		}
		ck := s.k.evSeq(id)
		got, err := t.get(ck)
		if err != nil {
			return err
		}
		seq, ok := last[id]
		if !ok {
			if seq, err = counter(got, ck); err != nil {
				return err
			}
		}
		ev := c.in
		ev.Machine, ev.Seq = id, store.NextSeq(seq)
		raw, err := json.Marshal(&ev)
		if err != nil {
			c.err = err
			continue
		}
		if i > 0 && !t.fits(2, 0, len(raw)+64) {
			for _, d := range calls[i:] {
				d.deferred = true
			}
			break
		}
		t.put(s.k.event(id, ev.Seq), raw)
		t.put(ck, []byte(strconv.FormatUint(ev.Seq, 10)))
		last[id], c.out = ev.Seq, ev
	}
	for id, seq := range last {
		t.trimEvents(id, seq)
	}
	return nil
}

// prefetchMachines reads, in a few requests for the whole round, the keys
// resolve and the counters will ask for one call at a time.
func (t *tx) prefetchMachines(calls []*call[machine.Event, machine.Event]) error {
	var refs []string
	for _, c := range calls {
		refs = append(refs, t.s.k.machine(c.in.Machine))
	}
	got, err := t.getSame(refs...)
	if err != nil {
		return err
	}
	var names, ids []string
	for _, c := range calls {
		if _, ok := got[t.s.k.machine(c.in.Machine)]; ok {
			ids = append(ids, t.s.k.evSeq(c.in.Machine))
		} else if c.in.Machine != "" {
			names = append(names, t.s.k.name(c.in.Machine))
		}
	}
	byName, err := t.get(names...)
	if err != nil {
		return err
	}
	var recs []string
	for _, id := range byName {
		recs = append(recs, t.s.k.machine(string(id)))
		ids = append(ids, t.s.k.evSeq(string(id)))
	}
	if _, err := t.getSame(recs...); err != nil {
		return err
	}
	_, err = t.get(ids...)
	return err
}

// Events returns up to limit events (<= 0: all) of the machine with Seq >
// afterSeq, oldest first.
func (s *Store) Events(ctx context.Context, machineID string, afterSeq uint64, limit int) ([]machine.Event, error) {
	var out []machine.Event
	err := s.view(ctx, func(t *tx) error {
		out = []machine.Event{}
		id, _, err := t.resolve(machineID, false)
		if err != nil {
			return err
		}
		errEnough := fmt.Errorf("enough")
		err = t.scan(s.k.event(id, afterSeq+1), prefixEnd(s.k.events(id)), false, func(kv *mvccpb.KeyValue) error {
			if limit > 0 && len(out) >= limit {
				return errEnough
			}
			var ev machine.Event
			if err := json.Unmarshal(kv.Value, &ev); err != nil {
				return fmt.Errorf("decoding event %s: %w", kv.Key, err)
			}
			out = append(out, ev)
			return nil
		})
		if err == errEnough {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading events of machine %s: %w", machineID, err)
	}
	return out, nil
}
