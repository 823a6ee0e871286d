package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// NormalizeBMC is the form BMC endpoints are indexed by: trimmed, lower-case,
// without a trailing slash.
func NormalizeBMC(endpoint string) string {
	return strings.TrimRight(strings.ToLower(strings.TrimSpace(endpoint)), "/")
}

// CreateMachine stores a new machine. An empty ID is generated ("m-" + 10 hex
// characters), an empty State becomes enrolled, MACs are normalized, and
// Created/Updated are stamped; m is updated in place. A name that is taken
// gives ErrExists; a MAC, serial or BMC endpoint owned by another machine
// gives ErrConflict naming it.
func (b *Bolt) CreateMachine(ctx context.Context, m *machine.Machine) error {
	c := cloneMachine(m)
	if c.ID == "" {
		c.ID = newID("m-")
	}
	if c.State == "" {
		c.State = machine.StateEnrolled
	}
	if err := normalizeMachine(&c); err != nil {
		return fmt.Errorf("creating machine: %w", err)
	}
	now := b.opts.Now().UTC()
	c.Created, c.Updated = now, now
	err := b.update(ctx, func(tx *bolt.Tx) error {
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
	return b.machineByIndex(ctx, bIdxSerial, "serial", strings.TrimSpace(serial))
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
// the same transaction, moving its index entries. fn must not change the ID.
func (b *Bolt) UpdateMachine(ctx context.Context, idOrName string, fn func(*machine.Machine) error) (*machine.Machine, error) {
	var out *machine.Machine
	err := b.update(ctx, func(tx *bolt.Tx) error {
		old, err := getMachine(tx, idOrName)
		if err != nil {
			return err
		}
		m := cloneMachine(old)
		if err := fn(&m); err != nil {
			return err
		}
		if m.ID != old.ID {
			return fmt.Errorf("changing the ID from %s to %s is not allowed", old.ID, m.ID)
		}
		if err := normalizeMachine(&m); err != nil {
			return err
		}
		m.Created = old.Created
		m.Updated = b.opts.Now().UTC()
		if err := deleteIndexes(tx, old); err != nil {
			return err
		}
		if err := checkIndexes(tx, &m); err != nil {
			return err
		}
		if err := putIndexes(tx, &m); err != nil {
			return err
		}
		out = &m
		return putJSON(tx.Bucket(bMachines), []byte(m.ID), &m)
	})
	if err != nil {
		return nil, fmt.Errorf("updating machine %s: %w", idOrName, err)
	}
	return out, nil
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

// indexEntries lists (bucket, key, description) for every index of m.
func indexEntries(m *machine.Machine) []indexEntry {
	out := []indexEntry{{bIdxName, m.Name, "name"}}
	for _, mac := range m.MACs {
		out = append(out, indexEntry{bIdxMAC, mac, "MAC"})
	}
	if m.Serial != "" {
		out = append(out, indexEntry{bIdxSerial, m.Serial, "serial"})
	}
	if m.BMC.Endpoint != "" {
		out = append(out, indexEntry{bIdxBMC, NormalizeBMC(m.BMC.Endpoint), "BMC endpoint"})
	}
	return out
}

type indexEntry struct {
	bucket []byte
	key    string
	what   string
}

// checkIndexes fails if another machine owns one of m's names or addresses.
func checkIndexes(tx *bolt.Tx, m *machine.Machine) error {
	for _, e := range indexEntries(m) {
		other := tx.Bucket(e.bucket).Get([]byte(e.key))
		if other == nil || string(other) == m.ID {
			continue
		}
		sentinel := ErrConflict
		if e.what == "name" {
			sentinel = ErrExists
		}
		owner := string(other)
		if o, err := getMachine(tx, owner); err == nil {
			owner = fmt.Sprintf("%s (%s)", o.Name, o.ID)
		}
		return fmt.Errorf("%s %s already belongs to machine %s: %w", e.what, e.key, owner, sentinel)
	}
	return nil
}

func putIndexes(tx *bolt.Tx, m *machine.Machine) error {
	for _, e := range indexEntries(m) {
		if err := tx.Bucket(e.bucket).Put([]byte(e.key), []byte(m.ID)); err != nil {
			return fmt.Errorf("indexing %s %s: %w", e.what, e.key, err)
		}
	}
	return nil
}

func deleteIndexes(tx *bolt.Tx, m *machine.Machine) error {
	for _, e := range indexEntries(m) {
		bk := tx.Bucket(e.bucket)
		if string(bk.Get([]byte(e.key))) != m.ID {
			continue // owned by someone else; never remove another's entry
		}
		if err := bk.Delete([]byte(e.key)); err != nil {
			return fmt.Errorf("unindexing %s %s: %w", e.what, e.key, err)
		}
	}
	return nil
}

// normalizeMachine validates m and puts MACs, serial and BMC endpoint in
// their indexed form, rejecting a MAC listed twice.
func normalizeMachine(m *machine.Machine) error {
	if err := m.Validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, mac := range m.MACs {
		norm, _ := machine.NormalizeMAC(mac) // Validate checked it
		if seen[norm] {
			return fmt.Errorf("machine %s: macs[%d]: MAC %s listed twice", m.Name, i, norm)
		}
		seen[norm] = true
		m.MACs[i] = norm
	}
	m.Serial = strings.TrimSpace(m.Serial)
	m.BMC.Endpoint = strings.TrimSpace(m.BMC.Endpoint)
	return nil
}

// cloneMachine copies m deeply enough that edits do not reach the caller.
func cloneMachine(m *machine.Machine) machine.Machine {
	c := *m
	c.MACs = append([]string(nil), m.MACs...)
	return c
}
