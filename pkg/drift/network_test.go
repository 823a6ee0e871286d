package drift

import (
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

func TestNetworkRoles(t *testing.T) {
	specs := []recipe.NICSpec{
		{Model: "ConnectX-7", Speed: recipe.Speed(400000), Count: 2, Role: "workload"},
		{Model: "ConnectX-6 Lx", Speed: recipe.Speed(25000), Count: 1, Role: "management"},
	}
	netw := recipe.Network{ManagementVLAN: 110, WorkloadVLAN: 210}
	nic := func(name, model string, mbps int, boot bool, vlan int) machine.NIC {
		n := machine.NIC{Name: name, Model: model, SpeedMbps: mbps, LinkUp: true, Boot: boot}
		if vlan != 0 {
			n.LLDP = &machine.LLDPNeighbor{SystemName: "leaf-12", PortID: "Ethernet1/" + name, VLAN: vlan}
		}
		return n
	}
	cases := map[string]struct {
		nics []machine.NIC
		want []string // substrings of critical findings, in order; none = clean
	}{
		"cabled as the recipe says": {[]machine.NIC{
			nic("ens1", "ConnectX-7", 400000, false, 210), nic("ens2", "ConnectX-7", 400000, false, 210), nic("eno1", "ConnectX-6 Lx", 25000, true, 110)}, nil},
		"no boot facts (BMC inventory)": {[]machine.NIC{
			nic("ens1", "ConnectX-7", 400000, false, 0), nic("eno1", "ConnectX-6 Lx", 25000, false, 0)}, nil},
		"no LLDP: roles only": {[]machine.NIC{
			nic("ens1", "ConnectX-7", 400000, false, 0), nic("eno1", "ConnectX-6 Lx", 25000, true, 0)}, nil},
		"management network on a workload port": {[]machine.NIC{
			nic("ens1", "ConnectX-7", 400000, true, 110), nic("eno1", "ConnectX-6 Lx", 25000, false, 0)},
			[]string{"booted over ens1 (ConnectX-7 400Gbps, switch leaf-12 port Ethernet1/ens1), a workload port"}},
		"boot port on the wrong VLAN": {[]machine.NIC{
			nic("ens1", "ConnectX-7", 400000, false, 210), nic("eno1", "ConnectX-6 Lx", 25000, true, 999)},
			[]string{"another VLAN than the recipe's management_vlan"}},
		"workload port on the wrong VLAN": {[]machine.NIC{
			nic("ens1", "ConnectX-7", 400000, false, 110), nic("eno1", "ConnectX-6 Lx", 25000, true, 110)},
			[]string{"another VLAN than the recipe's workload_vlan"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var fs findings
			fs.network(c.nics, specs, netw)
			if len(fs) != len(c.want) {
				t.Fatalf("findings %v, want %d", fs, len(c.want))
			}
			for i, w := range c.want {
				if fs[i].Severity != Critical || !strings.Contains(fs[i].Message+" "+fs[i].Expected, w) {
					t.Errorf("finding %d %+v, want a critical one saying %q", i, fs[i], w)
				}
			}
		})
	}
}

// The agent cannot see PSUs or the BMC's power readings: an in-band
// inventory without them is not a machine with its PSUs missing.
func TestInBandSkipsPSUs(t *testing.T) {
	r := &recipe.Recipe{Hardware: recipe.Hardware{PSUs: &recipe.PSUSpec{Count: 6, RatedWatts: 3000}}}
	if fs := Check(machine.Inventory{Source: "agent"}, r); len(fs) != 0 {
		t.Errorf("in-band: %v, want no PSU findings", fs)
	}
	if fs := Check(machine.Inventory{Source: "redfish"}, r); len(fs) == 0 || !strings.Contains(fs[0].Message, "6 PSU(s) missing") {
		t.Errorf("BMC inventory without PSUs: %v, want them missing", fs)
	}
}

func TestSameComponent(t *testing.T) {
	for _, c := range []struct {
		reported, key string
		want          bool
	}{
		{"CPLD", "cpld", true}, {"System CPLD", "cpld", true}, {"HGX Baseboard", "hgx-baseboard", true},
		{"HGX_Baseboard_FW", "hgx-baseboard", true}, {"BIOS", "cpld", false}, {"anything", "--", false},
	} {
		if got := sameComponent(c.reported, c.key); got != c.want {
			t.Errorf("sameComponent(%q, %q) = %v, want %v", c.reported, c.key, got, c.want)
		}
	}
}
