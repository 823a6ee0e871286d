package store

import (
	"io"
	"log/slog"
	"time"
)

// Options configure a store (Open, OpenURL). The zero value is usable.
// History and Now bind every backend (the conformance suite sets them);
// Timeout and BatchDelay are bbolt's.
type Options struct {
	// Timeout is how long Open waits for the file lock held by another
	// process before failing with ErrLocked. Default 5s.
	Timeout time.Duration
	// History is how many inventory snapshots are kept per machine. Default 20.
	History int
	// MaxEvents is how many events are kept per machine: an append past it
	// drops the oldest in the same write (EventStore). Default
	// DefaultMaxEvents. It bounds what a flood of events (refused
	// credentials from an attacker's address, say) can add to the store
	// and to every backup.
	MaxEvents int
	// Logger receives migration and slow-path messages. Default: discard.
	Logger *slog.Logger
	// Now is the clock stamped on records. Default time.Now.
	Now func() time.Time
	// BatchDelay is how long AppendEvent's group commit (bbolt Batch) waits
	// for more writers before it starts. Default: bbolt's 10ms. A lone
	// writer pays it on every call; 64 concurrent writers share one fsync.
	// (Leases have their own group commit without a timer: the lease log.)
	BatchDelay time.Duration
}

// DefaultMaxEvents is Options.MaxEvents when unset: a machine's lifetime of
// reimages (a few dozen events each) with room to spare, about 2 MB of a
// store at most per machine.
const DefaultMaxEvents = 5000

// WithDefaults fills in the defaults of the fields left zero.
func (o Options) WithDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.History <= 0 {
		o.History = 20
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
