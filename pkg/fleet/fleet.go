// Package fleet is the one owner of machine records: enrolment, recipe
// assignment, removal, inspection through the BMC, discovery and operator
// tokens. The API and the CLI carry requests to it and render its answers;
// none of them writes a machine record itself. Every change it makes leaves
// one event naming the actor and the reason.
//
// Errors: ErrInvalid (the request is malformed: names the field and what
// was expected), ErrBusy (the machine is in a running job: names the job),
// and the store's ErrNotFound, ErrExists and ErrConflict, wrapped with what
// was being done.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/tokenlife"
)

// Errors callers classify with errors.Is.
var (
	ErrInvalid = errors.New("invalid request")
	ErrBusy    = errors.New("machine is in a running job")
	ErrFull    = errors.New("too many discovered machines")
)

// RecipeSource returns a resolved, linted recipe by name.
type RecipeSource func(name string) (*recipe.Recipe, error)

// BMCReader is the part of a BMC session inspection needs.
type BMCReader interface {
	Inventory(ctx context.Context) (machine.Inventory, error)
	Close() error
}

// DialBMC opens a session to a machine's BMC with the credentials its
// reference names.
type DialBMC func(ctx context.Context, m *machine.Machine) (BMCReader, error)

// Config builds a Service.
type Config struct {
	Store   store.Store
	Recipes RecipeSource
	// DialBMC reads inventories for Inspect; nil: Inspect fails.
	DialBMC DialBMC
	Logger  *slog.Logger
	Now     func() time.Time
	// Credentials is where BMC credential references may point; an
	// enrolment naming anything else is refused.
	Credentials credential.Policy
	// Keys seal the BMC credentials kept in the store (secret:NAME
	// references, SetSecret); nil: none are kept.
	Keys *secret.Keyring
	// DialBMCAs opens a BMC session with given credentials, for password
	// rotation; nil: RotateBMC fails.
	DialBMCAs DialBMCAs
	// TokenMaxTTL is the longest an operator token may live: a longer
	// lifetime is refused, and older tokens end there (0: a year).
	TokenMaxTTL time.Duration
	// MaxDiscovered bounds the machines discovery keeps in state
	// discovered (default 1000): a flood of made-up MACs on the boot
	// network cannot fill the store.
	MaxDiscovered int
	// Mine says whether this instance runs a machine's periodic BMC work
	// (inventory refresh, scheduled password rotation) where several
	// instances share the store (pkg/scaleout's Ring); nil: every machine.
	Mine func(machineID string) bool
	// EventWindow is how long repeats of a security event are counted
	// before their summary is written (coalesce.go; default
	// DefaultEventWindow).
	EventWindow time.Duration
}

// Service owns machine state. Safe for concurrent use.
type Service struct {
	store   store.Store
	recipes RecipeSource
	dial    DialBMC
	maxDisc int
	creds   credential.Policy
	sec     *secrets
	dialAs  DialBMCAs
	rotMu   sync.Mutex // one BMC password rotation at a time
	// tokenLife bounds operator tokens' lifetimes.
	tokenLife tokenlife.Policy
	coal      *coalescer // repeated security events
	log       *slog.Logger
	now       func() time.Time
	mine      func(machineID string) bool // Config.Mine; nil: all
}

// New builds a Service; Store and Recipes are required.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Recipes == nil {
		return nil, errors.New("fleet: Store and Recipes are required")
	}
	s := &Service{store: cfg.Store, recipes: cfg.Recipes, dial: cfg.DialBMC, maxDisc: cfg.MaxDiscovered, creds: cfg.Credentials, log: cfg.Logger, now: cfg.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Keys != nil {
		s.sec = &secrets{store: cfg.Store, keys: cfg.Keys}
	}
	s.dialAs, s.mine = cfg.DialBMCAs, cfg.Mine
	s.coal = newCoalescer(cfg.EventWindow)
	s.tokenLife = tokenlife.Policy{Default: DefaultTokenTTL, Max: cfg.TokenMaxTTL}
	s.creds = s.Credentials() // enrolment accepts secret: references when secrets are kept
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxDisc <= 0 {
		s.maxDisc = 1000
	}
	return s, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// event appends one event, or counts it as a repeat (coalesce.go); a
// failure is logged, never hidden from the log.
func (s *Service) event(ctx context.Context, ev machine.Event) {
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	if !coalesced(ev) {
		s.append(ctx, []machine.Event{ev})
		return
	}
	write, due := s.coal.admit(ev, s.now())
	s.append(ctx, due)
	if write {
		s.append(ctx, []machine.Event{ev})
	}
}

// append writes events one by one, logging a failure.
func (s *Service) append(ctx context.Context, evs []machine.Event) {
	for _, ev := range evs {
		if _, err := s.store.AppendEvent(ctx, ev); err != nil {
			s.log.Error("recording event", "machine", ev.Machine, "kind", ev.Kind, "err", err)
		}
	}
}

// busy returns ErrBusy naming the running job that holds the machine, or
// nil when none does.
func (s *Service) busy(ctx context.Context, m *machine.Machine, doing string) error {
	jobs, err := s.store.ListJobs(ctx, store.JobRunning)
	if err != nil {
		return fmt.Errorf("%s %s: listing running jobs: %w", doing, m.Name, err)
	}
	for _, j := range jobs {
		for _, id := range j.Machines {
			if id == m.ID {
				return fmt.Errorf("%s %s: %w %s (%s at %s): wait for it or cancel it with 'ingot job cancel %s'",
					doing, m.Name, ErrBusy, j.ID, j.Kind, j.Step, j.ID)
			}
		}
	}
	return nil
}

// assignable checks that name is a recipe a machine may use.
func (s *Service) assignable(name string) error {
	r, err := s.recipes(name)
	if err != nil {
		return invalid("recipe %q: %v", name, err)
	}
	if r.IsTemplate() {
		return invalid("recipe %q is a template (template: true): it is only extended, never assigned to a machine", name)
	}
	return nil
}
