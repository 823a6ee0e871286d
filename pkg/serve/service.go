package serve

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Service is one long-running part of the process (a listener, the engine,
// a poller), run by a Supervisor.
//
// Name MUST be short, stable and unique within a supervisor: it is the
// service= key of every log line about the service and names it in errors.
//
// Run MUST block until ctx ends, then release what it holds and return;
// an error returned after ctx ended is a failed shutdown and is reported,
// nothing more. Returning before ctx ends, with an error or with nil,
// means the service stopped: the supervisor logs it and either starts Run
// again after a backoff (the default) or, for a service marked Critical
// or one that stopped too often, stops every service and returns an error
// naming it. So Run MUST be safe to call again after it returned, unless
// the service is Critical. Each call gets its own ctx, cancelled as soon
// as that call returns, so goroutines it left behind are told to stop.
type Service interface {
	Name() string
	Run(ctx context.Context) error
}

// ErrStopped is what a supervisor records for a service whose Run returned
// nil while the process was still serving.
var ErrStopped = errors.New("stopped while serving (Run returned nil before shutdown)")

// ServiceFunc adapts a run function to a Service named name; the service
// restarts when it stops, unless wrapped in Critical.
func ServiceFunc(name string, run func(ctx context.Context) error) Service {
	return funcService{name: name, run: run}
}

type funcService struct {
	name string
	run  func(ctx context.Context) error
}

func (f funcService) Name() string                  { return f.name }
func (f funcService) Run(ctx context.Context) error { return f.run(ctx) }

// Critical marks s fatal on failure: when it stops while serving, the
// supervisor stops the whole process with its error instead of restarting
// it. Use it for what cannot safely start again, such as a listener whose
// socket was bound once before anything served.
func Critical(s Service) Service { return critical{s} }

type critical struct{ Service }

func (critical) critical() {}

// isCritical reports whether s was marked with Critical.
func isCritical(s Service) bool {
	_, ok := s.(interface{ critical() })
	return ok
}

// StoppedError is what a Supervisor returns when a service's stop ended
// the process: a Critical service stopped, or one stopped more than the
// supervisor's MaxFailures times within its Window.
type StoppedError struct {
	Service  string
	Err      error // the last error (ErrStopped for a nil return)
	Critical bool
	Failures int           // stops within Window, this one included
	Window   time.Duration // the supervisor's Window
}

func (e *StoppedError) Error() string {
	if e.Critical {
		return fmt.Sprintf("service %s stopped and is critical, so ingot stops: %v", e.Service, e.Err)
	}
	return fmt.Sprintf("service %s stopped %d times within %s, so ingot stops: last error: %v", e.Service, e.Failures, e.Window, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }
