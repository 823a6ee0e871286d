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
	"github.com/ingot-dev/ingot/pkg/uki"
)

// UEFI HTTP boot: a UEFI VM without a NIC option ROM and with OVMF's PXE
// turned off boots through the firmware's own HTTP boot. DHCP (arch 16,
// HTTPClient) hands it the URL of its agent UKI; the firmware fetches and
// runs it (systemd's stub: kernel, agent initramfs, command line); the
// agent, which has no boot credential on its command line, asks for one by
// MAC; then the usual path to ready. Provisioned and reimaged to ready,
// with no TFTP transfer and no iPXE script on the way.
func TestE2ELabUEFIHTTP(t *testing.T) { uefiHTTP(t, "") }

func uefiHTTP(t *testing.T, siteDHCP string) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox")
	netnstest.NeedFiles(t, "the agent UKI's EFI stub: apt-get install systemd-boot-efi", uki.EFIStub)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := upLab(t, ctx, lab.Config{Prefix: "ingot-http", VMs: []lab.VMSpec{{Firmware: "uefi", FirmwareHTTP: true}}, SiteDHCP: siteDHCP})
	vm := l.State.VMs[0]
	serveLog := func() string {
		b, _ := os.ReadFile(filepath.Join(l.State.Dir, "serve.log"))
		return string(b)
	}
	// ukiFetches counts the UKIs serve sent this VM's firmware in full.
	ukiFetches := func() int {
		n := 0
		for _, line := range strings.Split(serveLog(), "\n") {
			if strings.Contains(line, `msg="agent uki"`) && strings.Contains(line, "mac="+vm.MAC) &&
				strings.Contains(line, "method=GET") && strings.Contains(line, "code=200") && strings.Contains(line, "action=agent") {
				n++
			}
		}
		return n
	}
	took := map[string]time.Duration{}
	for _, step := range []string{"provision", "reimage"} {
		before := ukiFetches()
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, ctx, l, res[0])
		t.Logf("%s: %s", step, res[0].Restore())
		took[step] = res[0].Status.Restore()
		if ukiFetches() <= before {
			t.Errorf("%s: serve.log shows no agent UKI sent to %s's firmware", step, vm.MAC)
		}
	}
	if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: reported through ingot-agent"); err != nil {
		t.Error(err)
	}
	// The firmware's own HTTP boot ran it: OVMF says so on the console, and
	// nothing went over TFTP or through an iPXE script.
	con, _ := os.ReadFile(vm.Console)
	if !strings.Contains(string(con), "Start HTTP Boot over IPv4") {
		t.Errorf("the console does not show OVMF's HTTP boot:\n%s", tail(con, 3000))
	}
	if strings.Contains(string(con), "iPXE") {
		t.Error("the console shows iPXE: the VM did not boot through the firmware's HTTP boot alone")
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(con), "\r", "\n"), "\n") {
		if strings.Contains(line, "HTTP Boot") || strings.Contains(line, "URI:") || strings.Contains(line, "Downloading...100%") {
			t.Logf("console: %s", strings.TrimSpace(line))
		}
	}
	// With no script, the agent asked for its boot credential by MAC (the
	// UKI's command line names the MAC and carries no credential).
	log := serveLog()
	issued := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `msg="agent uki"`) {
			t.Logf("serve: %s", line)
			if !strings.Contains(line, "ingot.mac="+vm.MAC) || strings.Contains(line, "ingot.token") {
				t.Errorf("the UKI's command line lacks ingot.mac or carries a credential: %s", line)
			}
		}
		if strings.Contains(line, `msg="boot credential issued"`) {
			t.Logf("serve: %s", line)
			issued++
		}
	}
	if issued < 2 {
		t.Errorf("%d boot credentials issued, want one per job (2)", issued)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "tftp sent") || strings.Contains(line, "tftp refused") {
			t.Errorf("a TFTP transfer: %s", line)
		}
		if strings.Contains(line, `msg="ipxe script"`) && strings.Contains(line, vm.MAC) {
			t.Errorf("an iPXE script for %s: %s", vm.MAC, line)
		}
	}
	t.Logf("time to restore %s over UEFI HTTP boot: provision %s, reimage %s", vm.Name,
		took["provision"].Round(time.Second), took["reimage"].Round(time.Second))
}
