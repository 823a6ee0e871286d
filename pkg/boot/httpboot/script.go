package httpboot

import (
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Action is what a network-booting machine is told to do.
type Action string

// Actions.
const (
	ActionAgent     Action = "agent"     // boot the agent to inspect or provision it
	ActionDiscovery Action = "discovery" // boot the agent in discovery mode (no machine id)
	ActionLocal     Action = "local"     // boot from the local disk
	ActionExit      Action = "exit"      // give the firmware back (unknown MAC, ignore policy)
)

// Decide is the boot rule, a pure function of the machine (nil: MAC not
// known to the store) and the unknown-machine policy ("discover" or "ignore"):
//
//	unknown MAC            -> discovery (policy discover) or exit (policy ignore)
//	discovered             -> discovery (or exit under ignore): seen on the wire, not enrolled
//	inspecting, provisioning, reimaging
//	                       -> agent: the engine is working on the machine
//	enrolled, verifying, ready, failed
//	                       -> local disk: nothing to do over the network. Enrolled machines
//	                          wait for the engine to move them to inspecting; a verifying machine
//	                          must boot the OS just written; ready ones keep their OS; failed ones
//	                          stay put until an operator reimages them (no reimage loops).
func Decide(m *machine.Machine, unknown string) Action {
	if m == nil || m.State == machine.StateDiscovered || m.State == "" {
		if unknown == UnknownIgnore {
			return ActionExit
		}
		return ActionDiscovery
	}
	switch m.State {
	case machine.StateInspecting, machine.StateProvisioning, machine.StateReimaging:
		return ActionAgent
	default:
		return ActionLocal
	}
}

// Unknown-machine policies.
const (
	UnknownDiscover = "discover"
	UnknownIgnore   = "ignore"
)

// IsUEFI tells UEFI from BIOS by the script URL's arch parameter (the DHCP
// server's classification: "bios", "uefi-x64", ...), falling back to the
// arch recorded for the machine. Unknown counts as BIOS, whose local-boot
// line falls back to exit anyway.
func IsUEFI(arch, machineArch string) bool {
	for _, a := range []string{arch, machineArch} {
		switch {
		case a == "bios" || a == "pcbios":
			return false
		case strings.HasPrefix(a, "uefi") || a == "efi":
			return true
		}
	}
	return false
}

// AgentBoot is what the agent script loads.
type AgentBoot struct {
	Comment   string // one line saying why, shown in the script
	KernelURL string
	InitrdURL string
	Cmdline   string // complete kernel command line (without initrd=)
}

// initrdName is the name the initrd gets in iPXE; the kernel line repeats it
// as initrd=NAME, which the EFI stub needs to find the initrd (LAB.md).
const initrdName = "initrd.img"

// RenderAgent renders the iPXE script that boots the agent.
func RenderAgent(b AgentBoot) string {
	var s strings.Builder
	s.WriteString("#!ipxe\n")
	fmt.Fprintf(&s, "# ingot: %s\n", oneLine(b.Comment))
	fmt.Fprintf(&s, "kernel %s initrd=%s %s\n", b.KernelURL, initrdName, strings.TrimSpace(b.Cmdline))
	fmt.Fprintf(&s, "initrd --name %s %s\n", initrdName, b.InitrdURL)
	s.WriteString("boot\n")
	return s.String()
}

// RenderLocal renders the script that boots from the local disk: under BIOS
// iPXE hands over to the first hard disk (0x80) and exits if that fails;
// under UEFI "exit" returns to the firmware, which tries the next boot entry.
func RenderLocal(comment string, uefi bool) string {
	if uefi {
		return fmt.Sprintf("#!ipxe\n# ingot: %s\nexit\n", oneLine(comment))
	}
	return fmt.Sprintf("#!ipxe\n# ingot: %s\nsanboot --no-describe --drive 0x80 || exit\n", oneLine(comment))
}

// RenderExit renders the script that gives the firmware back.
func RenderExit(comment string) string {
	return fmt.Sprintf("#!ipxe\n# ingot: %s\nexit\n", oneLine(comment))
}

// RenderError renders a script that shows why the machine cannot boot from
// ingot on its console, waits so a person can read it, and exits.
func RenderError(msg string) string {
	return fmt.Sprintf("#!ipxe\necho ingot: %s\nsleep 10\nexit 1\n", oneLine(msg))
}

// oneLine keeps text from breaking the script: no newlines, and no '$'
// (iPXE would expand ${...} settings in it).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '$' {
			return ' '
		}
		return r
	}, s)
}
