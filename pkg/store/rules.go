package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// The rules every backend shares. They touch no storage: a backend reads
// what it holds, asks these functions what the record must look like or
// whether a write may go ahead, and writes the answer in one transaction.
// The bbolt backend calls them; an etcd backend calls the same ones, and the
// conformance suite (storetest.Run) checks that the answers reach the disk.

// NewMachineID returns a fresh machine ID: "m-" and 10 random hex characters.
func NewMachineID() string { return newID("m-") }

// NewJobID returns a fresh job ID: "j-" and 10 random hex characters.
func NewJobID() string { return newID("j-") }

// newID returns prefix + 10 hex characters from crypto/rand.
func newID(prefix string) string {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

// NormalizeBMC is the form BMC endpoints are indexed by: trimmed, lower-case,
// without a trailing slash.
func NormalizeBMC(endpoint string) string {
	return strings.TrimRight(strings.ToLower(strings.TrimSpace(endpoint)), "/")
}

// NormalizeSerial is the form serials are indexed by: trimmed.
func NormalizeSerial(serial string) string { return strings.TrimSpace(serial) }

// NormalizeMachine validates m and puts its MACs (lower-case colon form),
// serial and BMC endpoint (trimmed) in their stored form, rejecting a MAC
// listed twice.
func NormalizeMachine(m *machine.Machine) error {
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
	m.Serial = NormalizeSerial(m.Serial)
	m.BMC.Endpoint = strings.TrimSpace(m.BMC.Endpoint)
	return nil
}

// NewMachineRecord is the record CreateMachine stores for m: a copy with an
// ID generated when empty, State enrolled when empty, normalized (see
// NormalizeMachine), and Created and Updated set to now (UTC).
func NewMachineRecord(m *machine.Machine, now time.Time) (machine.Machine, error) {
	c := cloneMachine(m)
	if c.ID == "" {
		c.ID = NewMachineID()
	}
	if c.State == "" {
		c.State = machine.StateEnrolled
	}
	if err := NormalizeMachine(&c); err != nil {
		return machine.Machine{}, err
	}
	c.Created, c.Updated = now.UTC(), now.UTC()
	return c, nil
}

// UpdatedMachineRecord is the record UpdateMachine stores: fn applied to a
// copy of old, which must keep the ID, normalized, with old's Created and
// Updated set to now (UTC). An error from fn is returned as it is.
func UpdatedMachineRecord(old *machine.Machine, fn func(*machine.Machine) error, now time.Time) (machine.Machine, error) {
	m := cloneMachine(old)
	if err := fn(&m); err != nil {
		return machine.Machine{}, err
	}
	if m.ID != old.ID {
		return machine.Machine{}, fmt.Errorf("changing the ID from %s to %s is not allowed", old.ID, m.ID)
	}
	if err := NormalizeMachine(&m); err != nil {
		return machine.Machine{}, err
	}
	m.Created, m.Updated = old.Created, now.UTC()
	return m, nil
}

// cloneMachine copies m deeply enough that edits do not reach the caller.
func cloneMachine(m *machine.Machine) machine.Machine {
	c := *m
	c.MACs = slices.Clone(m.MACs)
	c.Waivers = slices.Clone(m.Waivers)
	return c
}

// KeyKind names one of the unique keys of a machine.
type KeyKind string

// The unique keys of a machine. No two machines share a value of one kind.
const (
	KeyName   KeyKind = "name"
	KeyMAC    KeyKind = "MAC"
	KeySerial KeyKind = "serial"
	KeyBMC    KeyKind = "BMC endpoint"
)

// UniqueKey is one value no other machine may hold.
type UniqueKey struct {
	Kind  KeyKind
	Value string
}

// MachineKeys lists the unique keys of normalized m: its name, each MAC,
// its serial and its BMC endpoint (NormalizeBMC), the last two only when
// set. A backend indexes a machine by exactly these.
func MachineKeys(m *machine.Machine) []UniqueKey {
	out := []UniqueKey{{KeyName, m.Name}}
	for _, mac := range m.MACs {
		out = append(out, UniqueKey{KeyMAC, mac})
	}
	if m.Serial != "" {
		out = append(out, UniqueKey{KeySerial, m.Serial})
	}
	if m.BMC.Endpoint != "" {
		out = append(out, UniqueKey{KeyBMC, NormalizeBMC(m.BMC.Endpoint)})
	}
	return out
}

// KeyTaken is the error for a write whose key k already belongs to another
// machine, described by owner (its name and ID where known): ErrExists
// for a name, ErrConflict for an address or serial.
func KeyTaken(k UniqueKey, owner string) error {
	sentinel := ErrConflict
	if k.Kind == KeyName {
		sentinel = ErrExists
	}
	return fmt.Errorf("%s %s already belongs to machine %s: %w", k.Kind, k.Value, owner, sentinel)
}

// NextSeq is the sequence number after last: the first event or snapshot of
// a machine is 1, each next one is one more. Numbers are not reused while
// the machine exists.
func NextSeq(last uint64) uint64 { return last + 1 }

// NewEventRecord checks ev before it is appended and stamps Time with now
// (UTC) when zero. The backend sets Machine (the ID) and Seq.
func NewEventRecord(ev machine.Event, now time.Time) (machine.Event, error) {
	if ev.Kind == "" {
		return ev, fmt.Errorf("kind is empty")
	}
	if ev.Time.IsZero() {
		ev.Time = now.UTC()
	}
	return ev, nil
}

// OldestKept is the oldest snapshot sequence number that inventory history
// keeps once newest is stored and keep snapshots are kept: every snapshot
// with a smaller Seq is dropped in the same write.
func OldestKept(newest uint64, keep int) uint64 {
	if keep <= 0 || newest <= uint64(keep) {
		return 1
	}
	return newest - uint64(keep) + 1
}

// NextRevision is the revision a record gets when it is written, given the
// last revision its backend handed out for that record type: revisions
// start at 1, only grow, and are never reused, even after a delete.
func NextRevision(last uint64) uint64 { return last + 1 }

// CheckRevision returns nil if the stored revision have is the one the
// caller read (want), else ErrStale naming both. what names the record.
func CheckRevision(what string, have, want uint64) error {
	if have == want {
		return nil
	}
	return fmt.Errorf("%s is at revision %d, not %d: %w", what, have, want, ErrStale)
}

// EventsDropped is how many of a machine's events the store dropped
// (Options.MaxEvents) when the oldest it keeps has Seq oldest: the seqs
// before it. 0 for a machine with no events (oldest 0).
func EventsDropped(oldest uint64) uint64 {
	if oldest == 0 {
		return 0
	}
	return oldest - 1
}
