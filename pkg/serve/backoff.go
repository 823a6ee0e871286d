package serve

import (
	"context"
	"time"
)

// Clock is the time a Supervisor decides by; tests pass a fast or fake one.
type Clock interface {
	Now() time.Time
	// After MUST send once, d after it was called (as time.After).
	After(d time.Duration) <-chan time.Time
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Backoff is how long a supervisor waits before starting a stopped service
// again: Initial after its first stop within the window, doubling with
// each further stop, never more than Max.
type Backoff struct {
	Initial, Max time.Duration
}

// Delay is the wait after the n-th recent stop (n >= 1).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// recentStops drops the stops older than window before now.
func recentStops(stops []time.Time, now time.Time, window time.Duration) []time.Time {
	kept := stops[:0]
	for _, t := range stops {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	return kept
}

// sleep waits d on c; false when ctx ended first.
func sleep(ctx context.Context, c Clock, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.After(d):
		return true
	}
}
