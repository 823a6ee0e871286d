// Package machine holds the plain types every part of ingot shares: a
// machine as enrolled in the fleet, its lifecycle state, the events that
// record what happened to it, and its normalized hardware inventory.
//
// It is a leaf package: it imports nothing from ingot and has no behaviour
// beyond validation and small helpers, so any package may depend on it.
package machine

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// State is a machine's place in the provisioning lifecycle.
//
//	discovered -> enrolled -> inspecting -> provisioning -> verifying -> ready
//	                 any step -> failed;  ready|failed -> reimaging -> provisioning
type State string

// The lifecycle states. The list is documented in README.md.
const (
	StateDiscovered   State = "discovered"   // seen on the wire (DHCP), not yet enrolled
	StateEnrolled     State = "enrolled"     // known to ingot, not provisioned
	StateInspecting   State = "inspecting"   // inventory being read (BMC and/or agent)
	StateProvisioning State = "provisioning" // BIOS applied, booting the agent, writing the image
	StateVerifying    State = "verifying"    // acceptance checks and first boot
	StateReady        State = "ready"        // matches its recipe; may be handed over
	StateFailed       State = "failed"       // a step failed; see the last event
	StateReimaging    State = "reimaging"    // an operator asked for a reimage
)

// States lists every state in lifecycle order.
var States = []State{StateDiscovered, StateEnrolled, StateInspecting, StateProvisioning,
	StateVerifying, StateReady, StateFailed, StateReimaging}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, k := range States {
		if k == s {
			return true
		}
	}
	return false
}

// BMC says how to reach a machine's baseboard management controller.
// Credentials are never stored here, only a reference the operator resolves
// (a file path or an environment variable name).
type BMC struct {
	Endpoint      string `json:"endpoint,omitempty"`       // https://10.0.0.5 or http://127.0.0.1:8443
	CredentialRef string `json:"credential_ref,omitempty"` // file:/etc/ingot/bmc/node1 or env:NODE1_BMC
	Insecure      bool   `json:"insecure,omitempty"`       // skip TLS verification (lab only)
}

// Machine is one enrolled (or discovered) server.
type Machine struct {
	ID         string   `json:"id"`   // stable, generated at enrollment
	Name       string   `json:"name"` // operator-facing hostname, unique
	MACs       []string `json:"macs,omitempty"`
	Serial     string   `json:"serial,omitempty"`
	SystemUUID string   `json:"system_uuid,omitempty"`
	Arch       string   `json:"arch,omitempty"` // as classified from DHCP option 93, when discovered
	BMC        BMC      `json:"bmc,omitempty"`
	Recipe     string   `json:"recipe,omitempty"`
	State      State    `json:"state"`
	Rack       string   `json:"rack,omitempty"`
	// DrillCandidate: the operator says this machine may be wiped for a
	// restore drill (a spare, a node kept for drills): `ingot drill` picks
	// only candidates unless told otherwise.
	DrillCandidate bool   `json:"drill_candidate,omitempty"`
	Index          int    `json:"index,omitempty"`    // its place in the rack, given at enrolment: {index} of network.hostname
	Location       string `json:"location,omitempty"` // free-form: row/rack/unit
	IPv4           string `json:"ipv4,omitempty"`     // reserved address, if any
	// Waivers let this machine past failed acceptance checks, one each.
	Waivers []Waiver  `json:"waivers,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Waiver lets one machine past one failed acceptance check, recorded with
// who granted it and why. It holds until it is withdrawn.
type Waiver struct {
	Check  string    `json:"check"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// Waiver returns the machine's waiver for check, if any.
func (m *Machine) Waiver(check string) (Waiver, bool) {
	for _, w := range m.Waivers {
		if w.Check == check {
			return w, true
		}
	}
	return Waiver{}, false
}

// Validate checks the fields a store relies on and names the first bad one.
func (m *Machine) Validate() error {
	if m.Name == "" {
		return fmt.Errorf("machine: name is empty")
	}
	for i, mac := range m.MACs {
		if _, err := NormalizeMAC(mac); err != nil {
			return fmt.Errorf("machine %s: macs[%d]: %w", m.Name, i, err)
		}
	}
	if m.State != "" && !m.State.Valid() {
		return fmt.Errorf("machine %s: state %q is not one of %v", m.Name, m.State, States)
	}
	if m.IPv4 != "" {
		if ip := net.ParseIP(m.IPv4); ip == nil || ip.To4() == nil {
			return fmt.Errorf("machine %s: ipv4 %q is not an IPv4 address", m.Name, m.IPv4)
		}
	}
	return nil
}

// ErrNotEthernet is wrapped by NormalizeMAC's error for a well-formed
// hardware address that is not 6 bytes: an EUI-64 (8) or an IPoIB address
// (20), which net.ParseMAC takes but which no boot NIC has. A reader of
// neighbour tables skips such entries; every other caller refuses them.
var ErrNotEthernet = errors.New("not a 6-byte Ethernet MAC")

// NormalizeMAC returns mac in lower-case colon form (aa:bb:cc:dd:ee:ff). It
// takes the notations net.ParseMAC does (colons, dashes, dotted groups of
// four) for 6-byte Ethernet addresses only: machines, leases, scripts and
// credentials are keyed by them.
func NormalizeMAC(mac string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil {
		return "", fmt.Errorf("MAC %q: expected six hex bytes like 52:54:00:12:34:56", mac)
	}
	if len(hw) != 6 {
		return "", fmt.Errorf("MAC %q: %d bytes: expected six hex bytes like 52:54:00:12:34:56: %w", mac, len(hw), ErrNotEthernet)
	}
	return hw.String(), nil
}

// Event is one entry of a machine's append-only history.
type Event struct {
	Seq     uint64            `json:"seq"` // assigned by the store, increasing per machine
	Machine string            `json:"machine"`
	Time    time.Time         `json:"time"`
	Actor   string            `json:"actor"` // "operator:alice", "engine", "agent", "dhcp"
	Kind    string            `json:"kind"`  // "enrolled", "state", "recipe", "dhcp.ack", ...
	From    State             `json:"from,omitempty"`
	To      State             `json:"to,omitempty"`
	Message string            `json:"message,omitempty"`
	Fields  map[string]string `json:"fields,omitempty"`
}
