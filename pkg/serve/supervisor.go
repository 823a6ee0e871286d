package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
)

// Supervisor runs every service of the process until its ctx ends, starts
// again a service that stops, and stops them all when one must not go on.
//
// A service that stops while serving (Run returns before ctx ends) is
// logged (service=, err=) and started again after a Backoff delay. The
// supervisor instead stops every service and returns a *StoppedError
// naming it when the service is Critical or has stopped more than
// MaxFailures times within Window: the process then exits rather than run
// with a dead service. On shutdown it cancels every Run and waits up to
// DrainTimeout for all of them to return, and logs and reports any that
// did not.
type Supervisor struct {
	Services []Service
	Logger   *slog.Logger // nil: silent
	Backoff  Backoff      // zero: 1s, doubling to 1m
	// MaxFailures is how many stops within Window a restartable service
	// may have; one more stops the process. 0: 5.
	MaxFailures int
	Window      time.Duration // 0: 10m
	// DrainTimeout bounds the wait for every Run to return once shutdown
	// begins. 0: 15s (the HTTP service drains its requests for 10s).
	DrainTimeout time.Duration
	Clock        Clock // nil: the wall clock
}

// outcome is how one service's keep loop ended.
type outcome struct {
	name  string
	err   error
	fatal bool // err must stop the process
}

// Run starts every service and supervises them until ctx ends or one of
// them must stop the process, then shuts all of them down. It returns nil
// after a clean shutdown; else the *StoppedError that ended it, joined
// with failed shutdowns and services that did not drain.
func (s Supervisor) Run(ctx context.Context) error {
	s = s.withDefaults()
	pending, err := serviceNames(s.Services)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan outcome, len(s.Services))
	for _, svc := range s.Services {
		go func() { out <- s.keep(ctx, svc) }()
	}
	errs := collect(out, pending, ctx.Done(), true)
	cancel()
	errs = append(errs, collect(out, pending, s.Clock.After(s.DrainTimeout), false)...)
	errs = append(errs, s.undrained(pending))
	return errors.Join(errs...)
}

func (s Supervisor) withDefaults() Supervisor {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Backoff == (Backoff{}) {
		s.Backoff = Backoff{Initial: time.Second, Max: time.Minute}
	}
	if s.MaxFailures == 0 {
		s.MaxFailures = 5
	}
	if s.Window == 0 {
		s.Window = 10 * time.Minute
	}
	if s.DrainTimeout == 0 {
		s.DrainTimeout = 15 * time.Second
	}
	if s.Clock == nil {
		s.Clock = realClock{}
	}
	return s
}

// serviceNames is the set of the services' names, each of which must be
// given and unique (they key the logs).
func serviceNames(svcs []Service) (map[string]bool, error) {
	names := make(map[string]bool, len(svcs))
	for _, svc := range svcs {
		n := svc.Name()
		if n == "" || names[n] {
			return nil, fmt.Errorf("supervisor: service name %q is empty or used twice: give each service its own name", n)
		}
		names[n] = true
	}
	return names, nil
}

// keep runs svc until ctx ends, starting it again after each stop, and
// returns how it ended; fatal when its stop must end the process.
func (s Supervisor) keep(ctx context.Context, svc Service) outcome {
	log := s.Logger.With("service", svc.Name())
	var stops []time.Time
	for {
		err := runOnce(ctx, svc)
		if ctx.Err() != nil {
			return shutdownOutcome(log, svc.Name(), err)
		}
		if err == nil {
			err = ErrStopped
		}
		now := s.Clock.Now()
		stops = append(recentStops(stops, now, s.Window), now)
		if stop := s.verdict(svc, err, len(stops)); stop != nil {
			log.Error("service stopped; stopping ingot", "err", err, "stops", len(stops), "critical", isCritical(svc))
			return outcome{name: svc.Name(), err: stop, fatal: true}
		}
		delay := s.Backoff.Delay(len(stops))
		log.Error("service stopped; restarting it", "err", err, "stops", len(stops), "backoff", delay)
		if !sleep(ctx, s.Clock, delay) {
			return outcome{name: svc.Name()}
		}
	}
}

// runOnce runs svc once, with a ctx that ends when this Run returns.
func runOnce(ctx context.Context, svc Service) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return svc.Run(ctx)
}

// verdict is the error that stops the process after svc's stops-th recent
// stop, or nil when svc is to be started again.
func (s Supervisor) verdict(svc Service, err error, stops int) error {
	if !isCritical(svc) && stops <= s.MaxFailures {
		return nil
	}
	return &StoppedError{Service: svc.Name(), Err: err, Critical: isCritical(svc), Failures: stops, Window: s.Window}
}

// shutdownOutcome reports a Run that returned after shutdown began.
func shutdownOutcome(log *slog.Logger, name string, err error) outcome {
	if err == nil {
		log.Info("service stopped")
		return outcome{name: name}
	}
	log.Warn("service failed to shut down cleanly", "err", err)
	return outcome{name: name, err: fmt.Errorf("%s: shutting down: %w", name, err)}
}

// collect gathers outcomes into errors until stop fires or, when waiting
// for a fatal one, it arrives; otherwise until no service is pending.
func collect[T any](out <-chan outcome, pending map[string]bool, stop <-chan T, untilFatal bool) []error {
	var errs []error
	for untilFatal || len(pending) > 0 {
		select {
		case <-stop:
			return errs
		case o := <-out:
			delete(pending, o.name)
			if o.err != nil {
				errs = append(errs, o.err)
			}
			if o.fatal && untilFatal {
				return errs
			}
		}
	}
	return errs
}

// undrained logs each service whose Run has not returned since shutdown
// began and returns an error naming them; nil when none.
func (s Supervisor) undrained(pending map[string]bool) error {
	if len(pending) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(pending))
	for _, n := range names {
		s.Logger.Error("service did not stop within the drain timeout; leaving it behind", "service", n, "timeout", s.DrainTimeout)
	}
	return fmt.Errorf("services %s did not stop within %s of shutdown", strings.Join(names, ", "), s.DrainTimeout)
}
