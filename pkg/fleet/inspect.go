package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Inspection is what Inspect read and judged.
type Inspection struct {
	Machine  string            `json:"machine"`
	Snapshot uint64            `json:"snapshot"`
	Recipe   string            `json:"recipe,omitempty"` // the recipe judged against; "" when none could be
	Findings []drift.Finding   `json:"findings"`
	Summary  string            `json:"summary"`
	Note     string            `json:"note,omitempty"` // why no drift check ran
	Taken    machine.Inventory `json:"inventory"`
}

// Inspect reads a machine's inventory from its BMC, keeps it as a snapshot,
// judges it against the machine's recipe and records an "inspect" event
// with the drift summary. Refused while a job holds the machine (the job
// reads the BMC itself).
func (s *Service) Inspect(ctx context.Context, idOrName, actor string) (*Inspection, error) {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	if err := s.busy(ctx, m, "inspecting"); err != nil {
		return nil, err
	}
	if m.BMC.Endpoint == "" || m.BMC.CredentialRef == "" {
		return nil, invalid("inspecting %s: no BMC endpoint or credential reference; enroll it with --bmc URL --bmc-cred file:PATH|env:VAR", m.Name)
	}
	inv, err := s.readBMC(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("inspecting %s: BMC %s: %w", m.Name, m.BMC.Endpoint, err)
	}
	res := &Inspection{Machine: m.Name, Taken: inv, Findings: []drift.Finding{}}
	if m.Recipe == "" {
		res.Note = "no recipe assigned"
	} else if r, err := s.recipes(m.Recipe); err != nil {
		res.Note = fmt.Sprintf("recipe %s: %v", m.Recipe, err)
	} else {
		res.Recipe, res.Findings = m.Recipe, drift.Check(inv, r)
	}
	res.Summary = drift.Summary(res.Findings)
	if res.Snapshot, err = s.store.PutInventory(ctx, m.ID, inv); err != nil {
		return nil, fmt.Errorf("inspecting %s: storing the inventory: %w", m.Name, err)
	}
	s.event(ctx, inspectEvent(m, res, actor))
	return res, nil
}

func (s *Service) readBMC(ctx context.Context, m *machine.Machine) (machine.Inventory, error) {
	if s.dial == nil {
		return machine.Inventory{}, errors.New("this server reads no BMCs")
	}
	b, err := s.dial(ctx, m)
	if err != nil {
		return machine.Inventory{}, err
	}
	inv, err := b.Inventory(ctx)
	inv.Taken = s.now().UTC()
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return inv, err
}

// inspectEvent carries the drift summary and the counts by severity.
func inspectEvent(m *machine.Machine, res *Inspection, actor string) machine.Event {
	n := map[drift.Severity]int{}
	for _, f := range res.Findings {
		n[f.Severity]++
	}
	inv := res.Taken
	msg := fmt.Sprintf("inventory #%d from BMC %s: %d GPU, %d CPU, %d DIMM, %d PSU", res.Snapshot, m.BMC.Endpoint,
		len(inv.GPUs), len(inv.CPUs), len(inv.DIMMs), len(inv.PSUs))
	if res.Recipe != "" {
		msg += fmt.Sprintf("; drift against %s: %s", res.Recipe, res.Summary)
	} else {
		msg += "; no drift check (" + res.Note + ")"
	}
	for _, f := range res.Findings {
		if f.Severity == drift.Critical {
			msg += "; worst: " + f.String()
			break
		}
	}
	return machine.Event{Machine: m.ID, Actor: actor, Kind: "inspect", Message: msg,
		Fields: map[string]string{"snapshot": strconv.FormatUint(res.Snapshot, 10), "source": "redfish", "bmc": m.BMC.Endpoint,
			"critical": strconv.Itoa(n[drift.Critical]), "warning": strconv.Itoa(n[drift.Warning]),
			"info": strconv.Itoa(n[drift.Info]), "problems": strconv.Itoa(len(inv.Problems))}}
}

// RunRefresh inspects every ready machine with a BMC once per every
// (serve --inventory-refresh; 0 never), one after another: a GPU off the
// bus, a DIMM gone or firmware changed outside a recipe becomes a drift
// finding in an inspect event, and a new inventory snapshot. A machine in
// a job is skipped until the next round.
func (s *Service) RunRefresh(ctx context.Context, every time.Duration) error {
	if every <= 0 || s.dial == nil {
		<-ctx.Done()
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
		ms, err := s.store.ListMachines(ctx, store.MachineFilter{State: machine.StateReady})
		if err != nil {
			s.log.Warn("inventory refresh: listing machines", "err", err)
			continue
		}
		for _, m := range ms {
			if m.BMC.Endpoint == "" || ctx.Err() != nil || (s.mine != nil && !s.mine(m.ID)) {
				continue // another instance refreshes it (Config.Mine)
			}
			res, err := s.Inspect(ctx, m.ID, "inventory-refresh")
			switch {
			case errors.Is(err, ErrBusy):
			case err != nil:
				s.log.Warn("inventory refresh failed", "machine", m.Name, "err", err)
			case len(res.Findings) > 0:
				s.log.Warn("inventory refresh: drift from the recipe", "machine", m.Name, "summary", res.Summary)
			}
		}
	}
}
