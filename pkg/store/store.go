// Package store persists machines, inventory snapshots, events, DHCP leases,
// jobs and API tokens. The Store interface is what ingot's other packages use;
// it is made of one contract per record type (MachineStore, InventoryStore,
// EventStore, LeaseStore, JobStore, TokenStore, in contract.go), each saying
// what a backend MUST and SHOULD do. The rules a backend applies rather than
// stores (IDs, normalization, unique keys, sequence numbers, history
// trimming, revisions, lease liveness) are plain functions in rules*.go, and
// storetest.Run is the conformance suite every backend passes.
//
// Open returns the embedded bbolt implementation (one file); OpenURL picks a
// backend by URL. An etcd implementation can stand beside it behind the
// same interface.
//
// Consumers should declare the narrower interface they need (for example the
// DHCP server needs only the lease and machine-lookup methods) and accept a
// Store wherever one is wired in cmd/.
//
// # bbolt layout
//
// Top-level buckets of the file (values are JSON unless noted):
//
//	meta                 "schema" -> big-endian uint64 schema version
//	                     "lease_log_applied" -> last lease log segment applied
//	machines             machine ID -> Machine
//	machine_rev          machine ID -> big-endian uint64 revision; the
//	                     bucket's sequence is the last revision handed out
//	                     (added by schema v3)
//	idx_mac              normalized MAC -> machine ID
//	idx_serial           serial -> machine ID
//	idx_bmc              normalized BMC endpoint -> machine ID
//	idx_name             name -> machine ID (added by schema v2)
//	inventory/<ID>       nested bucket per machine: big-endian seq -> Snapshot
//	events/<ID>          nested bucket per machine: big-endian seq -> Event
//	leases               MAC -> Lease
//	idx_lease_ip         IP -> MAC
//	jobs                 job ID -> Job; the bucket's sequence is the last
//	                     job revision handed out (schema v3)
//	tokens               hex sha256 of the secret -> Token
//
// Indexes are written in the same transaction as the record they point to.
// Open runs pending schema migrations in one transaction and refuses a file
// written by a newer ingot.
//
// # Crash safety
//
// Every write is one bbolt transaction that is fsynced before the method
// returns (group-committed with db.Batch for AppendEvent), except leases:
// a DHCP ACK waits for its lease, so lease writes are appended to a log
// beside the file (<db>.lease-log.N, one fdatasync per round of concurrent
// writers) and applied to bbolt in the background; Open replays what a
// killed process left (leaselog.go). A write whose method returned nil
// survives the process being killed at any moment, and the file stays
// consistent (TestCrashSafety kills a writer with SIGKILL and checks both).
// Durability across power loss rests on the disk honouring fsync. A copy
// of the database file taken while ingot runs lacks the leases still in
// the log: back up with the server stopped, or copy the log files first
// and the database file after them (a segment applied and deleted in
// between is then in the copied database).
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Sentinel errors. Test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrConflict = errors.New("conflict") // e.g. a MAC or IP already belongs to another record
	ErrClosed   = errors.New("store is closed")
	// ErrLocked: another process holds the database file open.
	ErrLocked = errors.New("database is locked by another ingot process")
	// ErrSchema: the file's schema is newer than this binary, or a migration failed.
	ErrSchema = errors.New("incompatible schema")
	// ErrSchemaNewer: the store was written by a newer ingot (a newer
	// schema); errors.Is(err, ErrSchema) also holds. No retry fixes it:
	// run the newer ingot, or restore the backup the error names.
	ErrSchemaNewer = fmt.Errorf("%w: written by a newer ingot", ErrSchema)
	// ErrStale: a conditional write (UpdateMachineRev, UpdateJobRev) named
	// a revision the record no longer has; read it again and retry.
	// errors.Is(err, ErrConflict) also holds.
	ErrStale = fmt.Errorf("revision is stale: %w", ErrConflict)
	// ErrDamaged: the backend's data is damaged (a truncated file, pages
	// that do not hold what was written). The error names what is damaged
	// and where; the way out is a backup (ingot admin restore).
	ErrDamaged = errors.New("stored data is damaged")
)

// Lease is one DHCP lease.
type Lease struct {
	MAC       string     `json:"mac"` // normalized, lower-case colon form
	IP        netip.Addr `json:"ip"`
	Hostname  string     `json:"hostname,omitempty"`
	MachineID string     `json:"machine_id,omitempty"`
	Subnet    string     `json:"subnet,omitempty"` // CIDR of the pool it came from
	Expires   time.Time  `json:"expires"`
	State     string     `json:"state"` // LeaseOffered, LeaseBound, LeaseReleased, LeaseDeclined
	Updated   time.Time  `json:"updated"`
}

// JobState is where a job stands.
type JobState string

// Job states.
const (
	JobPending   JobState = "pending"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Job is persisted work that survives a restart: a reimage, a rollout wave.
type Job struct {
	ID       string          `json:"id"`
	Kind     string          `json:"kind"` // "reimage", "rollout", "inspect"
	Machines []string        `json:"machines,omitempty"`
	State    JobState        `json:"state"`
	Step     string          `json:"step,omitempty"`
	Attempt  int             `json:"attempt,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Spec     json.RawMessage `json:"spec,omitempty"`   // kind-specific input
	Status   json.RawMessage `json:"status,omitempty"` // kind-specific progress
	Created  time.Time       `json:"created"`
	Updated  time.Time       `json:"updated"`
	Deadline time.Time       `json:"deadline,omitempty"` // of the current step
	// Revision is set by the store on every write (see JobStore); a value
	// the caller sets is ignored.
	Revision uint64 `json:"revision"`
}

// Snapshot is one stored inventory of a machine.
type Snapshot struct {
	Seq       uint64            `json:"seq"`
	MachineID string            `json:"machine_id"`
	Taken     time.Time         `json:"taken"`
	Inventory machine.Inventory `json:"inventory"`
}

// Token is an API bearer token. Only its SHA-256 is stored.
type Token struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Hash    string    `json:"hash"`             // hex sha256 of the secret
	Scope   string    `json:"scope"`            // "operator" or "machine:<id>"
	JobID   string    `json:"job_id,omitempty"` // machine tokens expire with their job
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitempty"`
	Revoked bool      `json:"revoked,omitempty"`
	// Kind of a machine credential (pkg/agentauth): "boot" (in the iPXE
	// script, good only for the exchange), "agent" (job-scoped, bound to
	// Address), "firstboot" (the installed OS's one report). "" for
	// operator tokens.
	Kind string `json:"kind,omitempty"`
	// Address is the IP the credential is bound to (its machine's).
	Address string `json:"address,omitempty"`
	// Parent is the ID of the boot credential an agent credential was
	// exchanged for.
	Parent string `json:"parent,omitempty"`
}

// TokenFilter selects tokens in FindTokens: every field set must match.
type TokenFilter struct {
	Scope string // "operator", "machine:ID", ...
	JobID string
}

// MachineFilter selects machines in List; zero fields match all.
type MachineFilter struct {
	Recipe string
	State  machine.State
	Rack   string
	// After and Limit page the list (in name order): only machines whose
	// name sorts after After, at most Limit of them (0: all).
	After string
	Limit int
}

// Secret is a sealed secret: Sealed is pkg/secret's ciphertext, KeyID the
// key that sealed it, Endpoints the BMC endpoints it may be sent to (none:
// not bound yet; pkg/fleet binds it at its first use).
type Secret struct {
	Name      string          `json:"name"`
	KeyID     string          `json:"key_id"`
	Sealed    []byte          `json:"sealed"`
	Created   time.Time       `json:"created"`
	Updated   time.Time       `json:"updated"`
	Endpoints []SecretBinding `json:"endpoints,omitempty"`
}

// SecretBinding is one endpoint a secret may be sent to, and who bound it
// when: an operator ("operator:alice") or its first use ("first use by
// node-1").
type SecretBinding struct {
	Endpoint string    `json:"endpoint"` // an origin: credential.Origin's form
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// BoundTo reports whether the secret may be sent to origin.
func (s *Secret) BoundTo(origin string) bool {
	for _, b := range s.Endpoints {
		if b.Endpoint == origin {
			return true
		}
	}
	return false
}

// NodeTelemetry is one machine's telemetry state, in telemetry's encoding.
type NodeTelemetry struct {
	Machine string
	State   []byte
}

// PowerDay is one machine's aggregates of one day ("2006-01-02").
type PowerDay struct {
	Machine string
	Day     string
	Buckets []byte
}
