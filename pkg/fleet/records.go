package fleet

import "github.com/ingot-dev/ingot/pkg/store"

// The records the fleet hands out are the store's: the API and other
// transports name them through the fleet and never import the store.
type (
	// Filter selects machines in List; zero fields match all.
	Filter = store.MachineFilter
	// Snapshot is one kept inventory of a machine.
	Snapshot = store.Snapshot
	// Token is an operator token as stored (its Hash left out of lists).
	Token = store.Token
)

// The store's errors the fleet's answers wrap, for errors.Is in
// transports: ErrNotFound (no such record), ErrExists (a name taken),
// ErrConflict (a MAC, serial or endpoint owned by another machine),
// ErrStale (the record changed since the revision the caller read).
var (
	ErrNotFound = store.ErrNotFound
	ErrExists   = store.ErrExists
	ErrConflict = store.ErrConflict
	ErrStale    = store.ErrStale
)
