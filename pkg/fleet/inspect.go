package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
		s.refreshAll(ctx)
	}
}

// refreshAll inspects every ready or degraded machine with a BMC and
// settles its state on what was found (see settle).
func (s *Service) refreshAll(ctx context.Context) {
	for _, st := range []machine.State{machine.StateReady, machine.StateDegraded} {
		ms, err := s.store.ListMachines(ctx, store.MachineFilter{State: st})
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
			default:
				s.settle(ctx, m.ID, res.Findings, "inventory-refresh")
			}
		}
	}
}

// DriftWaiver is the waiver name that lets a machine past a drift finding
// of a part that no acceptance check judges: "drift:" + the finding's
// part ("drift:gpu 4", "drift:firmware BMC").
func DriftWaiver(part string) string { return "drift:" + part }

// unwaived lists the critical findings no waiver of m covers: a waiver of
// the acceptance check that judges the same fact, or a drift waiver of the
// part.
func unwaived(m *machine.Machine, fs []drift.Finding) []drift.Finding {
	var out []drift.Finding
	for _, f := range fs {
		if f.Severity != drift.Critical {
			continue
		}
		if _, ok := m.Waiver(DriftWaiver(f.Part)); ok {
			continue
		}
		if _, ok := m.Waiver(f.Check); ok && f.Check != "" {
			continue
		}
		out = append(out, f)
	}
	return out
}

// settle keeps "ready" true: a ready machine whose findings hold critical
// drift no waiver covers turns degraded, with an alert event naming them;
// a degraded machine whose findings hold none any more is ready again.
// Each move is the fleet's one write of a state and its event.
func (s *Service) settle(ctx context.Context, id string, fs []drift.Finding, actor string) {
	m, err := s.Get(ctx, id)
	if err != nil {
		return
	}
	bad := unwaived(m, fs)
	switch {
	case m.State == machine.StateReady && len(bad) > 0:
		var names []string
		for _, f := range bad {
			names = append(names, f.String())
		}
		reason := fmt.Sprintf("critical drift from recipe %s since it was ready: %s", m.Recipe, strings.Join(names, "; "))
		if err := s.Transition(ctx, m.ID, machine.StateDegraded, actor, reason, map[string]string{"findings": strconv.Itoa(len(bad))}); err != nil {
			s.log.Warn("degrading a machine", "machine", m.Name, "err", err)
			return
		}
		s.Note(ctx, m.ID, "alert", actor, "ALERT drift FIRING: "+reason+
			"; reimage it (ingot reimage "+m.Name+") or waive each finding (ingot waive "+m.Name+" --check drift:PART --reason ...)")
		s.log.Warn("machine degraded: critical drift since ready", "machine", m.Name, "findings", len(bad))
	case m.State == machine.StateDegraded && len(bad) == 0:
		if err := s.Transition(ctx, m.ID, machine.StateReady, actor, "no critical drift left (gone, or each finding waived)", nil); err != nil {
			s.log.Warn("restoring a degraded machine", "machine", m.Name, "err", err)
			return
		}
		s.Note(ctx, m.ID, "alert", actor, "ALERT drift resolved: no critical drift left")
	}
}
