package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// CreateMachine stores a new machine and its first events (see
// store.MachineStore): its record, every unique key, the events and their
// counter in one transaction that compares each key's absence, so two
// instances creating machines with one MAC cannot both succeed. The
// machine's revision is the transaction's etcd revision.
func (s *Store) CreateMachine(ctx context.Context, m *machine.Machine, evs ...machine.Event) error {
	c, err := store.NewMachineRecord(m, s.opts.Now())
	if err != nil {
		return fmt.Errorf("creating machine: %w", err)
	}
	if strings.Contains(c.ID, "/") {
		return fmt.Errorf("creating machine %s: ID %q: '/' is not allowed in an ID", c.Name, c.ID)
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("creating machine %s: %w", c.Name, err)
	}
	_, err = s.update(ctx, func(t *tx) error {
		mk := s.k.machine(c.ID)
		ks := []string{mk}
		for _, u := range store.MachineKeys(&c) {
			ks = append(ks, s.k.unique(u))
		}
		got, err := t.get(ks...)
		if err != nil {
			return err
		}
		if _, ok := got[mk]; ok {
			return fmt.Errorf("machine ID %s: %w", c.ID, store.ErrExists)
		}
		if err := t.checkKeys(&c, got); err != nil {
			return err
		}
		t.put(mk, raw)
		for _, k := range ks[1:] {
			t.put(k, []byte(c.ID))
		}
		_, err = t.appendEvents(c.ID, evs)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating machine %s: %w", c.Name, err)
	}
	*m = c
	return nil
}

// appendEvents numbers evs after machine id's event counter and writes
// them and the counter in t (the counter's read is compared at the
// commit: no two writers give one seq). Each event is checked and stamped
// by store.NewEventRecord.
func (t *tx) appendEvents(id string, evs []machine.Event) ([]machine.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	ck := t.s.k.evSeq(id)
	got, err := t.get(ck)
	if err != nil {
		return nil, err
	}
	last, err := counter(got, ck)
	if err != nil {
		return nil, err
	}
	out := make([]machine.Event, 0, len(evs))
	for _, ev := range evs {
		ev.Machine = id
		ev, err := store.NewEventRecord(ev, t.s.opts.Now())
		if err != nil {
			return nil, fmt.Errorf("event %d of %d: %w", len(out)+1, len(evs), err)
		}
		last = store.NextSeq(last)
		ev.Seq = last
		raw, err := json.Marshal(&ev)
		if err != nil {
			return nil, err
		}
		t.put(t.s.k.event(id, ev.Seq), raw)
		out = append(out, ev)
	}
	t.put(ck, []byte(strconv.FormatUint(last, 10)))
	t.trimEvents(id, last)
	return out, nil
}

// trimEvents keeps machine id's newest store.Options.MaxEvents events
// once its newest seq is last: the older ones are deleted in t by one
// range, and those t was about to write are not written (etcd refuses a
// transaction whose delete range overlaps its puts).
func (t *tx) trimEvents(id string, last uint64) {
	max := uint64(t.s.opts.MaxEvents)
	if last <= max {
		return
	}
	cut := last - max // the newest seq dropped
	for seq := cut; seq > 0; seq-- {
		k := t.s.k.event(id, seq)
		w, ok := t.writes[k]
		if !ok || w.del {
			break
		}
		t.unset(k)
	}
	t.delRange(t.s.k.events(id), t.s.k.event(id, cut+1))
}

// checkKeys fails with store.KeyTaken if got (unique keys read by t) shows
// one of m's keys held by another machine.
func (t *tx) checkKeys(m *machine.Machine, got map[string][]byte) error {
	for _, u := range store.MachineKeys(m) {
		owner, ok := got[t.s.k.unique(u)]
		if !ok || string(owner) == m.ID {
			continue
		}
		who := string(owner)
		if o, err := t.machine(who, false); err == nil {
			who = fmt.Sprintf("%s (%s)", o.Name, o.ID)
		}
		return store.KeyTaken(u, who)
	}
	return nil
}

// resolve returns the ID and record of the machine ref names (its ID
// first, then its name): store.ErrNotFound when neither. strict: the
// commit compares the record's mod revision (it must not change), else
// its create revision (it may change, but must be the same machine).
func (t *tx) resolve(ref string, strict bool) (string, []byte, error) {
	if ref == "" {
		return "", nil, store.ErrNotFound
	}
	read := t.getSame
	if strict {
		read = t.get
	}
	mk := t.s.k.machine(ref)
	got, err := read(mk)
	if err != nil {
		return "", nil, err
	}
	if v, ok := got[mk]; ok {
		return ref, v, nil
	}
	nk := t.s.k.name(ref)
	if got, err = t.get(nk); err != nil {
		return "", nil, err
	}
	id, ok := got[nk]
	if !ok {
		return "", nil, store.ErrNotFound
	}
	mk = t.s.k.machine(string(id))
	if got, err = read(mk); err != nil {
		return "", nil, err
	}
	v, ok := got[mk]
	if !ok {
		return "", nil, fmt.Errorf("name %s points to missing machine %s: %w", ref, id, store.ErrNotFound)
	}
	return string(id), v, nil
}

// machine is resolve, decoded.
func (t *tx) machine(ref string, strict bool) (*machine.Machine, error) {
	_, raw, err := t.resolve(ref, strict)
	if err != nil {
		return nil, err
	}
	return decodeMachine(raw)
}

func decodeMachine(raw []byte) (*machine.Machine, error) {
	var m machine.Machine
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decoding machine record: %w", err)
	}
	return &m, nil
}

// GetMachine returns the machine with this ID or name.
func (s *Store) GetMachine(ctx context.Context, idOrName string) (*machine.Machine, error) {
	m, _, err := s.GetMachineRev(ctx, idOrName)
	return m, err
}

// GetMachineRev returns the machine and its revision (the mod revision of
// its record), read together.
func (s *Store) GetMachineRev(ctx context.Context, idOrName string) (*machine.Machine, uint64, error) {
	var (
		m   *machine.Machine
		rev int64
	)
	err := s.view(ctx, func(t *tx) error {
		var err error
		if m, err = t.machine(idOrName, true); err != nil {
			return err
		}
		rev = t.modRev(s.k.machine(m.ID))
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("reading machine %s: %w", idOrName, err)
	}
	return m, uint64(rev), nil
}

// MachineRevision returns the machine's current revision.
func (s *Store) MachineRevision(ctx context.Context, idOrName string) (uint64, error) {
	_, rev, err := s.GetMachineRev(ctx, idOrName)
	return rev, err
}

// MachineByMAC returns the machine owning mac, in any notation
// machine.NormalizeMAC accepts.
func (s *Store) MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error) {
	norm, err := machine.NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("looking up machine by MAC: %w", err)
	}
	return s.machineByKey(ctx, store.UniqueKey{Kind: store.KeyMAC, Value: norm})
}

// MachineBySerial returns the machine with this system serial.
func (s *Store) MachineBySerial(ctx context.Context, serial string) (*machine.Machine, error) {
	return s.machineByKey(ctx, store.UniqueKey{Kind: store.KeySerial, Value: store.NormalizeSerial(serial)})
}

// MachineByBMC returns the machine whose BMC endpoint is endpoint.
func (s *Store) MachineByBMC(ctx context.Context, endpoint string) (*machine.Machine, error) {
	return s.machineByKey(ctx, store.UniqueKey{Kind: store.KeyBMC, Value: store.NormalizeBMC(endpoint)})
}

// machineByKey reads the unique key and the machine it points to at one
// revision.
func (s *Store) machineByKey(ctx context.Context, u store.UniqueKey) (*machine.Machine, error) {
	var m *machine.Machine
	err := s.viewFresh(ctx, func(t *tx) error {
		if u.Value == "" {
			return store.ErrNotFound
		}
		k := s.k.unique(u)
		got, err := t.get(k)
		if err != nil {
			return err
		}
		id, ok := got[k]
		if !ok {
			return store.ErrNotFound
		}
		_, raw, err := t.resolveID(string(id))
		if err != nil {
			return err
		}
		m, err = decodeMachine(raw)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("looking up machine by %s %q: %w", u.Kind, u.Value, err)
	}
	return m, nil
}

// resolveID is resolve for an ID only (an index's target).
func (t *tx) resolveID(id string) (string, []byte, error) {
	mk := t.s.k.machine(id)
	got, err := t.get(mk)
	if err != nil {
		return "", nil, err
	}
	v, ok := got[mk]
	if !ok {
		return "", nil, fmt.Errorf("index points to missing machine %s: %w", id, store.ErrNotFound)
	}
	return id, v, nil
}

// ListMachines returns the machines matching f, sorted by name. A page
// (f.After, f.Limit) walks the name keys from After and reads the records
// they point to, a page at a time, until Limit machines match: it costs
// about what the page's machines cost, not the fleet. The whole list is
// one range read of the records, sorted here.
func (s *Store) ListMachines(ctx context.Context, f store.MachineFilter) ([]machine.Machine, error) {
	var out []machine.Machine
	err := s.view(ctx, func(t *tx) error {
		out = []machine.Machine{}
		if f.After == "" && f.Limit <= 0 {
			return t.scanPrefix(s.k.machines(), false, func(kv *mvccpb.KeyValue) error {
				m, err := decodeMachine(kv.Value)
				if err != nil {
					return fmt.Errorf("%s: %w", kv.Key, err)
				}
				if matches(m, f) {
					out = append(out, *m)
				}
				return nil
			})
		}
		var err error
		out, err = t.pageMachines(f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// matches reports whether m passes f's fields other than After and Limit.
func matches(m *machine.Machine, f store.MachineFilter) bool {
	return (f.Recipe == "" || m.Recipe == f.Recipe) && (f.State == "" || m.State == f.State) &&
		(f.Rack == "" || m.Rack == f.Rack)
}

// pageMachines reads name keys after f.After in pages of f.Limit (at least
// 16, at most 128 when a filter may skip some), and the records they point
// to, until f.Limit machines match or the names end.
func (t *tx) pageMachines(f store.MachineFilter) ([]machine.Machine, error) {
	out := []machine.Machine{}
	start, end := t.s.k.names(), prefixEnd(t.s.k.names())
	if f.After != "" {
		start = t.s.k.name(f.After) + "\x00"
	}
	page := maxOps
	if f.Limit > 0 && f.Recipe == "" && f.State == "" && f.Rack == "" {
		page = min(f.Limit, maxOps)
	}
	for f.Limit <= 0 || len(out) < f.Limit {
		names, more, err := t.rangeKeys(start, end, page)
		if err != nil || len(names) == 0 {
			return out, err
		}
		recs := make([]string, len(names))
		for i, kv := range names {
			recs[i] = t.s.k.machine(string(kv.Value))
		}
		kvs, err := t.fetch(recs)
		if err != nil {
			return nil, err
		}
		for i, kv := range kvs {
			if kv == nil {
				return nil, fmt.Errorf("name key %s points to missing machine %s: %w", names[i].Key, names[i].Value, store.ErrDamaged)
			}
			m, err := decodeMachine(kv.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kv.Key, err)
			}
			if matches(m, f) && (f.Limit <= 0 || len(out) < f.Limit) {
				out = append(out, *m)
			}
		}
		if !more {
			return out, nil
		}
		start = string(names[len(names)-1].Key) + "\x00"
	}
	return out, nil
}

// ChangeMachine runs c.Edit on a copy of the machine and stores the result
// with its unique keys moved and the events Edit returned, in one
// transaction that compares the record's revision (Edit runs again on a
// fresh copy if another writer got in between; with c.Rev set, ErrStale
// and Edit not run when the machine is no longer at it).
func (s *Store) ChangeMachine(ctx context.Context, idOrName string, c store.Change) (*store.Changed, error) {
	var out store.Changed
	rev, err := s.updateLinearizable(ctx, func(t *tx) error {
		id, raw, err := t.resolve(idOrName, true)
		if err != nil {
			return err
		}
		old, err := decodeMachine(raw)
		if err != nil {
			return err
		}
		if c.Rev != 0 {
			what := fmt.Sprintf("machine %s (%s)", old.Name, old.ID)
			if err := store.CheckRevision(what, uint64(t.modRev(s.k.machine(id))), c.Rev); err != nil {
				return err
			}
		}
		var evs []machine.Event
		m, err := store.UpdatedMachineRecord(old, func(m *machine.Machine) (err error) {
			evs, err = c.Edit(m)
			return err
		}, s.opts.Now())
		if err != nil {
			return err
		}
		if err := t.moveKeys(old, &m); err != nil {
			return err
		}
		if raw, err = json.Marshal(&m); err != nil {
			return err
		}
		t.put(s.k.machine(id), raw)
		out.Machine = m
		out.Events, err = t.appendEvents(id, evs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("changing machine %s: %w", idOrName, err)
	}
	out.Rev = uint64(rev)
	return &out, nil
}

// moveKeys writes m's unique keys in place of old's: the keys old had and
// m has not are deleted, the new ones checked free and taken.
func (t *tx) moveKeys(old, m *machine.Machine) error {
	had := map[string]bool{}
	for _, u := range store.MachineKeys(old) {
		had[t.s.k.unique(u)] = true
	}
	has := map[string]bool{}
	var added []string
	for _, u := range store.MachineKeys(m) {
		k := t.s.k.unique(u)
		has[k] = true
		if !had[k] {
			added = append(added, k)
		}
	}
	got, err := t.get(added...)
	if err != nil {
		return err
	}
	if err := t.checkKeys(m, got); err != nil {
		return err
	}
	for k := range had {
		if !has[k] {
			t.del(k)
		}
	}
	for _, k := range added {
		t.put(k, []byte(m.ID))
	}
	return nil
}

// DeleteMachine removes the machine, its unique keys, its inventory and
// its events (and their counters) in one transaction.
func (s *Store) DeleteMachine(ctx context.Context, idOrName string) error {
	_, err := s.update(ctx, func(t *tx) error {
		id, raw, err := t.resolve(idOrName, true)
		if err != nil {
			return err
		}
		m, err := decodeMachine(raw)
		if err != nil {
			return err
		}
		var ks []string
		for _, u := range store.MachineKeys(m) {
			ks = append(ks, s.k.unique(u))
		}
		got, err := t.get(ks...)
		if err != nil {
			return err
		}
		for _, k := range ks {
			if string(got[k]) == id { // never remove another machine's key
				t.del(k)
			}
		}
		t.del(s.k.machine(id))
		t.del(s.k.invSeq(id))
		t.del(s.k.evSeq(id))
		t.delPrefix(s.k.inventories(id))
		t.delPrefix(s.k.events(id))
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting machine %s: %w", idOrName, err)
	}
	return nil
}

// isNotFound tells a call's own error (the machine it names is not there)
// from one that must abort a group's round.
func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
