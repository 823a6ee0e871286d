package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// Enroll creates a machine in state enrolled and records who enrolled it.
// m.State must be empty: a machine's state comes from its lifecycle, never
// from the request. ID is assigned when empty.
func (s *Service) Enroll(ctx context.Context, m machine.Machine, actor string) (*machine.Machine, error) {
	if err := checkNew(&m); err != nil {
		return nil, fmt.Errorf("enrolling %q: %w", m.Name, err)
	}
	if ref := m.BMC.CredentialRef; ref != "" {
		if err := s.creds.Check(ref); err != nil {
			return nil, fmt.Errorf("enrolling %s: bmc.credential_ref: %w: %w", m.Name, ErrInvalid, err)
		}
	}
	if m.Recipe != "" {
		if err := s.assignable(m.Recipe); err != nil {
			return nil, fmt.Errorf("enrolling %s: %w", m.Name, err)
		}
	}
	m.State = machine.StateEnrolled
	m.Created, m.Updated = s.now(), s.now()
	ev := machine.Event{Time: s.now(), Actor: actor, Kind: "enrolled", To: m.State, Message: "enrolled" + recipeNote(m.Recipe)}
	if err := s.store.CreateMachine(ctx, &m, ev); err != nil {
		return nil, fmt.Errorf("enrolling %s: %w", m.Name, err)
	}
	return &m, nil
}

func recipeNote(r string) string {
	if r == "" {
		return " without a recipe"
	}
	return " with recipe " + r
}

// Get returns a machine by ID or name.
func (s *Service) Get(ctx context.Context, idOrName string) (*machine.Machine, error) {
	return s.store.GetMachine(ctx, idOrName) // its error names the machine

}

// List returns the machines matching f, ordered by name.
func (s *Service) List(ctx context.Context, f store.MachineFilter) ([]machine.Machine, error) {
	if f.State != "" && !f.State.Valid() {
		return nil, invalid("state %q: expected one of %v", f.State, machine.States)
	}
	return s.store.ListMachines(ctx, f)
}

// SetRecipe assigns a recipe (or none, with ""), refused while a job holds
// the machine: the job runs the recipe it started with. rev, when not 0,
// is the revision the caller read (an API client's If-Match): a machine
// changed since fails with store.ErrStale and is left as it is.
func (s *Service) SetRecipe(ctx context.Context, idOrName, recipeName, actor string, rev uint64) (*machine.Machine, error) {
	if recipeName != "" {
		if err := s.assignable(recipeName); err != nil {
			return nil, fmt.Errorf("setting the recipe of %s: %w", idOrName, err)
		}
	}
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	if err := s.busy(ctx, m, "setting the recipe of"); err != nil {
		return nil, err
	}
	c, err := s.store.ChangeMachine(ctx, m.ID, store.Change{Rev: rev, Edit: func(x *machine.Machine) ([]machine.Event, error) {
		old := x.Recipe
		x.Recipe, x.Updated = recipeName, s.now()
		if old == recipeName {
			return nil, nil
		}
		return []machine.Event{{Time: s.now(), Actor: actor, Kind: "recipe",
			Message: fmt.Sprintf("recipe %s -> %s", orNone(old), orNone(recipeName)), Fields: map[string]string{"from": old, "to": recipeName}}}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("setting the recipe of %s: %w", idOrName, err)
	}
	return &c.Machine, nil
}

// Revision is a machine's current revision (the API's ETag).
func (s *Service) Revision(ctx context.Context, idOrName string) (uint64, error) {
	return s.store.MachineRevision(ctx, idOrName)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Delete forgets a machine with its inventory and events, refused while a
// job holds it. The log keeps who removed it.
func (s *Service) Delete(ctx context.Context, idOrName, actor string) error {
	m, err := s.Get(ctx, idOrName)
	if err != nil {
		return err
	}
	if err := s.busy(ctx, m, "removing"); err != nil {
		return err
	}
	if err := s.store.DeleteMachine(ctx, m.ID); err != nil {
		return fmt.Errorf("removing %s: %w", m.Name, err)
	}
	s.log.Info("machine removed", "machine", m.ID, "name", m.Name, "actor", actor)
	return nil
}

// Discover records a machine first seen on the wire (DHCP, unknown MAC) in
// state discovered, named after its MAC, with an event; a MAC already known
// returns its machine unchanged.
func (s *Service) Discover(ctx context.Context, mac, arch, actor string) (*machine.Machine, error) {
	norm, err := normalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("discovering %q: %w", mac, err)
	}
	if m, err := s.store.MachineByMAC(ctx, norm); err == nil {
		return m, nil
	}
	found, err := s.store.ListMachines(ctx, store.MachineFilter{State: machine.StateDiscovered})
	if err != nil {
		return nil, fmt.Errorf("discovering %s: %w", norm, err)
	}
	if len(found) >= s.maxDisc {
		return nil, fmt.Errorf("discovering %s: %w: %d machines wait in state discovered (the limit): enrol or remove some", norm, ErrFull, len(found))
	}
	id := "mac-" + strings.ReplaceAll(norm, ":", "")
	m := &machine.Machine{ID: id, Name: id, MACs: []string{norm}, Arch: arch, State: machine.StateDiscovered,
		Created: s.now(), Updated: s.now()}
	ev := machine.Event{Time: s.now(), Actor: actor, Kind: "discovered", To: m.State,
		Message: fmt.Sprintf("first seen on the wire: MAC %s, arch %s", norm, orNone(arch))}
	if err := s.store.CreateMachine(ctx, m, ev); err != nil {
		return nil, fmt.Errorf("discovering %s: %w", norm, err)
	}
	return m, nil
}

// checkNew validates an enrolment, naming the field and what was expected.
func checkNew(m *machine.Machine) error {
	if err := CheckName(m.Name); err != nil {
		return err
	}
	if m.ID != "" { // the store makes one when empty; one given must be as safe as a name
		if err := CheckName(m.ID); err != nil {
			return fmt.Errorf("id: %w", err)
		}
	}
	if m.State != "" {
		return invalid("state %q: a machine's state is set by its lifecycle, never at enrolment: leave it empty", m.State)
	}
	if len(m.MACs) == 0 {
		return invalid("macs: at least one MAC is required, e.g. 52:54:00:12:34:56")
	}
	for i, mac := range m.MACs {
		norm, err := normalizeMAC(mac)
		if err != nil {
			return fmt.Errorf("macs[%d]: %w", i, err)
		}
		m.MACs[i] = norm
	}
	if e := m.BMC.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return invalid("bmc.endpoint %q: expected a URL like https://10.0.0.5 or http://127.0.0.1:8443", e)
		}
	}
	if ref := m.BMC.CredentialRef; ref != "" && !strings.HasPrefix(ref, "file:") && !strings.HasPrefix(ref, "env:") && !strings.HasPrefix(ref, "secret:") {
		return invalid("bmc.credential_ref %q: expected secret:NAME, file:PATH or env:VARIABLE", ref)
	}
	if m.Index < 0 {
		return invalid("index %d: expected the machine's place in its rack, 1 or more (0: none)", m.Index)
	}
	if m.IPv4 != "" {
		a, err := netip.ParseAddr(m.IPv4)
		if err != nil || !a.Is4() {
			return invalid("ipv4 %q: expected an IPv4 address like 192.168.10.21", m.IPv4)
		}
		m.IPv4 = a.String()
	}
	return nil
}

// normalizeMAC accepts a 6-byte Ethernet MAC only (net.ParseMAC also takes
// 8- and 20-byte hardware addresses, which no boot NIC has).
func normalizeMAC(mac string) (string, error) {
	n, err := machine.NormalizeMAC(mac)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return n, nil
}

// CheckName accepts DNS-style names (RFC 1123): lower-case letters, digits,
// '-' and '.', labels of 1-63 characters that start and end with a letter
// or digit, 253 characters in all. Names end up in hostnames, kernel
// command lines and iPXE scripts, so nothing else is allowed.
func CheckName(name string) error {
	if err := machine.CheckDNSName(name); err != nil {
		return invalid("name %q: %v; expected a DNS-style name of lower-case letters, digits, '-' and '.' like gpu-r12-07", name, err)
	}
	return nil
}

// SetDrillCandidate marks (on) or unmarks a machine as one a restore drill
// may wipe; the change is an event naming the actor.
func (s *Service) SetDrillCandidate(ctx context.Context, idOrName string, on bool, actor string) (*machine.Machine, error) {
	msg := "drill candidate: a restore drill may wipe this machine"
	if !on {
		msg = "no longer a drill candidate"
	}
	c, err := s.store.ChangeMachine(ctx, idOrName, store.Change{Edit: func(x *machine.Machine) ([]machine.Event, error) {
		x.DrillCandidate, x.Updated = on, s.now()
		return []machine.Event{{Time: s.now(), Actor: actor, Kind: "drill", Message: msg}}, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("marking %s as a drill candidate: %w", idOrName, err)
	}
	return &c.Machine, nil
}
