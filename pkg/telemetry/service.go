package telemetry

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/rack"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Reader reads one machine's BMC. It must return within ctx (the poller
// gives each read Config.Timeout) and never block other machines' reads:
// pkg/bmc limits requests per BMC and shares one session per BMC.
type Reader func(ctx context.Context, m *machine.Machine) Sample

// Config builds a Service.
type Config struct {
	// Machines lists every enrolled machine (the poller reads those with a
	// BMC endpoint).
	Machines func(ctx context.Context) ([]machine.Machine, error)
	Read     Reader
	Recipes  func(name string) (*recipe.Recipe, error)
	// Event records an alert transition in the machine's event log (the
	// fleet); nil: only logged.
	Event func(ctx context.Context, machineID, message string)
	// Note records an operator's action on a machine's alerts (a silence:
	// kind alert.silenced, who, why) in its event log; nil: not recorded.
	Note func(ctx context.Context, machineID, kind, actor, message string)
	// SEL records new BMC event log entries of a machine (an event on the
	// machine); nil: they are only counted.
	SEL func(ctx context.Context, machineID string, entries []string)
	// Notify delivers transitions (webhook, Alertmanager); each gets every
	// transition, on its own goroutine.
	Notify []Notifier
	// Interval is how often each BMC is polled (default 60 s; a BMC whose
	// poll takes longer than half of it is polled less often); Timeout
	// bounds one poll (default 30 s); Parallel bounds polls at once
	// (default 32).
	Interval time.Duration
	Timeout  time.Duration
	Parallel int
	Now      func() time.Time
	Logger   *slog.Logger
	// Racks is racks.yaml as it stands (power budgets, PUE, tariff).
	Racks func() []rack.Rack
	// Store keeps states and aggregates across restarts (see persist.go);
	// nil: memory only. FlushEvery is how often they are written (5 m).
	Store      store.TelemetryStore
	FlushEvery time.Duration
	// Mine says whether this instance polls a machine where several share
	// the store (share.go); nil: it polls every machine.
	Mine func(machineID string) bool
}

// Service polls BMCs and keeps readings and alerts. Safe for concurrent use.
type Service struct {
	cfg Config
	agg *Aggregator

	mu       sync.Mutex
	nodes    map[string]*node // by machine ID
	restored map[string]*node // loaded from the store, not yet listed
	// closedDay is the finished day whose record flush last wrote for
	// each machine (flush goroutine only).
	closedDay map[string]string
	silences  map[string]Silence // silence.go
	cleared   []Cleared          // the last alerts that cleared, oldest first
	services  map[string]Alert   // firing service alerts by rule (servicealert.go)
}

type node struct {
	m          machine.Machine
	last       Sample
	state      nodeState
	next       time.Time
	interval   time.Duration
	polling    bool
	selEntries int64 // BMC event log entries seen
	// remote: another instance polls it; its last sample, alerts and
	// buckets are what that instance stored (share.go).
	remote bool
}

// New builds a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Machines == nil || cfg.Read == nil {
		return nil, errors.New("telemetry: Machines and Read are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 32
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Recipes == nil {
		cfg.Recipes = func(string) (*recipe.Recipe, error) { return nil, errors.New("no recipes") }
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = BucketSize
	}
	return &Service{cfg: cfg, agg: NewAggregator(), nodes: map[string]*node{}, restored: map[string]*node{}, closedDay: map[string]string{}}, nil
}

// Run polls until ctx ends: each machine with a BMC once per interval, at
// an offset of its own within the interval (so 500 BMCs do not answer in
// the same second), at most Parallel at once.
func (s *Service) Run(ctx context.Context) error {
	if err := s.load(ctx); err != nil {
		s.cfg.Logger.Warn("telemetry: stored state not read; starting afresh", "err", err)
	}
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		if err := s.flush(context.WithoutCancel(ctx)); err != nil {
			s.cfg.Logger.Warn("telemetry: state not stored at stop", "err", err)
		}
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var refreshed time.Time
	flushed := s.cfg.Now()
	for {
		now := s.cfg.Now()
		if now.Sub(flushed) >= s.cfg.FlushEvery {
			if err := s.flush(ctx); err != nil {
				s.cfg.Logger.Warn("telemetry: state not stored", "err", err)
			}
			if err := s.syncRemote(ctx); err != nil {
				s.cfg.Logger.Warn("telemetry: the other instances' machines not read", "err", err)
			}
			flushed = now
		}
		if now.Sub(refreshed) >= min(s.cfg.Interval, time.Minute) {
			if err := s.refresh(ctx, now); err != nil {
				s.cfg.Logger.Warn("telemetry: listing machines", "err", err)
			}
			refreshed = now
		}
		for _, n := range s.due(now) {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				s.poll(ctx, n)
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// PollAll polls every machine with a BMC now, one after another (tests,
// and `ingot` commands that want fresh readings).
func (s *Service) PollAll(ctx context.Context) error {
	if err := s.refresh(ctx, s.cfg.Now()); err != nil {
		return err
	}
	s.mu.Lock()
	var ns []*node
	for _, n := range s.nodes {
		if n.remote {
			continue
		}
		n.polling = true
		ns = append(ns, n)
	}
	s.mu.Unlock()
	slices.SortFunc(ns, func(a, b *node) int { return strings.Compare(a.m.Name, b.m.Name) })
	for _, n := range ns {
		s.poll(ctx, n)
	}
	return nil
}

// refresh brings the machine list up to date: new machines with a BMC are
// scheduled at their offset, removed ones forgotten.
func (s *Service) refresh(ctx context.Context, now time.Time) error {
	ms, err := s.cfg.Machines(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	gone := s.refreshLocked(ctx, ms, now)
	s.mu.Unlock()
	return s.handOver(ctx, gone)
}

// refreshLocked is refresh's bookkeeping; it returns the machines this
// instance stopped polling (share.go). s.mu is held.
func (s *Service) refreshLocked(ctx context.Context, ms []machine.Machine, now time.Time) (gone []string) {
	seen := map[string]bool{}
	for _, m := range ms {
		if m.BMC.Endpoint == "" {
			continue
		}
		seen[m.ID] = true
		if n, ok := s.nodes[m.ID]; ok {
			n.m = m
			if s.reassign(n, now) {
				gone = append(gone, m.ID)
			}
			continue
		}
		n := &node{m: m, interval: s.cfg.Interval, remote: !s.mine(m.ID)}
		if r, ok := s.restored[m.ID]; ok { // its last sample and alerts from before a restart
			n.last, n.state = r.last, r.state
			delete(s.restored, m.ID)
		}
		n.next = now.Add(offset(m.ID, s.cfg.Interval))
		s.nodes[m.ID] = n
	}
	for id := range s.nodes {
		if !seen[id] {
			delete(s.nodes, id)
			s.agg.Forget(id)
			if s.cfg.Store != nil {
				if err := s.cfg.Store.DeleteTelemetry(ctx, id); err != nil {
					s.cfg.Logger.Warn("telemetry: a removed machine's state not deleted", "machine", id, "err", err)
				}
			}
		}
	}
	return gone
}

// offset spreads machines over the interval by a hash of their ID: the
// same machine polls at the same second of each interval.
func offset(id string, interval time.Duration) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64() % uint64(interval))
}

// due marks and returns the nodes whose poll is due.
func (s *Service) due(now time.Time) []*node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*node
	for _, n := range s.nodes {
		if !n.polling && !n.remote && !now.Before(n.next) {
			n.polling = true
			out = append(out, n)
		}
	}
	return out
}

// poll reads one BMC, judges the readings and delivers what changed.
func (s *Service) poll(ctx context.Context, n *node) {
	s.mu.Lock()
	m := n.m
	s.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	start := s.cfg.Now()
	smp := s.cfg.Read(rctx, &m)
	cancel()
	// The poller's clock stamps samples (holds and clears are measured on
	// it), not the BMC's.
	smp.Machine, smp.Time = m.ID, start
	if smp.Took == 0 {
		smp.Took = s.cfg.Now().Sub(start)
	}
	var lim Limits
	if r, err := s.cfg.Recipes(m.Recipe); err == nil && m.Recipe != "" {
		lim = LimitsOf(r)
	} else {
		lim = LimitsOf(nil)
	}
	s.agg.Add(smp)

	s.mu.Lock()
	n.last = smp
	n.selEntries += int64(len(smp.SEL))
	trs := n.state.evaluate(smp, lim, silenced(m))
	muted := map[string]bool{}
	for i := range trs {
		trs[i].Alert.Name, trs[i].Alert.Rack, trs[i].Alert.Recipe = m.Name, m.Rack, m.Recipe
		_, muted[trs[i].Alert.Rule] = s.silencedLocked(m.ID, trs[i].Alert.Rule, smp.Time)
		if !trs[i].Fired {
			s.noteClearedLocked(trs[i].Alert, smp.Time)
		}
	}
	// A slow BMC stretches its own interval (never below the configured
	// one, at most ten times it): polling it faster only queues requests.
	n.interval = s.cfg.Interval
	if smp.Took > s.cfg.Interval/2 {
		n.interval = min(10*s.cfg.Interval, 2*smp.Took)
	}
	n.next = smp.Time.Add(n.interval)
	n.polling = false
	s.mu.Unlock()

	if len(smp.SEL) > 0 && s.cfg.SEL != nil {
		s.cfg.SEL(ctx, m.ID, smp.SEL)
	}
	for _, tr := range trs {
		msg := tr.Message()
		s.cfg.Logger.Info("telemetry alert", "machine", m.Name, "rule", tr.Alert.Rule, "fired", tr.Fired, "reading", tr.Alert.Reading)
		if s.cfg.Event != nil {
			s.cfg.Event(ctx, m.ID, msg)
		}
		for _, nt := range s.cfg.Notify {
			if muted[tr.Alert.Rule] {
				break // an operator silenced it: the event above is the record
			}
			go func() {
				if err := nt.Notify(context.WithoutCancel(ctx), tr); err != nil {
					s.cfg.Logger.Warn("telemetry: alert not delivered", "to", nt.Name(), "rule", tr.Alert.Rule, "machine", m.Name, "err", err)
				}
			}()
		}
	}
}

// silenced: a job is changing the machine (its BMC readings then follow
// the job: power cycles, POST, burn-in load).
func silenced(m machine.Machine) bool {
	switch m.State {
	case machine.StateInspecting, machine.StateProvisioning, machine.StateVerifying, machine.StateReimaging:
		return true
	}
	return false
}

// Alerts lists every pending and firing alert, firing first, then by
// machine and rule.
func (s *Service) Alerts() []Alert {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Alert
	for _, n := range s.nodes {
		for _, a := range n.state.alerts {
			c := *a
			c.Name, c.Rack, c.Recipe = n.m.Name, n.m.Rack, n.m.Recipe
			if sl, ok := s.silencedLocked(n.m.ID, c.Rule, now); ok {
				c.SilencedBy, c.SilencedUntil = sl.Actor, sl.Until
			}
			out = append(out, c)
		}
	}
	out = slices.AppendSeq(out, maps.Values(s.services)) // service alerts (servicealert.go)
	slices.SortFunc(out, func(a, b Alert) int {
		if a.State != b.State {
			return strings.Compare(a.State, b.State) // firing < pending
		}
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return out
}

// Current is one machine's last sample with what names it.
type Current struct {
	Machine machine.Machine
	Sample  Sample
	// SELEntries counts the BMC event log entries seen since serve started.
	SELEntries int64
}

// Last returns every polled machine's last sample, by name.
func (s *Service) Last() []Current {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Current
	for _, n := range s.nodes {
		if !n.last.Time.IsZero() {
			out = append(out, Current{Machine: n.m, Sample: n.last, SELEntries: n.selEntries})
		}
	}
	slices.SortFunc(out, func(a, b Current) int { return strings.Compare(a.Machine.Name, b.Machine.Name) })
	return out
}

// Aggregates is the 5-minute aggregator (power report, retention).
func (s *Service) Aggregates() *Aggregator { return s.agg }

// Report is the power and cost report over the last window, for one rack
// or all (rackName ""); tariff and pue override the racks' when not 0. A
// window up to Retention reads the 5-minute aggregates; a longer one, up
// to SummaryRetention, the daily summaries of the whole days in it.
func (s *Service) Report(ctx context.Context, window time.Duration, rackName string, tariff, pue float64) (Report, error) {
	if window <= 0 || window > SummaryRetention {
		return Report{}, fmt.Errorf("window %s: expected more than 0 and at most %s (older summaries are not kept; Prometheus has the history)", window, SummaryRetention)
	}
	ms, err := s.cfg.Machines(ctx)
	if err != nil {
		return Report{}, err
	}
	if rackName != "" {
		ms = slices.DeleteFunc(ms, func(m machine.Machine) bool { return m.Rack != rackName })
	}
	var racks []rack.Rack
	if s.cfg.Racks != nil {
		racks = s.cfg.Racks()
	}
	to := s.cfg.Now()
	from := to.Add(-window)
	return BuildReport(ReportInput{Machines: ms, Racks: racks, Window: window, Tariff: tariff, PUE: pue,
		GPUs: func(m machine.Machine) int {
			r, err := s.cfg.Recipes(m.Recipe)
			if err != nil || m.Recipe == "" {
				return 0
			}
			n := 0
			for _, g := range r.Hardware.GPUs {
				n += g.Count
			}
			return n
		},
		Buckets: func(id string) []Bucket { return s.agg.Window(id, from, to) },
		Summaries: func() func(string) []Summary {
			if window <= Retention {
				return nil
			}
			return func(id string) []Summary { return s.agg.Summaries(id, from, to) }
		}(),
	}), nil
}
