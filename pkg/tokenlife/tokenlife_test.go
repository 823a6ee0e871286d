package tokenlife

import (
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

func TestLifetime(t *testing.T) {
	for name, c := range map[string]struct {
		p    Policy
		ttl  time.Duration
		want time.Duration
		err  string
	}{
		"default":                  {Policy{Default: 90 * day}, 0, 90 * day, ""},
		"asked for":                {Policy{Default: 90 * day}, 30 * day, 30 * day, ""},
		"exactly the maximum":      {Policy{Default: 90 * day}, DefaultMax, DefaultMax, ""},
		"100 years":                {Policy{Default: 90 * day}, 100 * 365 * day, 0, "at most 8760h0m0s (365 days) is allowed"},
		"over a lowered maximum":   {Policy{Default: 90 * day, Max: 7 * day}, 8 * day, 0, "at most 168h0m0s (7 days)"},
		"default over a maximum":   {Policy{Default: 90 * day, Max: 7 * day}, 0, 7 * day, ""},
		"negative":                 {Policy{Default: 90 * day}, -time.Hour, 0, "expected a positive lifetime"},
		"a maximum of 0 is 1 year": {Policy{Default: 90 * day, Max: 0}, 366 * day, 0, "at most 8760h0m0s"},
	} {
		got, err := c.p.Lifetime(c.ttl)
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) || c.err == "" && (err != nil || got != c.want) {
			t.Errorf("%s: Lifetime(%s) = %s, %v; want %s, error %q", name, c.ttl, got, err, c.want, c.err)
		}
	}
}

func TestEnds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Policy{Default: 90 * day}
	for name, c := range map[string]struct {
		created, expires, now time.Time
		ended                 bool
	}{
		"before its expiry":                {t0, t0.Add(30 * day), t0.Add(29 * day), false},
		"after its expiry":                 {t0, t0.Add(30 * day), t0.Add(31 * day), true},
		"a 100-year token after 1 year":    {t0, t0.Add(100 * 365 * day), t0.Add(366 * day), true},
		"a 100-year token within the year": {t0, t0.Add(100 * 365 * day), t0.Add(364 * day), false},
		"no expiry, after the maximum":     {t0, time.Time{}, t0.Add(366 * day), true},
		"no creation time: its expiry":     {time.Time{}, t0.Add(30 * day), t0.Add(31 * day), true},
		"neither: never":                   {time.Time{}, time.Time{}, t0.Add(10000 * day), false},
	} {
		if got := p.Ended(c.created, c.expires, c.now); got != c.ended {
			t.Errorf("%s: Ended = %v, want %v (ends at %s)", name, got, c.ended, p.EndsAt(c.created, c.expires))
		}
	}
}
