package telemetry

import (
	"context"
)

// A service alert is about what ingot runs on, not about a machine: the
// etcd cluster nearing its quota is one. It is listed with the machines'
// alerts (Alerts: Machine empty, Name what it concerns), so `ingot alerts`,
// the dashboard and the notifiers see it, and it cleared is remembered as
// theirs are. Operators cannot silence it per machine; the notifiers'
// own routing can.

// SetServiceAlert fires a (State Firing, FiredAt now) or clears the
// service alert a.Rule; the change is delivered to every notifier. Setting
// what is already so delivers nothing; a firing alert set firing again
// takes the new summary (which recipes differ, how full the store is).
func (s *Service) SetServiceAlert(ctx context.Context, a Alert, firing bool) {
	now := s.cfg.Now()
	a.Machine = ""
	s.mu.Lock()
	if s.services == nil {
		s.services = map[string]Alert{}
	}
	old, was := s.services[a.Rule]
	switch {
	case firing && was:
		// Still firing: what it says may have changed (which recipes
		// differ); it is the same alert, nobody is told again.
		a.State, a.Since, a.FiredAt = Firing, old.Since, old.FiredAt
		s.services[a.Rule] = a
		s.mu.Unlock()
		return
	case !firing && !was:
		s.mu.Unlock()
		return
	case firing:
		a.State, a.Since, a.FiredAt = Firing, now, now
		s.services[a.Rule] = a
	default:
		a.State, a.Since, a.FiredAt = Firing, old.Since, old.FiredAt
		delete(s.services, a.Rule)
		s.noteClearedLocked(a, now)
	}
	s.mu.Unlock()
	tr := Transition{Alert: a, Fired: firing}
	s.cfg.Logger.Info("telemetry service alert", "name", a.Name, "rule", a.Rule, "fired", firing, "reading", a.Reading)
	for _, nt := range s.cfg.Notify {
		go func() {
			if err := nt.Notify(context.WithoutCancel(ctx), tr); err != nil {
				s.cfg.Logger.Warn("telemetry: alert not delivered", "to", nt.Name(), "rule", a.Rule, "name", a.Name, "err", err)
			}
		}()
	}
}
