package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// PutInventory stores a snapshot for the machine (ID or name) and returns its
// sequence number; the oldest snapshots beyond Options.History are dropped.
func (b *Store) PutInventory(ctx context.Context, machineID string, inv machine.Inventory) (uint64, error) {
	var seq uint64
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		id := resolveID(tx, machineID)
		if id == "" {
			return store.ErrNotFound
		}
		bk, err := tx.Bucket(bInventory).CreateBucketIfNotExists([]byte(id))
		if err != nil {
			return err
		}
		seq = store.NextSeq(bk.Sequence())
		if err := bk.SetSequence(seq); err != nil {
			return err
		}
		snap := store.Snapshot{Seq: seq, MachineID: id, Taken: inv.Taken, Inventory: inv}
		if snap.Taken.IsZero() {
			snap.Taken = b.opts.Now().UTC()
		}
		if err := putJSON(bk, u64(seq), &snap); err != nil {
			return err
		}
		return trim(bk, seq, b.opts.History)
	})
	if err != nil {
		return 0, fmt.Errorf("storing inventory of machine %s: %w", machineID, err)
	}
	return seq, nil
}

// trim deletes the snapshots below OldestKept (newest is seq).
// (Bucket.Stats does not count keys written in the open transaction.)
func trim(bk *bbolt.Bucket, seq uint64, keep int) error {
	oldest := store.OldestKept(seq, keep)
	c := bk.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < oldest; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("dropping old snapshot %d: %w", binary.BigEndian.Uint64(k), err)
		}
	}
	return nil
}

// Inventories returns the kept snapshots of the machine, oldest first.
func (b *Store) Inventories(ctx context.Context, machineID string) ([]store.Snapshot, error) {
	var out []store.Snapshot
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		bk, err := childBucket(tx, bInventory, machineID)
		if err != nil || bk == nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			var s store.Snapshot
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("decoding snapshot %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, s)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading inventory history of machine %s: %w", machineID, err)
	}
	return out, nil
}

// Inventory returns one snapshot; seq 0 means the latest.
func (b *Store) Inventory(ctx context.Context, machineID string, seq uint64) (*store.Snapshot, error) {
	var s *store.Snapshot
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		bk, err := childBucket(tx, bInventory, machineID)
		if err != nil {
			return err
		}
		if bk == nil {
			return store.ErrNotFound
		}
		var raw []byte
		if seq == 0 {
			_, raw = bk.Cursor().Last()
		} else {
			raw = bk.Get(u64(seq))
		}
		if raw == nil {
			return store.ErrNotFound
		}
		s = new(store.Snapshot)
		return json.Unmarshal(raw, s)
	})
	if err != nil {
		return nil, fmt.Errorf("reading inventory %d of machine %s: %w", seq, machineID, err)
	}
	return s, nil
}

// childBucket returns parent/<machine ID>, nil if the machine has none yet,
// or ErrNotFound if no such machine exists.
func childBucket(tx *bbolt.Tx, parent []byte, idOrName string) (*bbolt.Bucket, error) {
	id := resolveID(tx, idOrName)
	if id == "" {
		return nil, store.ErrNotFound
	}
	return tx.Bucket(parent).Bucket([]byte(id)), nil
}

// AppendEvent adds ev to its machine's log (ev.Machine: ID or name) and
// returns it with Seq, Machine (the ID) and, if zero, Time filled in. It
// returns after the commit, sharing the fsync with concurrent callers.
func (b *Store) AppendEvent(ctx context.Context, ev machine.Event) (machine.Event, error) {
	var out []machine.Event
	err := b.batch(ctx, func(tx *bbolt.Tx) error {
		id := resolveID(tx, ev.Machine)
		if id == "" {
			return store.ErrNotFound
		}
		var err error
		out, err = b.appendEvents(tx, id, []machine.Event{ev})
		return err
	})
	if err != nil {
		return ev, fmt.Errorf("appending %s event to machine %s: %w", ev.Kind, ev.Machine, err)
	}
	return out[0], nil
}

// appendEvents adds evs to machine id's log inside tx, checked and stamped
// by NewEventRecord, and returns them as stored.
func (b *Store) appendEvents(tx *bbolt.Tx, id string, evs []machine.Event) ([]machine.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	bk, err := tx.Bucket(bEvents).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return nil, err
	}
	out := make([]machine.Event, 0, len(evs))
	for _, ev := range evs {
		ev.Machine = id
		ev, err := store.NewEventRecord(ev, b.opts.Now())
		if err != nil {
			return nil, fmt.Errorf("event %d of %d: %w", len(out)+1, len(evs), err)
		}
		ev.Seq = store.NextSeq(bk.Sequence())
		if err := bk.SetSequence(ev.Seq); err != nil {
			return nil, err
		}
		if err := putJSON(bk, u64(ev.Seq), &ev); err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, trimEvents(bk, b.opts.MaxEvents)
}

// trimEvents drops a machine's oldest events until at most max are kept
// (store.Options.MaxEvents), in the caller's write. Its keys are its seqs,
// contiguous from the oldest kept to the bucket's sequence.
func trimEvents(bk *bbolt.Bucket, max int) error {
	c := bk.Cursor()
	k, _ := c.First()
	if k == nil || len(k) != 8 {
		return nil
	}
	kept := bk.Sequence() - binary.BigEndian.Uint64(k) + 1
	for ; kept > uint64(max) && k != nil; kept-- {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("dropping event %d: %w", binary.BigEndian.Uint64(k), err)
		}
		k, _ = c.First()
	}
	return nil
}

// Events returns up to limit events (0: all) of the machine with Seq > afterSeq,
// oldest first.
func (b *Store) Events(ctx context.Context, machineID string, afterSeq uint64, limit int) ([]machine.Event, error) {
	var out []machine.Event
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		bk, err := childBucket(tx, bEvents, machineID)
		if err != nil || bk == nil {
			return err
		}
		c := bk.Cursor()
		for k, v := c.Seek(u64(afterSeq + 1)); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			var ev machine.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("decoding event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading events of machine %s: %w", machineID, err)
	}
	return out, nil
}

// LastEvents returns the newest n events of the machine, oldest first.
// (Store only; not part of Store.)
func (b *Store) LastEvents(ctx context.Context, machineID string, n int) ([]machine.Event, error) {
	var out []machine.Event
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		bk, err := childBucket(tx, bEvents, machineID)
		if err != nil || bk == nil {
			return err
		}
		c := bk.Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			var ev machine.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("decoding event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, ev)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading events of machine %s: %w", machineID, err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
