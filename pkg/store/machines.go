package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// CreateMachine stores a new machine (see MachineStore and
// NewMachineRecord): an empty ID is generated ("m-" + 10 hex characters),
// an empty State becomes enrolled, MACs are normalized, and Created/Updated
// are stamped; m is updated in place. A name that is taken gives ErrExists;
// a MAC, serial or BMC endpoint owned by another machine gives ErrConflict
// naming it. The machine gets its first revision.
func (b *Bolt) CreateMachine(ctx context.Context, m *machine.Machine) error {
	c, err := NewMachineRecord(m, b.opts.Now())
	if err != nil {
		return fmt.Errorf("creating machine: %w", err)
	}
	err = b.update(ctx, func(tx *bolt.Tx) error {
		ms := tx.Bucket(bMachines)
		if ms.Get([]byte(c.ID)) != nil {
			return fmt.Errorf("machine ID %s: %w", c.ID, ErrExists)
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
		return putJSON(ms, []byte(c.ID), &c)
	})
	if err != nil {
		return fmt.Errorf("creating machine %s: %w", c.Name, err)
	}
	*m = c
	return nil
}

// GetMachine returns the machine with this ID or name.
func (b *Bolt) GetMachine(ctx context.Context, idOrName string) (*machine.Machine, error) {
	var m *machine.Machine
	err := b.view(ctx, func(tx *bolt.Tx) error {
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
func (b *Bolt) MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error) {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("looking up machine by MAC: %w", err)
	}
	return b.machineByIndex(ctx, bIdxMAC, "MAC", norm)
}

// MachineBySerial returns the machine with this system serial.
func (b *Bolt) MachineBySerial(ctx context.Context, serial string) (*machine.Machine, error) {
	return b.machineByIndex(ctx, bIdxSerial, "serial", NormalizeSerial(serial))
}

// MachineByBMC returns the machine whose BMC endpoint is endpoint (see NormalizeBMC).
func (b *Bolt) MachineByBMC(ctx context.Context, endpoint string) (*machine.Machine, error) {
	return b.machineByIndex(ctx, bIdxBMC, "BMC endpoint", NormalizeBMC(endpoint))
}

func (b *Bolt) machineByIndex(ctx context.Context, idx []byte, what, key string) (*machine.Machine, error) {
	var m *machine.Machine
	err := b.view(ctx, func(tx *bolt.Tx) error {
		id := tx.Bucket(idx).Get([]byte(key))
		if id == nil || key == "" {
			return ErrNotFound
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
func (b *Bolt) ListMachines(ctx context.Context, f MachineFilter) ([]machine.Machine, error) {
	var out []machine.Machine
	err := b.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bMachines).ForEach(func(k, v []byte) error {
			var m machine.Machine
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decoding machine %s: %w", k, err)
			}
			if (f.Recipe == "" || m.Recipe == f.Recipe) && (f.State == "" || m.State == f.State) &&
				(f.Rack == "" || m.Rack == f.Rack) {
				out = append(out, m)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// UpdateMachine runs fn on a copy of the machine and stores the result in
// the same transaction, moving its index entries and bumping its revision.
// fn must not change the ID.
func (b *Bolt) UpdateMachine(ctx context.Context, idOrName string, fn func(*machine.Machine) error) (*machine.Machine, error) {
	m, _, err := b.updateMachine(ctx, idOrName, nil, fn)
	return m, err
}

// UpdateMachineRev is UpdateMachine if the machine is at revision rev;
// ErrStale, and nothing written, if it is not.
func (b *Bolt) UpdateMachineRev(ctx context.Context, idOrName string, rev uint64, fn func(*machine.Machine) error) (*machine.Machine, uint64, error) {
	return b.updateMachine(ctx, idOrName, &rev, fn)
}

// updateMachine is UpdateMachine, checking the revision first when want is
// not nil.
func (b *Bolt) updateMachine(ctx context.Context, idOrName string, want *uint64, fn func(*machine.Machine) error) (*machine.Machine, uint64, error) {
	var (
		out *machine.Machine
		rev uint64
	)
	err := b.update(ctx, func(tx *bolt.Tx) error {
		old, err := getMachine(tx, idOrName)
		if err != nil {
			return err
		}
		if want != nil {
			what := fmt.Sprintf("machine %s (%s)", old.Name, old.ID)
			if err := CheckRevision(what, machineRev(tx, old.ID), *want); err != nil {
				return err
			}
		}
		m, err := UpdatedMachineRecord(old, fn, b.opts.Now())
		if err != nil {
			return err
		}
		if err := deleteIndexes(tx, old); err != nil {
			return err
		}
		if err := checkIndexes(tx, &m); err != nil {
			return err
		}
		if err := putIndexes(tx, &m); err != nil {
			return err
		}
		if rev, err = bumpMachineRev(tx, m.ID); err != nil {
			return err
		}
		out = &m
		return putJSON(tx.Bucket(bMachines), []byte(m.ID), &m)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("updating machine %s: %w", idOrName, err)
	}
	return out, rev, nil
}

// GetMachineRev returns the machine with this ID or name and its revision,
// read in one transaction.
func (b *Bolt) GetMachineRev(ctx context.Context, idOrName string) (*machine.Machine, uint64, error) {
	var (
		m   *machine.Machine
		rev uint64
	)
	err := b.view(ctx, func(tx *bolt.Tx) error {
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
func (b *Bolt) MachineRevision(ctx context.Context, idOrName string) (uint64, error) {
	_, rev, err := b.GetMachineRev(ctx, idOrName)
	return rev, err
}

// machineRev is the stored revision of machine id; 0 if it has none.
func machineRev(tx *bolt.Tx, id string) uint64 {
	raw := tx.Bucket(bMachRev).Get([]byte(id))
	if len(raw) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(raw)
}

// bumpMachineRev gives machine id the next machine revision (the bucket's
// sequence is the last one handed out) and returns it.
func bumpMachineRev(tx *bolt.Tx, id string) (uint64, error) {
	bk := tx.Bucket(bMachRev)
	rev := NextRevision(bk.Sequence())
	if err := bk.SetSequence(rev); err != nil {
		return 0, err
	}
	if err := bk.Put([]byte(id), u64(rev)); err != nil {
		return 0, fmt.Errorf("storing the revision of machine %s: %w", id, err)
	}
	return rev, nil
}

// DeleteMachine removes the machine, its index entries, inventory and events.
func (b *Bolt) DeleteMachine(ctx context.Context, idOrName string) error {
	err := b.update(ctx, func(tx *bolt.Tx) error {
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
func getMachine(tx *bolt.Tx, idOrName string) (*machine.Machine, error) {
	id := resolveID(tx, idOrName)
	if id == "" {
		return nil, ErrNotFound
	}
	var m machine.Machine
	ok, err := getJSON(tx.Bucket(bMachines), []byte(id), &m)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("index points to missing machine %s: %w", id, ErrNotFound)
	}
	return &m, nil
}

// resolveID returns the ID of the machine with this ID or name, or "".
func resolveID(tx *bolt.Tx, idOrName string) string {
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
var keyBuckets = map[KeyKind][]byte{KeyName: bIdxName, KeyMAC: bIdxMAC, KeySerial: bIdxSerial, KeyBMC: bIdxBMC}

// checkIndexes fails if another machine owns one of m's unique keys.
func checkIndexes(tx *bolt.Tx, m *machine.Machine) error {
	for _, k := range MachineKeys(m) {
		other := tx.Bucket(keyBuckets[k.Kind]).Get([]byte(k.Value))
		if other == nil || string(other) == m.ID {
			continue
		}
		owner := string(other)
		if o, err := getMachine(tx, owner); err == nil {
			owner = fmt.Sprintf("%s (%s)", o.Name, o.ID)
		}
		return KeyTaken(k, owner)
	}
	return nil
}

func putIndexes(tx *bolt.Tx, m *machine.Machine) error {
	for _, k := range MachineKeys(m) {
		if err := tx.Bucket(keyBuckets[k.Kind]).Put([]byte(k.Value), []byte(m.ID)); err != nil {
			return fmt.Errorf("indexing %s %s: %w", k.Kind, k.Value, err)
		}
	}
	return nil
}

func deleteIndexes(tx *bolt.Tx, m *machine.Machine) error {
	for _, k := range MachineKeys(m) {
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
