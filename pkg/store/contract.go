package store

import (
	"context"
	"io"
	"net/netip"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// The contracts, one per record type. Each says what an implementation MUST
// and SHOULD do; storetest.Run checks the MUSTs. Rules common to all:
//
//   - Every method takes a context and MUST return an error wrapping
//     ctx.Err() when ctx is done before the operation starts; after Close
//     every method MUST return an error wrapping ErrClosed.
//   - Errors MUST wrap the sentinels of store.go so errors.Is classifies
//     them; messages SHOULD say what was being done and name the record.
//   - A write that returned nil MUST be durable (survive the process being
//     killed), and every write MUST be atomic: all of it or none of it.
//   - Records handed in are copied before they are kept and records handed
//     out are the caller's: editing either MUST NOT change what is stored.
//   - A read after a write that returned nil MUST see that write.
//   - Timestamps the store sets come from its clock (Options.Now), in UTC.

// MachineStore keeps machine records and their unique keys.
//
// A machine is found by its ID or its name (every method taking idOrName
// tries the ID first); ErrNotFound when neither matches. Its unique keys
// are those MachineKeys lists: name, each MAC, serial and BMC endpoint.
//
// An implementation MUST:
//   - store the record NewMachineRecord returns on create and the one
//     UpdatedMachineRecord returns on a change (IDs generated, MACs
//     normalized, Created kept, Updated stamped), and write the result back
//     into the caller's m on create;
//   - refuse a create whose ID exists with ErrExists, and a write that would
//     give a key to a second machine with the error KeyTaken returns
//     (ErrExists for a name, ErrConflict for a MAC, serial or BMC endpoint,
//     naming the machine that holds it); the check and the write are one
//     atomic step, so two concurrent creates cannot both take a key;
//   - keep the keys in step with the record in the same write: after a
//     change the old name, MACs, serial and endpoint no longer find the
//     machine and are free for another;
//   - look up MachineByMAC in any notation machine.NormalizeMAC accepts,
//     MachineBySerial by NormalizeSerial and MachineByBMC by NormalizeBMC;
//   - run ChangeMachine's Edit on a copy, and store nothing if Edit fails
//     (its error is returned wrapped);
//   - write the machine and the events Edit returns in ONE atomic write:
//     both or neither, whatever fails (an event NewEventRecord refuses
//     included), numbering the events as AppendEvent does (EventStore);
//   - on delete, remove the record, its keys, its inventory and its events
//     in one write;
//   - give every stored machine a revision: non-zero, NextRevision of the
//     last one handed out on every create and every change (conditional or
//     not), so a revision never comes back, even after a delete; inventory
//     and events appended on their own do not change it;
//   - make a Change with Rev check the revision and write in one atomic
//     step, failing with ErrStale (CheckRevision) when Rev is not the
//     current revision, without calling Edit.
//
// An implementation MUST return ListMachines sorted by name, the filter's
// After and Limit applied after its other fields (a page of a large fleet
// SHOULD cost about what its machines cost, not the fleet). Edit MAY be
// called more than once (a backend that retries on contention calls it on
// a fresh copy each time), so it SHOULD only edit its argument.
//
// Only pkg/fleet calls CreateMachine, ChangeMachine and DeleteMachine: it
// is the one owner of machine records (pkg/architecture checks it).
type MachineStore interface {
	// CreateMachine stores a new machine and its first events (evs, each
	// checked and stamped as Change's are) in one atomic write.
	CreateMachine(ctx context.Context, m *machine.Machine, evs ...machine.Event) error
	GetMachine(ctx context.Context, idOrName string) (*machine.Machine, error)
	MachineByMAC(ctx context.Context, mac string) (*machine.Machine, error)
	MachineBySerial(ctx context.Context, serial string) (*machine.Machine, error)
	MachineByBMC(ctx context.Context, endpoint string) (*machine.Machine, error)
	ListMachines(ctx context.Context, f MachineFilter) ([]machine.Machine, error)
	// ChangeMachine edits a machine and appends the events of the change,
	// in one atomic write (see Change).
	ChangeMachine(ctx context.Context, idOrName string, c Change) (*Changed, error)
	DeleteMachine(ctx context.Context, idOrName string) error

	// GetMachineRev returns the machine and its revision, read together.
	GetMachineRev(ctx context.Context, idOrName string) (*machine.Machine, uint64, error)
	// MachineRevision returns the machine's current revision.
	MachineRevision(ctx context.Context, idOrName string) (uint64, error)
}

// Change is one ChangeMachine write.
type Change struct {
	// Rev, when not 0, is the revision the caller read: the change is
	// written only while the machine is still at it (else ErrStale).
	Rev uint64
	// Edit edits a copy of the machine and returns the events to append
	// with the change, oldest first (none is fine). Each event is checked
	// and stamped as AppendEvent does, with Machine set to the machine's
	// ID; an event the store refuses fails the whole change.
	Edit func(m *machine.Machine) ([]machine.Event, error)
}

// Changed is what ChangeMachine wrote: the machine, its new revision and
// the events as stored (Seq and Time set).
type Changed struct {
	Machine machine.Machine
	Rev     uint64
	Events  []machine.Event
}

// InventoryStore keeps the inventory history of each machine.
//
// An implementation MUST:
//   - accept the machine's ID or name and fail with ErrNotFound for a
//     machine that does not exist (reads included);
//   - number a machine's snapshots NextSeq of the last one, starting at 1,
//     and return the number from PutInventory; Snapshot.MachineID is the ID
//     and Taken defaults to the store's clock;
//   - keep at most Options.History snapshots per machine, dropping those
//     below OldestKept in the same write that adds the newest;
//   - return Inventories oldest first (none: an empty list, no error), and
//     from Inventory the snapshot seq (0: the newest), or ErrNotFound.
type InventoryStore interface {
	PutInventory(ctx context.Context, machineID string, inv machine.Inventory) (uint64, error)
	Inventories(ctx context.Context, machineID string) ([]Snapshot, error)          // oldest first
	Inventory(ctx context.Context, machineID string, seq uint64) (*Snapshot, error) // seq 0: the latest
}

// EventStore keeps each machine's append-only event log.
//
// An implementation MUST:
//   - check and stamp events with NewEventRecord (a Kind is required, Time
//     defaults to the store's clock), set Machine to the machine's ID (ev
//     may name it by ID or name) and return the stored event;
//   - number a machine's events NextSeq of the last one, starting at 1, in
//     the order the appends commit, so each machine's Seq increases by one
//     with no gaps and no repeats, whatever the concurrency;
//   - fail with ErrNotFound for a machine that does not exist;
//   - return from Events, oldest first, the events with Seq > afterSeq, at
//     most limit of them (limit <= 0: all);
//   - keep at most Options.MaxEvents events per machine: a write (an
//     append, or a create or change with its events) that would keep more
//     drops the oldest in that same write. Seqs are never reused or
//     renumbered, so the events a machine lost are counted by its oldest
//     kept one: EventsDropped(oldest.Seq).
//
// An implementation SHOULD group-commit concurrent appends: agents and the
// engine append from many goroutines.
type EventStore interface {
	AppendEvent(ctx context.Context, ev machine.Event) (machine.Event, error)
	Events(ctx context.Context, machineID string, afterSeq uint64, limit int) ([]machine.Event, error)
}

// LeaseStore keeps DHCP leases, one per MAC, indexed by IP.
//
// An implementation MUST:
//   - store the lease NormalizeLease returns under its MAC, with Updated
//     from the store's clock, replacing that MAC's previous lease;
//   - refuse a lease whose IP another MAC's lease holds with the error
//     LeaseConflict returns (ErrConflict while that lease is live by
//     LeaseLive at the store's clock); an expired, released or declined
//     lease gives way, and the check and the write are one atomic step;
//   - return from LeaseByIP only the lease whose IP is ip now (a MAC that
//     moved to another address no longer holds the old one);
//   - look leases up by MAC in any notation machine.NormalizeMAC accepts;
//   - return ListLeases ordered by MAC;
//   - make DeleteLease fail with ErrNotFound when the MAC has no lease.
//
// PutLease returns only once the lease is durable: a DHCP ACK waits for
// it. An implementation SHOULD share that sync among concurrent callers.
type LeaseStore interface {
	PutLease(ctx context.Context, l Lease) error
	LeaseByMAC(ctx context.Context, mac string) (*Lease, error)
	LeaseByIP(ctx context.Context, ip netip.Addr) (*Lease, error)
	ListLeases(ctx context.Context) ([]Lease, error)
	DeleteLease(ctx context.Context, mac string) error
}

// JobStore keeps jobs: persisted work that survives a restart.
//
// An implementation MUST:
//   - store the record NewJobRecord returns on create (ID generated, Kind
//     required, State pending by default), write it back into the caller's
//     j, and refuse an ID that exists with ErrExists;
//   - run UpdateJob's fn on a copy and store UpdatedJobRecord's result, or
//     nothing if fn fails; ErrNotFound for an unknown ID;
//   - set Job.Revision on every write to NextRevision of the last one it
//     handed out to a job (whatever the caller or fn put there), so it is
//     non-zero and only grows;
//   - make UpdateJobRev check the revision and write in one atomic step,
//     failing with ErrStale (CheckRevision) when rev is not the job's;
//   - return ListJobs in the given state ("" = all) in SortJobs order, at
//     a cost that does not grow with the jobs in other states (the running
//     jobs are looked up on every agent request; ended ones pile up).
//
// fn MAY be called more than once and SHOULD only edit its argument.
type JobStore interface {
	CreateJob(ctx context.Context, j *Job) error
	GetJob(ctx context.Context, id string) (*Job, error)
	ListJobs(ctx context.Context, state JobState) ([]Job, error) // "" = all
	UpdateJob(ctx context.Context, id string, fn func(*Job) error) (*Job, error)
	// UpdateJobRev is UpdateJob if the job is still at revision rev (else
	// ErrStale, and nothing is written).
	UpdateJobRev(ctx context.Context, id string, rev uint64, fn func(*Job) error) (*Job, error)
}

// TokenStore keeps API tokens by the SHA-256 of their secret.
//
// An implementation MUST:
//   - check tokens with NewTokenRecord (Hash is 64 hex characters; Created
//     defaults to the store's clock) and store them under Hash, replacing a
//     token with the same hash (that is how revocation is written);
//   - fail TokenByHash and DeleteToken with ErrNotFound when no token has
//     the hash;
//   - return ListTokens oldest Created first, and FindTokens the tokens
//     matching every field the filter sets, in the same order, at a cost
//     that does not grow with the tokens it does not return (machine
//     credentials are looked up on every boot request);
//   - never put the hash in an error message: it identifies a credential.
type TokenStore interface {
	PutToken(ctx context.Context, t Token) error
	TokenByHash(ctx context.Context, hash string) (*Token, error)
	ListTokens(ctx context.Context) ([]Token, error)
	FindTokens(ctx context.Context, f TokenFilter) ([]Token, error)
	// DeleteToken removes the token stored under hash; ErrNotFound when
	// there is none.
	DeleteToken(ctx context.Context, hash string) error
}

// SecretStore keeps secrets sealed by pkg/secret: the store sees only
// ciphertext and the ID of the key that sealed it, never a value or a key.
//
// An implementation MUST:
//   - store a secret under its Name (a DNS-style name), replacing one with
//     the same name, and stamp Updated from its clock (Created kept);
//   - keep a secret's Endpoints (its bindings) as written, through
//     PutSecret and ReplaceSecrets alike: they say where pkg/fleet lets it
//     go, and a backend that dropped them would unbind it;
//   - fail GetSecret and DeleteSecret with ErrNotFound for an unknown name;
//   - return ListSecrets sorted by name;
//   - make ReplaceSecrets one atomic write: every secret of the argument
//     is stored (re-sealed by key rotation) or none is, and it fails with
//     ErrStale, writing nothing, when any of them changed (Updated differs)
//     since it was read;
//   - never put a secret's Sealed bytes in an error message.
type SecretStore interface {
	PutSecret(ctx context.Context, s Secret) error
	GetSecret(ctx context.Context, name string) (*Secret, error)
	ListSecrets(ctx context.Context) ([]Secret, error)
	DeleteSecret(ctx context.Context, name string) error
	ReplaceSecrets(ctx context.Context, sealed []Secret) error
}

// TelemetryStore keeps what telemetry's own decisions and reports need
// across a restart (pkg/telemetry): each machine's state (last sample,
// alert states) and its power days (a day of 5-minute aggregates). Values
// are telemetry's own encoding; the store keeps them opaque.
//
// An implementation MUST:
//   - write a PutTelemetry batch in one atomic write, replacing the records
//     of the same machine (and day);
//   - return ListNodeTelemetry sorted by machine, and PowerDays of a machine
//     sorted by day, from the first day not before from;
//   - make DeletePowerDaysBefore remove every machine's days before day (a
//     "2006-01-02" date) and return how many it removed;
//   - keep daily summaries (PutPowerSummaries: one small record a machine
//     and day, kept a year) apart from the power days, with the same
//     ordering and deletion rules (PowerSummaries, DeletePowerSummariesBefore);
//   - make DeleteTelemetry remove a machine's state, days and summaries.
type TelemetryStore interface {
	PutTelemetry(ctx context.Context, nodes []NodeTelemetry, days []PowerDay) error
	ListNodeTelemetry(ctx context.Context) ([]NodeTelemetry, error)
	PowerDays(ctx context.Context, machineID, from string) ([]PowerDay, error)
	DeletePowerDaysBefore(ctx context.Context, day string) (int, error)
	PutPowerSummaries(ctx context.Context, days []PowerDay) error
	PowerSummaries(ctx context.Context, machineID, from string) ([]PowerDay, error)
	DeletePowerSummariesBefore(ctx context.Context, day string) (int, error)
	DeleteTelemetry(ctx context.Context, machineID string) error
}

// FenceStore keeps fences: named values that conditional writes check.
// An instance that owns a job sets the job's fence to its own name and
// makes every write of that job under WithFence(ctx, key, value); once the
// fence holds another value (another instance took the job over) those
// writes fail with ErrFenced and write nothing, so an owner that paused
// past its turn cannot write late.
//
// An implementation MUST:
//   - make SwapFence set key to value only while it holds old ("" =
//     absent), in one atomic step, else fail with ErrStale naming what it
//     holds; value "" removes the fence;
//   - return from Fence the value a fence holds, "" when it has none;
//   - check every fence in the context (Fences) in the same atomic step as
//     every write of the other contracts except leases (PutLease and
//     DeleteLease answer DHCP, not jobs) and SwapFence itself, failing with
//     ErrFenced, naming the fence, and writing nothing when one does not
//     hold its value.
type FenceStore interface {
	SwapFence(ctx context.Context, key, old, value string) error
	Fence(ctx context.Context, key string) (string, error)
}

// Maintainer is what operators and serve ask of a backend as a whole.
//
// An implementation MUST:
//   - make Backup write a consistent copy while the store serves, holding
//     every write that returned before Backup started, in the portable
//     backup format (a bbolt file of pkg/store/bolt's layout, which every
//     backend's Restore reads); it MUST NOT block writers for longer than
//     it takes to take a snapshot, and copies secrets sealed (the key is
//     never in a store);
//   - make Check read every record and return every problem found, joined,
//     each naming where it is (ErrDamaged), or nil;
//   - make Location name the store as a URL without credentials, for logs;
//   - make Stats cheap (it runs at every /metrics scrape) and return the
//     same names every time.
type Maintainer interface {
	Backup(ctx context.Context, w io.Writer) (int64, error)
	Check(ctx context.Context) error
	Location() string
	Stats() []Stat
}

// Stat is one number a backend reports about itself (pkg/serve exports
// them as ingot_store_NAME).
type Stat struct {
	Name    string // snake_case, unique within the backend
	Help    string
	Value   float64
	Counter bool // only grows; else a gauge
}

// Store is everything ingot persists: every contract above, and Close.
// Close releases the backend; it MUST be safe to call twice, and every
// other method MUST fail with ErrClosed after it.
type Store interface {
	MachineStore
	InventoryStore
	EventStore
	LeaseStore
	JobStore
	TokenStore
	SecretStore
	TelemetryStore
	FenceStore
	Maintainer
	Close() error
}
