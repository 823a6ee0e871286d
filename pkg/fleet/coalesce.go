package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Repeated security events are coalesced: the fleet is the one writer of
// events, and an attacker replaying a stolen credential (or a telemetry
// poll refused a secret, every poll) repeats the same event as fast as it
// is let. The first event of a run is written as it comes; its repeats
// within the window (same machine, kind, actor, message and fields) are
// only counted, in memory, and one summary event is written when the
// window ends: the message with "(repeated N more times ...)" and the
// fields repeats, first and last. A run that keeps repeating gets one
// summary per window and no second first event; one that stops is
// forgotten after a quiet window. Counts not yet written are lost if the
// process dies (the first event of each run is always written); they are
// written at a clean stop (RunEvents).

// Coalescing defaults.
const (
	DefaultEventWindow = 10 * time.Minute
	maxRuns            = 4096 // runs held at once; events past it are written as they come
)

// coalesced reports whether events of this kind are coalesced.
func coalesced(ev machine.Event) bool { return ev.Kind == "security" }

type coalescer struct {
	mu     sync.Mutex
	window time.Duration
	runs   map[string]*run
}

// run is one repeating event: the first of it, as written, and the
// repeats of the current window.
type run struct {
	first   machine.Event
	start   time.Time // the first event's time
	last    time.Time // the latest repeat's
	repeats int       // counted in this window, not yet written
	total   int       // repeats since the first event, summaries included
	until   time.Time // the window's end
}

func newCoalescer(window time.Duration) *coalescer {
	if window <= 0 {
		window = DefaultEventWindow
	}
	return &coalescer{window: window, runs: map[string]*run{}}
}

// admit takes ev, seen at now: write is whether to write it (the first of
// its run, or past the cap on runs); due are the summaries of windows that
// ended, to write as well.
func (c *coalescer) admit(ev machine.Event, now time.Time) (write bool, due []machine.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	due = c.dueLocked(now, false)
	k := runKey(ev)
	if r, ok := c.runs[k]; ok {
		r.repeats++
		r.total++
		r.last = now
		return false, due
	}
	if len(c.runs) >= maxRuns {
		return true, due
	}
	c.runs[k] = &run{first: ev, start: now, last: now, until: now.Add(c.window)}
	return true, due
}

// due returns the summaries of the windows ended at now (all: every run
// with repeats, as at a stop), and forgets runs that went quiet.
func (c *coalescer) due(now time.Time, all bool) []machine.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dueLocked(now, all)
}

func (c *coalescer) dueLocked(now time.Time, all bool) []machine.Event {
	var out []machine.Event
	for k, r := range c.runs {
		if !all && now.Before(r.until) {
			continue
		}
		if r.repeats == 0 {
			delete(c.runs, k)
			continue
		}
		out = append(out, r.summary())
		r.repeats, r.until = 0, now.Add(c.window)
	}
	slices.SortFunc(out, func(a, b machine.Event) int { return a.Time.Compare(b.Time) })
	return out
}

// summary is the event that stands for the run's repeats of this window.
func (r *run) summary() machine.Event {
	ev := r.first
	ev.Seq, ev.Time = 0, r.last
	ev.Fields = maps.Clone(r.first.Fields)
	if ev.Fields == nil {
		ev.Fields = map[string]string{}
	}
	ev.Fields["repeats"] = strconv.Itoa(r.repeats)
	ev.Fields["first"] = r.start.UTC().Format(time.RFC3339)
	ev.Fields["last"] = r.last.UTC().Format(time.RFC3339)
	ev.Message = fmt.Sprintf("%s (repeated %d more times, %d since the first at %s, the last at %s)", r.first.Message,
		r.repeats, r.total, ev.Fields["first"], ev.Fields["last"])
	return ev
}

// runKey is what makes two events repeats of one another.
func runKey(ev machine.Event) string {
	var b strings.Builder
	for _, s := range []string{ev.Machine, ev.Kind, ev.Actor, string(ev.From), string(ev.To), ev.Message} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	for _, k := range slices.Sorted(maps.Keys(ev.Fields)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(ev.Fields[k])
		b.WriteByte(0)
	}
	return b.String()
}

// RunEvents writes the summaries of coalesced events as their windows end,
// and every pending one when ctx ends (a service of serve's supervisor).
func (s *Service) RunEvents(ctx context.Context) error {
	t := time.NewTicker(max(s.coal.window/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.FlushEvents(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
			s.append(ctx, s.coal.due(s.now(), false))
		}
	}
}

// FlushEvents writes the summary of every coalesced run with repeats not
// yet written.
func (s *Service) FlushEvents(ctx context.Context) {
	s.append(ctx, s.coal.due(s.now(), true))
}
