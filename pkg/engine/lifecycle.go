package engine

import (
	"context"
	"net/netip"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Machines is the fleet as the engine sees it: reads, and every change to
// a machine record, which pkg/fleet owns (*fleet.Service satisfies it).
// The engine never writes a machine itself: a state change and the event
// that tells of it are one write, made by the fleet.
type Machines interface {
	Get(ctx context.Context, idOrName string) (*machine.Machine, error)
	List(ctx context.Context, f store.MachineFilter) ([]machine.Machine, error)
	// Transition moves a machine to a state with its event (actor, reason,
	// fields), refusing what machine.CanTransition forbids.
	Transition(ctx context.Context, id string, to machine.State, actor, reason string, fields map[string]string) error
	// Reserve records a machine's reserved address, with an event.
	Reserve(ctx context.Context, id, ipv4, actor, reason string) error
	PutInventory(ctx context.Context, id string, inv machine.Inventory) (uint64, error)
	// History lists a machine's kept inventories, oldest first.
	History(ctx context.Context, idOrName string) ([]store.Snapshot, error)
	// Record appends an event that changes no state.
	Record(ctx context.Context, ev machine.Event)
}

// Leases looks up the leases of ingot's DHCP.
type Leases interface {
	LeaseByIP(ctx context.Context, ip netip.Addr) (*store.Lease, error)
}

// Credentials deletes the machine credentials issued for a job
// (*agentauth.Auth satisfies it).
type Credentials interface {
	DeleteJob(ctx context.Context, jobID string) error
}

// setState moves a machine to a new state with its event, through the
// fleet. It refuses moves the lifecycle does not allow.
func (e *Engine) setState(ctx context.Context, id string, to machine.State, reason string, fields map[string]string) error {
	return e.machines.Transition(ctx, id, to, "engine", reason, fields)
}

// event records something that happened to a machine that is not a state
// change (a step started, a finding, progress milestones).
func (e *Engine) event(ctx context.Context, id, kind, msg string, fields map[string]string) {
	e.eventBy(ctx, id, "engine", kind, msg, fields)
}

// eventBy records an event with its actor.
func (e *Engine) eventBy(ctx context.Context, id, actor, kind, msg string, fields map[string]string) {
	e.machines.Record(ctx, machine.Event{Machine: id, Time: e.now(), Actor: actor, Kind: kind, Message: msg, Fields: fields})
}
