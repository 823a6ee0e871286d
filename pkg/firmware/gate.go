package firmware

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Node is one machine of a campaign, as the gate sees it.
type Node struct {
	Name   string // the machine
	BMC    string // its BMC's endpoint: at most one update in flight per BMC
	Rack   string
	Recipe string
}

// Limits are a campaign's concurrency settings. Zero means no limit.
type Limits struct {
	PerRack int // updates in flight per rack
	Total   int // updates in flight in the whole campaign
	// Pause is the least time between two starts, anywhere: large image
	// pushes exhaust BMC memory and the management network when many
	// begin at once.
	Pause time.Duration
	// Windows are maintenance windows: a node whose rack or recipe some
	// window names starts only inside one of those; a node no window
	// names starts any time.
	Windows []Window
}

// Window is a recurring maintenance window.
type Window struct {
	Racks   []string       // the racks it covers (empty: not chosen by rack)
	Recipes []string       // the recipes it covers (empty: not chosen by recipe)
	Days    []time.Weekday // the days it opens (empty: every day)
	Start   time.Duration  // when it opens, after midnight in Location
	Length  time.Duration  // how long it stays open (at most 24h)
	// Location is the window's time zone; nil is UTC.
	Location *time.Location
}

func (w Window) covers(n Node) bool {
	if len(w.Racks) == 0 && len(w.Recipes) == 0 {
		return true
	}
	return slices.Contains(w.Racks, n.Rack) || slices.Contains(w.Recipes, n.Recipe)
}

// open reports whether t is inside the window and, if not, how long until
// it next opens (within 8 days).
func (w Window) open(t time.Time) (bool, time.Duration) {
	loc := w.Location
	if loc == nil {
		loc = time.UTC
	}
	t = t.In(loc)
	midnight := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	best := time.Duration(-1)
	for d := -1; d <= 8; d++ {
		day := midnight.AddDate(0, 0, d)
		if len(w.Days) > 0 && !slices.Contains(w.Days, day.Weekday()) {
			continue
		}
		from := day.Add(w.Start)
		to := from.Add(w.Length)
		if !t.Before(from) && t.Before(to) {
			return true, 0
		}
		if from.After(t) && (best < 0 || from.Sub(t) < best) {
			best = from.Sub(t)
		}
	}
	return false, best
}

func (l Limits) check() error {
	if l.PerRack < 0 || l.Total < 0 || l.Pause < 0 {
		return fmt.Errorf("firmware limits %+v: expected per-rack, total and pause >= 0", l)
	}
	for i, w := range l.Windows {
		if w.Length <= 0 || w.Length > 24*time.Hour || w.Start < 0 || w.Start >= 24*time.Hour {
			return fmt.Errorf("maintenance window %d: expected a start within the day and a length of up to 24h, found start %s length %s",
				i, w.Start, w.Length)
		}
	}
	return nil
}

// Gate decides when a node's update may start. It is pure state (no
// clock, no goroutines): the caller says what time it is. Safe for
// concurrent use.
type Gate struct {
	limits Limits

	mu        sync.Mutex
	bmcs      map[string]bool // BMCs with an update in flight
	racks     map[string]int  // updates in flight per rack
	total     int
	lastStart time.Time
}

// NewGate makes a gate for l.
func NewGate(l Limits) (*Gate, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	return &Gate{limits: l, bmcs: map[string]bool{}, racks: map[string]int{}}, nil
}

// ErrNoWindow means a node's windows never open (none on any day).
var ErrNoWindow = errors.New("no maintenance window opens for this node")

// Admit says whether n may start at now; if it may, it is counted in
// flight until Done. If not: the least wait before asking again (0 when
// only an update ending can free a place) and why.
func (g *Gate) Admit(now time.Time, n Node) (ok bool, wait time.Duration, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open, wait := g.window(now, n); !open {
		return false, wait, fmt.Sprintf("outside its maintenance windows (the next opens in %s)", wait.Round(time.Second))
	}
	switch {
	case g.bmcs[n.BMC]:
		return false, 0, "an update is in flight at its BMC " + n.BMC
	case g.limits.PerRack > 0 && g.racks[n.Rack] >= g.limits.PerRack:
		return false, 0, fmt.Sprintf("rack %s has %d updates in flight (limit %d)", n.Rack, g.racks[n.Rack], g.limits.PerRack)
	case g.limits.Total > 0 && g.total >= g.limits.Total:
		return false, 0, fmt.Sprintf("%d updates in flight (limit %d)", g.total, g.limits.Total)
	}
	if next := g.lastStart.Add(g.limits.Pause); !g.lastStart.IsZero() && now.Before(next) {
		return false, next.Sub(now), fmt.Sprintf("pausing %s between starts", g.limits.Pause)
	}
	g.bmcs[n.BMC] = true
	g.racks[n.Rack]++
	g.total++
	g.lastStart = now
	return true, 0, ""
}

// window reports whether n may start now by its maintenance windows.
// g.mu held.
func (g *Gate) window(now time.Time, n Node) (bool, time.Duration) {
	covered := false
	best := time.Duration(-1)
	for _, w := range g.limits.Windows {
		if !w.covers(n) {
			continue
		}
		covered = true
		open, wait := w.open(now)
		if open {
			return true, 0
		}
		if wait >= 0 && (best < 0 || wait < best) {
			best = wait
		}
	}
	if !covered {
		return true, 0
	}
	if best < 0 {
		best = 24 * time.Hour
	}
	return false, best
}

// Done ends n's update: its place is free.
func (g *Gate) Done(n Node) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.bmcs[n.BMC] {
		return
	}
	delete(g.bmcs, n.BMC)
	g.racks[n.Rack]--
	g.total--
}

// InFlight returns the updates in flight: in total, and per rack.
func (g *Gate) InFlight() (int, map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	racks := map[string]int{}
	for r, n := range g.racks {
		if n > 0 {
			racks[r] = n
		}
	}
	return g.total, racks
}
