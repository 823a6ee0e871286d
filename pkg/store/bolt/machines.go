package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// CreateMachine stores a new machine (see MachineStore and
// NewMachineRecord): an empty ID is generated ("m-" + 10 hex characters),
// an empty State becomes enrolled, MACs are normalized, and Created/Updated
// are stamped; m is updated in place. A name that is taken gives ErrExists;
// a MAC, serial or BMC endpoint owned by another machine gives ErrConflict
// naming it. The machine gets its first revision, and its first events
// (evs) in the same transaction.
func (b *Store) CreateMachine(ctx context.Context, m *machine.Machine, evs ...machine.Event) error {
	c, err := store.NewMachineRecord(m, b.opts.Now())
	if err != nil {
		return fmt.Errorf("creating machine: %w", err)
	}
	err = b.batch(ctx, func(tx *bbolt.Tx) error {
		ms := tx.Bucket(bMachines)
		if ms.Get([]byte(c.ID)) != nil {
			return fmt.Errorf("machine ID %s: %w", c.ID, store.ErrExists)
		}
		if err := checkIndexes(tx, &c); err != nil {
			return err
		}
		if err := putIndexes(tx, &c); err != nil {
			return err
		}
		if _, err := bumpMachineRev(tx, c.ID); err != nil {
			return err
		}
		if err := putJSON(ms, []byte(c.ID), &c); err != nil {
			return err
		}
		_, err := b.appendEvents(tx, c.ID, evs)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating machine %s: %w", c.Name, err)
	}
	*m = c
	return nil
}

// GetMachine returns the machine with this ID or name.
func (b *Store) GetMachine(ctx context.Context, idOrName string) (*machine.Machine, error) {
	var m *machine.Machine
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		m, err = getMachine(tx, idOrName)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading machine %s: %w", idOrName, err)
	}
	return m, nil
}

// MachineByMAC returns the machine owning mac, in any notation net.ParseMAC accepts.
func (b *Store) MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error) {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("looking up machine by MAC: %w", err)
	}
	return b.machineByIndex(ctx, bIdxMAC, "MAC", norm)
}

// MachineBySerial returns the machine with this system serial.
func (b *Store) MachineBySerial(ctx context.Context, serial string) (*machine.Machine, error) {
	return b.machineByIndex(ctx, bIdxSerial, "serial", store.NormalizeSerial(serial))
}

// MachineByBMC returns the machine whose BMC endpoint is endpoint (see NormalizeBMC).
func (b *Store) MachineByBMC(ctx context.Context, endpoint string) (*machine.Machine, error) {
	return b.machineByIndex(ctx, bIdxBMC, "BMC endpoint", store.NormalizeBMC(endpoint))
}

func (b *Store) machineByIndex(ctx context.Context, idx []byte, what, key string) (*machine.Machine, error) {
	var m *machine.Machine
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		id := tx.Bucket(idx).Get([]byte(key))
		if id == nil || key == "" {
			return store.ErrNotFound
		}
		var err error
		m, err = getMachine(tx, string(id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("looking up machine by %s %q: %w", what, key, err)
	}
	return m, nil
}

// ListMachines returns the machines matching f, sorted by name.
func (b *Store) ListMachines(ctx context.Context, f store.MachineFilter) ([]machine.Machine, error) {
	var out []machine.Machine
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		ms := tx.Bucket(bMachines)
		c := tx.Bucket(bIdxName).Cursor()
		k, id := c.First()
		if f.After != "" {
			if k, id = c.Seek([]byte(f.After)); k != nil && string(k) == f.After {
				k, id = c.Next()
			}
		}
		for ; k != nil && (f.Limit <= 0 || len(out) < f.Limit); k, id = c.Next() {
			var m machine.Machine
			if ok, err := getJSON(ms, id, &m); err != nil || !ok {
				return fmt.Errorf("machine %q of name %q: %w", id, k, errors.Join(err, errIndexDangles(ok)))
			}
			if (f.Recipe == "" || m.Recipe == f.Recipe) && (f.State == "" || m.State == f.State) &&
				(f.Rack == "" || m.Rack == f.Rack) {
				out = append(out, m)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	return out, nil
}

// errIndexDangles is the error of an index entry whose record is gone.
func errIndexDangles(found bool) error {
	if found {
		return nil
	}
	return fmt.Errorf("the name index names a machine that is not there: %w", store.ErrDamaged)
}

// ChangeMachine runs c.Edit on a copy of the machine and stores the result
// and the events Edit returns in one transaction (group-committed with
// concurrent writers), moving its index entries and bumping its revision.
// Edit must not change the ID.
func (b *Store) ChangeMachine(ctx context.Context, idOrName string, c store.Change) (*store.Changed, error) {
	var out store.Changed
	err := b.batch(ctx, func(tx *bbolt.Tx) error {
		old, err := getMachine(tx, idOrName)
		if err != nil {
			return err
		}
		if c.Rev != 0 {
			what := fmt.Sprintf("machine %s (%s)", old.Name, old.ID)
			if err := store.CheckRevision(what, machineRev(tx, old.ID), c.Rev); err != nil {
				return err
			}
		}
		var evs []machine.Event
		m, err := store.UpdatedMachineRecord(old, func(m *machine.Machine) (err error) {
			evs, err = c.Edit(m)
			return err
		}, b.opts.Now())
		if err != nil {
			return err
		}
		if err := b.putChanged(tx, old, &m); err != nil {
			return err
		}
		if out.Rev, err = bumpMachineRev(tx, m.ID); err != nil {
			return err
		}
		out.Machine = m
		out.Events, err = b.appendEvents(tx, m.ID, evs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("changing machine %s: %w", idOrName, err)
	}
	return &out, nil
}

// putChanged stores m in place of old, its index entries moved.
func (b *Store) putChanged(tx *bbolt.Tx, old, m *machine.Machine) error {
	if err := deleteIndexes(tx, old); err != nil {
		return err
	}
	if err := checkIndexes(tx, m); err != nil {
		return err
	}
	if err := putIndexes(tx, m); err != nil {
		return err
	}
	return putJSON(tx.Bucket(bMachines), []byte(m.ID), m)
}

// GetMachineRev returns the machine with this ID or name and its revision,
// read in one transaction.
func (b *Store) GetMachineRev(ctx context.Context, idOrName string) (*machine.Machine, uint64, error) {
	var (
		m   *machine.Machine
		rev uint64
	)
	err := b.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		if m, err = getMachine(tx, idOrName); err != nil {
			return err
		}
		rev = machineRev(tx, m.ID)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading machine %s: %w", idOrName, err)
	}
	return m, rev, nil
}

// MachineRevision returns the revision of the machine with this ID or name.
func (b *Store) MachineRevision(ctx context.Context, idOrName string) (uint64, error) {
	_, rev, err := b.GetMachineRev(ctx, idOrName)
	return rev, err
}

// machineRev is the stored revision of machine id; 0 if it has none.
func machineRev(tx *bbolt.Tx, id string) uint64 {
	raw := tx.Bucket(bMachRev).Get([]byte(id))
	if len(raw) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(raw)
}

// bumpMachineRev gives machine id the next machine revision (the bucket's
// sequence is the last one handed out) and returns it.
func bumpMachineRev(tx *bbolt.Tx, id string) (uint64, error) {
	bk := tx.Bucket(bMachRev)
	rev := store.NextRevision(bk.Sequence())
	if err := bk.SetSequence(rev); err != nil {
		return 0, err
	}
	if err := bk.Put([]byte(id), u64(rev)); err != nil {
		return 0, fmt.Errorf("storing the revision of machine %s: %w", id, err)
	}
	return rev, nil
}

// DeleteMachine removes the machine, its index entries, inventory and events.
func (b *Store) DeleteMachine(ctx context.Context, idOrName string) error {
	err := b.update(ctx, func(tx *bbolt.Tx) error {
		m, err := getMachine(tx, idOrName)
		if err != nil {
			return err
		}
		if err := deleteIndexes(tx, m); err != nil {
			return err
		}
		for _, parent := range [][]byte{bInventory, bEvents} {
			err := tx.Bucket(parent).DeleteBucket([]byte(m.ID))
			if err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return fmt.Errorf("deleting %s/%s: %w", parent, m.ID, err)
			}
		}
		if err := tx.Bucket(bMachRev).Delete([]byte(m.ID)); err != nil {
			return err
		}
		return tx.Bucket(bMachines).Delete([]byte(m.ID))
	})
	if err != nil {
		return fmt.Errorf("deleting machine %s: %w", idOrName, err)
	}
	return nil
}

// getMachine reads by ID, then by name; the result is a decoded copy.
func getMachine(tx *bbolt.Tx, idOrName string) (*machine.Machine, error) {
	id := resolveID(tx, idOrName)
	if id == "" {
		return nil, store.ErrNotFound
	}
	var m machine.Machine
	ok, err := getJSON(tx.Bucket(bMachines), []byte(id), &m)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("index points to missing machine %s: %w", id, store.ErrNotFound)
	}
	return &m, nil
}

// resolveID returns the ID of the machine with this ID or name, or "".
func resolveID(tx *bbolt.Tx, idOrName string) string {
	if idOrName == "" {
		return ""
	}
	if tx.Bucket(bMachines).Get([]byte(idOrName)) != nil {
		return idOrName
	}
	if id := tx.Bucket(bIdxName).Get([]byte(idOrName)); id != nil {
		return string(id)
	}
	return ""
}

// keyBuckets is the index bucket of each kind of unique key.
var keyBuckets = map[store.KeyKind][]byte{store.KeyName: bIdxName, store.KeyMAC: bIdxMAC, store.KeySerial: bIdxSerial, store.KeyBMC: bIdxBMC}

// checkIndexes fails if another machine owns one of m's unique keys.
func checkIndexes(tx *bbolt.Tx, m *machine.Machine) error {
	for _, k := range store.MachineKeys(m) {
		other := tx.Bucket(keyBuckets[k.Kind]).Get([]byte(k.Value))
		if other == nil || string(other) == m.ID {
			continue
		}
		owner := string(other)
		if o, err := getMachine(tx, owner); err == nil {
			owner = fmt.Sprintf("%s (%s)", o.Name, o.ID)
		}
		return store.KeyTaken(k, owner)
	}
	return nil
}

func putIndexes(tx *bbolt.Tx, m *machine.Machine) error {
	for _, k := range store.MachineKeys(m) {
		if err := tx.Bucket(keyBuckets[k.Kind]).Put([]byte(k.Value), []byte(m.ID)); err != nil {
			return fmt.Errorf("indexing %s %s: %w", k.Kind, k.Value, err)
		}
	}
	return nil
}

func deleteIndexes(tx *bbolt.Tx, m *machine.Machine) error {
	for _, k := range store.MachineKeys(m) {
		bk := tx.Bucket(keyBuckets[k.Kind])
		if string(bk.Get([]byte(k.Value))) != m.ID {
			continue // owned by someone else; never remove another's entry
		}
		if err := bk.Delete([]byte(k.Value)); err != nil {
			return fmt.Errorf("unindexing %s %s: %w", k.Kind, k.Value, err)
		}
	}
	return nil
}
