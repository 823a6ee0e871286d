package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Opener opens a fresh, empty store for one conformance case. It MUST honour
// opts.History, opts.MaxEvents and opts.Now (the suite drives the clock) and SHOULD close
// the store, and check it, when t ends (t.Cleanup). The suite may close the
// store itself first.
type Opener func(t *testing.T, opts store.Options) store.Store

// History is the inventory history limit the suite opens stores with.
const History = 3

// Run is the conformance suite: one subtest per rule of the contracts in
// pkg/store (every interface store.Store is made of), each on a fresh
// store from open. Every backend passes it, e.g. bbolt's:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, o store.Options) store.Store { return storetest.OpenWith(t, o) })
//	}
func Run(t *testing.T, open Opener) {
	var cases []conformanceCase
	for _, group := range [][]conformanceCase{machineCases, changeCases, recordCases, leaseCases, jobCases, capabilityCases, fenceCases, lifecycleCases} {
		cases = append(cases, group...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{t: start}
			opts := func(edit func(*store.Options)) store.Options {
				o := store.Options{History: History, Now: clk.Now, BatchDelay: time.Millisecond}
				if edit != nil {
					edit(&o)
				}
				return o
			}
			e := env{ctx: context.Background(), clk: clk, s: open(t, opts(nil))}
			e.reopen = func(edit func(*store.Options)) store.Store { return open(t, opts(edit)) }
			c.fn(t, e)
		})
	}
}

// start is the suite clock's first reading.
var start = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

type conformanceCase struct {
	name string
	fn   func(t *testing.T, e env)
}

// env is what a case gets: its store, the clock the store was opened with,
// and a context.
type env struct {
	s   store.Store
	clk *clock
	ctx context.Context
	// reopen opens another fresh store with the suite's options edited
	// (a case that needs another limit).
	reopen func(edit func(*store.Options)) store.Store
}

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// update is ChangeMachine without a revision or events.
func (e env) update(idOrName string, fn func(*machine.Machine) error) (*machine.Machine, error) {
	c, err := e.s.ChangeMachine(e.ctx, idOrName, store.Change{Edit: store.Edit(fn)})
	if err != nil {
		return nil, err
	}
	return &c.Machine, nil
}

// updateRev is ChangeMachine at revision rev, without events.
func (e env) updateRev(idOrName string, rev uint64, fn func(*machine.Machine) error) (*machine.Machine, uint64, error) {
	c, err := e.s.ChangeMachine(e.ctx, idOrName, store.Change{Rev: rev, Edit: store.Edit(fn)})
	if err != nil {
		return nil, 0, err
	}
	return &c.Machine, c.Rev, nil
}

// create stores m and returns it as stored; the case stops if it fails.
func (e env) create(t *testing.T, m machine.Machine) machine.Machine {
	t.Helper()
	if err := e.s.CreateMachine(e.ctx, &m); err != nil {
		t.Fatalf("CreateMachine(%s): %v", m.Name, err)
	}
	return m
}

// event appends an event of kind to the machine; the case stops if it fails.
func (e env) event(t *testing.T, idOrName, kind string) machine.Event {
	t.Helper()
	ev, err := e.s.AppendEvent(e.ctx, machine.Event{Machine: idOrName, Kind: kind, Actor: "storetest"})
	if err != nil {
		t.Fatalf("AppendEvent(%s, %s): %v", idOrName, kind, err)
	}
	return ev
}

// wantIs fails the case unless err wraps target.
func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v; want %v", what, err, target)
	}
}

// wantMsg fails the case unless err is non-nil and mentions every part.
func wantMsg(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error; want one mentioning %q", what, parts)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not mention %q", what, err, p)
		}
	}
}

// seqs lists the Seq of each event.
func seqs(evs []machine.Event) []uint64 {
	out := []uint64{}
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}
