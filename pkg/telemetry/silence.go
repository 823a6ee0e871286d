package telemetry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Silences and the recently cleared alerts: the smallest rules an
// operator's dashboard needs beside the alert rules themselves.
//
// A silence is an operator's word that one machine's alert of one rule is
// known and being handled: until it ends the alert is listed with who
// silenced it, and its transitions (fired, cleared) are not delivered to
// the notifiers (webhook, Alertmanager). The machine's event log still
// records them: a silence mutes the pager, never the history. Silences
// live in memory: a restart ends them (the alert then notifies again,
// which errs on the side of being heard).

// Silence is one operator silence.
type Silence struct {
	Machine string    `json:"machine"` // machine ID
	Rule    string    `json:"rule"`
	Actor   string    `json:"actor"`
	Reason  string    `json:"reason,omitempty"`
	Created time.Time `json:"created"`
	Until   time.Time `json:"until"`
}

// MaxSilence is the longest one silence may last: a forgotten silence
// must not hide a node for good.
const MaxSilence = 7 * 24 * time.Hour

// keptCleared is how many cleared alerts Cleared remembers.
const keptCleared = 100

// ErrSilence: the silence asked for is malformed (an unknown rule, a
// length of 0 or over MaxSilence). The message names the field.
var ErrSilence = errors.New("invalid silence")

func silenceKey(machineID, rule string) string { return machineID + "\x00" + rule }

// Silence mutes machineID's alert of rule for d (at most MaxSilence),
// replacing an earlier silence of the same alert, records who and why as
// an alert.silenced event on the machine (Config.Note), and returns it.
// The dashboard and the API both come here: one rule for both.
func (s *Service) Silence(ctx context.Context, machineID, rule string, d time.Duration, actor, reason string) (Silence, error) {
	if !slices.Contains(RuleNames(), rule) {
		return Silence{}, fmt.Errorf("%w: rule %q: expected one of %s", ErrSilence, rule, strings.Join(RuleNames(), ", "))
	}
	if d <= 0 || d > MaxSilence {
		return Silence{}, fmt.Errorf("%w: duration %s: expected more than 0 and at most %s", ErrSilence, d, MaxSilence)
	}
	if machineID == "" {
		return Silence{}, fmt.Errorf("%w: machine: expected a machine ID", ErrSilence)
	}
	now := s.cfg.Now()
	sl := Silence{Machine: machineID, Rule: rule, Actor: actor, Reason: reason, Created: now, Until: now.Add(d)}
	s.mu.Lock()
	if s.silences == nil {
		s.silences = map[string]Silence{}
	}
	s.silences[silenceKey(machineID, rule)] = sl
	s.mu.Unlock()
	if s.cfg.Note != nil {
		msg := fmt.Sprintf("alert %s silenced until %s", sl.Rule, sl.Until.UTC().Format(time.RFC3339))
		if reason != "" {
			msg += ": " + reason
		}
		s.cfg.Note(ctx, machineID, "alert.silenced", actor, msg)
	}
	return sl, nil
}

// Silences lists the silences in force, soonest to end first.
func (s *Service) Silences() []Silence {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Silence
	for k, sl := range s.silences {
		if !now.Before(sl.Until) {
			delete(s.silences, k)
			continue
		}
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b Silence) int { return a.Until.Compare(b.Until) })
	return out
}

// silencedLocked returns the silence in force on an alert (s.mu held).
func (s *Service) silencedLocked(machineID, rule string, now time.Time) (Silence, bool) {
	sl, ok := s.silences[silenceKey(machineID, rule)]
	return sl, ok && now.Before(sl.Until)
}

// Cleared is an alert that cleared: what it read when it fired and when.
type Cleared struct {
	Alert
	ClearedAt time.Time `json:"cleared_at"`
}

// noteClearedLocked remembers a cleared alert (s.mu held).
func (s *Service) noteClearedLocked(a Alert, at time.Time) {
	s.cleared = append(s.cleared, Cleared{Alert: a, ClearedAt: at})
	if len(s.cleared) > keptCleared {
		s.cleared = slices.Delete(s.cleared, 0, len(s.cleared)-keptCleared)
	}
}

// RecentlyCleared lists the last alerts that cleared since serve started
// (at most 100), newest first. The machines' event logs keep them all.
func (s *Service) RecentlyCleared() []Cleared {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.cleared)
	slices.Reverse(out)
	return out
}
