// Package tokenlife decides how long an operator token may live: the
// lifetime a new token gets from what its creator asked, bounded by a
// maximum (a 100-year token is refused), and when a stored token ends,
// which the maximum bounds too for tokens made before it was set.
package tokenlife

import (
	"fmt"
	"time"
)

// DefaultMax is the longest a token may live unless the server is told
// otherwise (serve --token-max-ttl).
const DefaultMax = 365 * 24 * time.Hour

// Policy bounds token lifetimes. Default is the lifetime of a token whose
// creator names none; Max the longest any token may live (0: DefaultMax).
type Policy struct {
	Default, Max time.Duration
}

func (p Policy) max() time.Duration {
	if p.Max <= 0 {
		return DefaultMax
	}
	return p.Max
}

// Lifetime is the lifetime a new token gets when its creator asks for ttl:
// ttl itself, or Default (held to Max) for 0. A negative ttl, or one over
// Max, is refused with an error naming the limit.
func (p Policy) Lifetime(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl < 0:
		return 0, fmt.Errorf("token lifetime %s: expected a positive lifetime, or 0 for the default %s", ttl, min(p.Default, p.max()))
	case ttl == 0:
		return min(p.Default, p.max()), nil
	case ttl > p.max():
		return 0, fmt.Errorf("token lifetime %s: at most %s (%.0f days) is allowed; ask for less, or raise the server's --token-max-ttl",
			ttl, p.max(), p.max().Hours()/24)
	}
	return ttl, nil
}

// EndsAt is when a token created at created with expiry expires (zero:
// none) stops being accepted: its expiry or its creation plus Max,
// whichever comes first. A token without a creation time ends at its
// expiry (zero: never), as before there was a maximum.
func (p Policy) EndsAt(created, expires time.Time) time.Time {
	if created.IsZero() {
		return expires
	}
	end := created.Add(p.max())
	if !expires.IsZero() && expires.Before(end) {
		return expires
	}
	return end
}

// Ended reports whether such a token has ended at now.
func (p Policy) Ended(created, expires, now time.Time) bool {
	end := p.EndsAt(created, expires)
	return !end.IsZero() && now.After(end)
}
