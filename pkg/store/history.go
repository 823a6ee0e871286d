package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// PutInventory stores a snapshot for the machine (ID or name) and returns its
// sequence number; the oldest snapshots beyond Options.History are dropped.
func (b *Bolt) PutInventory(ctx context.Context, machineID string, inv machine.Inventory) (uint64, error) {
	var seq uint64
	err := b.update(ctx, func(tx *bolt.Tx) error {
		id := resolveID(tx, machineID)
		if id == "" {
			return ErrNotFound
		}
		bk, err := tx.Bucket(bInventory).CreateBucketIfNotExists([]byte(id))
		if err != nil {
			return err
		}
		seq = NextSeq(bk.Sequence())
		if err := bk.SetSequence(seq); err != nil {
			return err
		}
		snap := Snapshot{Seq: seq, MachineID: id, Taken: inv.Taken, Inventory: inv}
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
func trim(bk *bolt.Bucket, seq uint64, keep int) error {
	oldest := OldestKept(seq, keep)
	c := bk.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < oldest; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("dropping old snapshot %d: %w", binary.BigEndian.Uint64(k), err)
		}
	}
	return nil
}

// Inventories returns the kept snapshots of the machine, oldest first.
func (b *Bolt) Inventories(ctx context.Context, machineID string) ([]Snapshot, error) {
	var out []Snapshot
	err := b.view(ctx, func(tx *bolt.Tx) error {
		bk, err := childBucket(tx, bInventory, machineID)
		if err != nil || bk == nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			var s Snapshot
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
func (b *Bolt) Inventory(ctx context.Context, machineID string, seq uint64) (*Snapshot, error) {
	var s *Snapshot
	err := b.view(ctx, func(tx *bolt.Tx) error {
		bk, err := childBucket(tx, bInventory, machineID)
		if err != nil {
			return err
		}
		if bk == nil {
			return ErrNotFound
		}
		var raw []byte
		if seq == 0 {
			_, raw = bk.Cursor().Last()
		} else {
			raw = bk.Get(u64(seq))
		}
		if raw == nil {
			return ErrNotFound
		}
		s = new(Snapshot)
		return json.Unmarshal(raw, s)
	})
	if err != nil {
		return nil, fmt.Errorf("reading inventory %d of machine %s: %w", seq, machineID, err)
	}
	return s, nil
}

// childBucket returns parent/<machine ID>, nil if the machine has none yet,
// or ErrNotFound if no such machine exists.
func childBucket(tx *bolt.Tx, parent []byte, idOrName string) (*bolt.Bucket, error) {
	id := resolveID(tx, idOrName)
	if id == "" {
		return nil, ErrNotFound
	}
	return tx.Bucket(parent).Bucket([]byte(id)), nil
}

// AppendEvent adds ev to its machine's log (ev.Machine: ID or name) and
// returns it with Seq, Machine (the ID) and, if zero, Time filled in. It
// returns after the commit, sharing the fsync with concurrent callers.
func (b *Bolt) AppendEvent(ctx context.Context, ev machine.Event) (machine.Event, error) {
	ev, err := NewEventRecord(ev, b.opts.Now())
	if err != nil {
		return ev, fmt.Errorf("appending event to machine %s: %w", ev.Machine, err)
	}
	var out machine.Event
	err = b.batch(ctx, func(tx *bolt.Tx) error {
		id := resolveID(tx, ev.Machine)
		if id == "" {
			return ErrNotFound
		}
		bk, err := tx.Bucket(bEvents).CreateBucketIfNotExists([]byte(id))
		if err != nil {
			return err
		}
		out = ev
		out.Machine = id
		out.Seq = NextSeq(bk.Sequence())
		if err := bk.SetSequence(out.Seq); err != nil {
			return err
		}
		return putJSON(bk, u64(out.Seq), &out)
	})
	if err != nil {
		return ev, fmt.Errorf("appending %s event to machine %s: %w", ev.Kind, ev.Machine, err)
	}
	return out, nil
}

// Events returns up to limit events (0: all) of the machine with Seq > afterSeq,
// oldest first.
func (b *Bolt) Events(ctx context.Context, machineID string, afterSeq uint64, limit int) ([]machine.Event, error) {
	var out []machine.Event
	err := b.view(ctx, func(tx *bolt.Tx) error {
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
// (Bolt only; not part of Store.)
func (b *Bolt) LastEvents(ctx context.Context, machineID string, n int) ([]machine.Event, error) {
	var out []machine.Event
	err := b.view(ctx, func(tx *bolt.Tx) error {
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
