//go:build e2e

package lab_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/termtext"
)

// Virtual media where PXE is impossible: under the lab-vmedia recipe
// (os.agent.boot: virtual-media) ingot builds a boot CD for each job,
// the engine inserts it through the BMC's Redfish VirtualMedia and boots it
// once (override Cd), the virtual BMC fetches it and attaches it to the
// SeaBIOS VM as a CD drive, isolinux boots the agent, and the agent asks
// for its boot credential by MAC. Provisioned and reimaged to ready, with
// no iPXE script and no TFTP transfer for the VM on the way; the CD is
// ejected at hand-off and its URL stops answering when its job ends.
func TestE2ELabVirtualMedia(t *testing.T) {
	netnstest.Need(t, "qemu-system-x86_64", "busybox", "xorriso")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := upLab(t, ctx, lab.Config{Prefix: "ingot-vmedia", VMs: []lab.VMSpec{{Firmware: "bios"}}, Recipe: "lab-vmedia"})
	vm := l.State.VMs[0]
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(l.State.Dir, name))
		return string(b)
	}
	cdBoots := func() int { return strings.Count(read("bmc.log"), "boot=Cd cd=http://") }
	var jobs []string
	took := map[string]time.Duration{}
	for _, step := range []string{"provision", "reimage"} {
		before := cdBoots()
		res, err := l.Reimage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		requireReady(t, ctx, l, res[0])
		t.Logf("%s: %s", step, res[0].Restore())
		took[step] = res[0].Status.Restore()
		jobs = append(jobs, res[0].Job.ID)
		// The VM booted this job's CD: the BMC started it with the CD
		// first, and isolinux said whose CD it is.
		if cdBoots() <= before {
			t.Errorf("%s: bmc.log shows no power-on booting the virtual CD", step)
		}
		banner := "ingot: booting the agent of job " + res[0].Job.ID + " for " + vm.Name + " from virtual media"
		if c := console(vm); !strings.Contains(c, banner) {
			// Show what the console has where the banner should be,
			// quoted: it failed once without stress-ng, before the
			// console was rendered (see termtext).
			t.Errorf("%s: the console lacks isolinux's %q; around its start: %q", step, banner, near(c, "ingot: booting the agent of job "+res[0].Job.ID))
		}
		evs, err := l.Events(ctx, vm.Name)
		if err != nil {
			t.Fatal(err)
		}
		var media []string
		for _, ev := range evs {
			if ev.Kind == "bmc.boot" || ev.Kind == "bmc.media" {
				media = append(media, ev.Message)
			}
		}
		all := strings.Join(media, "\n")
		if !strings.Contains(all, "boot CD inserted as virtual media") || !strings.Contains(all, "boot CD ejected") {
			t.Errorf("%s: the machine's events lack the insert and the eject:\n%s", step, all)
		}
	}
	if err := l.WaitConsole(ctx, vm.Name, "ingot-lab-image: reported through ingot-agent"); err != nil {
		t.Error(err)
	}

	// Nothing went over the network boot path for this VM; the agent's
	// command line carried its MAC and no credential.
	con := console(vm)
	if !strings.Contains(con, "ingot.mac="+vm.MAC) || strings.Contains(con, "ingot.token=") {
		t.Error("the agent's command line on the console lacks ingot.mac or carries a credential")
	}
	// SeaBIOS booted the CD each time; the NIC's iPXE ROM only announced
	// itself during POST and never ran.
	if n := strings.Count(con, "Booting from DVD/CD"); n != 2 {
		t.Errorf("SeaBIOS booted from the CD %d times, want 2", n)
	}
	if strings.Contains(con, "iPXE initialising devices") || strings.Contains(con, "Booting from ROM") {
		t.Error("the console shows iPXE booting: the VM booted from the network")
	}
	serve := read("serve.log")
	if n := strings.Count(serve, `msg="boot CD built"`); n != 2 {
		t.Errorf("serve.log shows %d boot CDs built, want 2 (one a job)", n)
	}
	if !strings.Contains(serve, `msg="boot CD served"`) {
		t.Error("serve.log shows no boot CD served")
	}
	for _, line := range strings.Split(serve, "\n") {
		if strings.Contains(line, "tftp sent") || strings.Contains(line, "tftp refused") {
			t.Errorf("a TFTP transfer: %s", line)
		}
		if strings.Contains(line, `msg="ipxe script"`) && strings.Contains(line, vm.MAC) {
			t.Errorf("an iPXE script for %s: %s", vm.MAC, line)
		}
	}
	bmc := read("bmc.log")
	for _, want := range []string{`msg="virtual media inserted"`, `msg="virtual media fetched"`, `msg="virtual media ejected"`} {
		if !strings.Contains(bmc, want) {
			t.Errorf("bmc.log lacks %s", want)
		}
	}
	// The first job's CD stopped answering when its job ended.
	urls := regexp.MustCompile(`image=(http://\S+/ingot-agent\.iso)`).FindAllStringSubmatch(bmc, -1)
	if len(urls) < 2 || urls[0][1] == urls[len(urls)-1][1] {
		t.Fatalf("bmc.log names %d CD URLs, want one a job", len(urls))
	}
	resp, err := l.HTTP.Get(urls[0][1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the CD of ended job %s answers %d, want 404", jobs[0], resp.StatusCode)
	}
	t.Logf("time to restore %s from virtual media: provision %s, reimage %s", vm.Name,
		took["provision"].Round(time.Second), took["reimage"].Round(time.Second))
}

// console is a VM's serial console as a terminal shows it (SeaBIOS
// mirrors the screen with cursor moves and carriage returns).
func console(vm lab.VM) string {
	b, _ := os.ReadFile(vm.Console)
	return termtext.Lines(b)
}

// near returns up to 300 bytes of c from the last place it has prefix
// or, when it has none, the 300 bytes after each of the console's last two
// firmware banners (the CD boot and the disk boot after it): whether the
// firmware booted the CD at all, or fell through to the network.
func near(c, prefix string) string {
	if i := strings.LastIndex(c, prefix); i >= 0 {
		return c[i:min(len(c), i+300)]
	}
	var parts []string
	for end := len(c); len(parts) < 2; {
		i := strings.LastIndex(c[:end], "SeaBIOS (version")
		if i < 0 {
			break
		}
		parts = append([]string{c[i:min(len(c), i+300)]}, parts...)
		end = i
	}
	return strings.Join(parts, " [...] ")
}
