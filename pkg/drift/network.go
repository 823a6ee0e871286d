package drift

import (
	"fmt"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// network checks each NIC's role: the port the machine booted over (the
// management network, which carries ingot's boot traffic) must be one the
// recipe calls management, not a workload port; where the switch sends LLDP
// with a port VLAN, it must be the recipe's management_vlan on the boot
// port and workload_vlan on workload ports. Inventories without boot-port
// facts (the BMC's) are not judged here.
func (fs *findings) network(nics []machine.NIC, specs []recipe.NICSpec, n recipe.Network) {
	var boot *machine.NIC
	for i := range nics {
		if nics[i].Boot {
			boot = &nics[i]
		}
	}
	if boot == nil {
		return
	}
	mgmt, work := roleSpecs(specs)
	if len(mgmt) > 0 && !matchesAny(*boot, mgmt) {
		role := "an unlisted port"
		if matchesAny(*boot, work) {
			role = "a workload port"
		}
		fs.add(Critical, "nic management", fmt.Sprintf("the machine booted over %s (%s), %s: the management network is cabled to the wrong NIC",
			boot.Name, nicLabel(*boot), role), describe(mgmt), nicLabel(*boot))
	}
	if v := vlanOf(*boot); v != 0 && n.ManagementVLAN != 0 && v != n.ManagementVLAN {
		fs.add(Critical, "nic management "+boot.Name, "the boot port's switch port is on another VLAN than the recipe's management_vlan",
			fmt.Sprint(n.ManagementVLAN), fmt.Sprint(v))
	}
	for _, nic := range nics {
		if nic.Boot || !matchesAny(nic, work) {
			continue
		}
		if v := vlanOf(nic); v != 0 && n.WorkloadVLAN != 0 && v != n.WorkloadVLAN {
			fs.add(Critical, "nic workload "+nic.Name, "a workload port's switch port is on another VLAN than the recipe's workload_vlan",
				fmt.Sprint(n.WorkloadVLAN), fmt.Sprint(v))
		}
	}
}

func roleSpecs(specs []recipe.NICSpec) (mgmt, work []recipe.NICSpec) {
	for _, s := range specs {
		switch s.Role {
		case "management":
			mgmt = append(mgmt, s)
		case "workload":
			work = append(work, s)
		}
	}
	return mgmt, work
}

// matchesAny: the NIC fits one of the specs by model substring and speed.
func matchesAny(n machine.NIC, specs []recipe.NICSpec) bool {
	for _, s := range specs {
		if (s.Model == "" || contains(n.Model, s.Model)) && (s.Speed == 0 || n.SpeedMbps == 0 || int64(n.SpeedMbps) >= s.Speed.Mbps()) {
			return true
		}
	}
	return false
}

func vlanOf(n machine.NIC) int {
	if n.LLDP == nil {
		return 0
	}
	return n.LLDP.VLAN
}

func nicLabel(n machine.NIC) string {
	l := strings.TrimSpace(n.Model)
	if l == "" {
		l = "unknown model"
	}
	if n.SpeedMbps > 0 {
		l += " " + recipe.Speed(n.SpeedMbps).String()
	}
	if n.LLDP != nil && n.LLDP.SystemName != "" {
		l += ", switch " + n.LLDP.SystemName + " port " + n.LLDP.PortID
	}
	return l
}

func describe(specs []recipe.NICSpec) string {
	var p []string
	for _, s := range specs {
		l := s.Model
		if s.Speed != 0 {
			l += " " + s.Speed.String()
		}
		p = append(p, strings.TrimSpace(l))
	}
	return strings.Join(p, " or ")
}
