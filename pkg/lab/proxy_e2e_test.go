//go:build e2e

package lab_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// Proxy mode beside the site's DHCP server: a real dnsmasq (its own
// namespace, on the lab's bridge) gives the addresses, ingot answers the
// network-boot clients with boot options only (proxyDHCP). The VM is
// provisioned to ready and reimaged to ready; every address it had came
// from dnsmasq, and the first boot reported without an ingot lease.
func TestE2ELabProxy(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox", "dnsmasq")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := upLab(t, ctx, lab.Config{Prefix: "ingot-proxy", VMs: []lab.VMSpec{{Firmware: "bios"}}, SiteDHCP: "dnsmasq"})
	if !strings.Contains(strings.Join(l.State.ServeArgs, " "), "--dhcp proxy") {
		t.Fatalf("serve runs with %q, want --dhcp proxy", l.State.ServeArgs)
	}
	vm := l.State.VMs[0]
	// The reimage hands off by reboot (--handoff), the lab recipe's
	// other hand-off: the installed OS then boots through the BIOS, not
	// through a kexec.
	for _, handoff := range []string{"", "reboot"} {
		res, err := l.ReimageHandoff(ctx, handoff, vm.Name)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, ctx, l, res[0])
		t.Logf("handoff %q: %s", handoff, res[0].Restore())
	}
	con, _ := os.ReadFile(vm.Console)
	if n := strings.Count(string(con), "kexec_core: Starting new kernel"); n != 1 {
		t.Errorf("%d kexecs on the console, want 1 (the provision's kexec hand-off; the reimage's is a reboot)", n)
	}
	if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: reported through ingot-agent"); err != nil {
		t.Error(err)
	}
	// dnsmasq leased the VM its addresses (firmware/iPXE, agent, installed
	// OS: one MAC), and ingot answered its network boots as proxyDHCP.
	leases, _ := os.ReadFile(filepath.Join(l.State.Dir, "site-dhcp.leases"))
	if !strings.Contains(string(leases), vm.MAC) {
		t.Errorf("dnsmasq's leases do not name %s:\n%s", vm.MAC, leases)
	}
	log, _ := os.ReadFile(filepath.Join(l.State.Dir, "site-dhcp.log"))
	if n := strings.Count(string(log), "DHCPACK(eth0)"); n < 3 {
		t.Errorf("dnsmasq acknowledged %d requests, want at least 3 (boot ROM or iPXE, agent, installed OS, twice)", n)
	}
	if strings.Contains(string(log), "no address range available") {
		t.Errorf("dnsmasq could not serve:\n%s", tail(log, 2000))
	}
}
