//go:build e2e

package vbmc

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// The QEMU backend drives a real qemu-system-x86_64 through the BMC: the
// boot override becomes -boot, QMP answers on the socket it creates,
// GracefulShutdown presses the power button (a guest without an OS ignores
// it, so the grace period ends in a forced off), ForceOff stops it.
func TestE2EQEMUBackend(t *testing.T) {
	netnstest.NeedPrograms(t, "qemu-system-x86_64")
	q := &QEMU{Args: []string{"-machine", "q35", "-accel", "tcg", "-m", "64", "-nodefaults", "-display", "none", "-no-reboot"},
		Grace: 2 * time.Second}
	t.Cleanup(func() { _ = q.PowerOff(t.Context()) })
	sys := "/redfish/v1/Systems/437XR1238R2"
	b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Backend = q })
	reset := func(rt string) {
		c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}).want(t, 204, rt)
	}
	c.do(http.MethodPatch, sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}).want(t, 200, "override")
	reset("On")
	if b.Power() != "On" {
		t.Fatalf("after On: %s", b.Power())
	}
	args := q.LastArgs()
	if i := slices.Index(args, "-boot"); i < 0 || args[i+1] != "order=nc" {
		t.Errorf("args %q: want -boot order=nc", args)
	}
	time.Sleep(time.Second) // QEMU creates the QMP socket while starting
	i := slices.Index(args, "-qmp")
	sock := strings.TrimSuffix(strings.TrimPrefix(args[i+1], "unix:"), ",server=on,wait=off")
	if err := qmpCommand(t.Context(), sock, "query-status"); err != nil {
		t.Errorf("QMP on the real QEMU: %v", err)
	}
	if b.Power() != "On" {
		t.Fatalf("QEMU exited on its own: %s", b.Power())
	}
	reset("GracefulShutdown")
	eventually(t, "forced off after the grace period", func() bool { return b.Power() == "Off" })

	c.do(http.MethodPatch, sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"}}).want(t, 200, "override Hdd")
	reset("On")
	if i := slices.Index(q.LastArgs(), "-boot"); i < 0 || q.LastArgs()[i+1] != "order=cn" {
		t.Errorf("args %q: want -boot order=cn", q.LastArgs())
	}
	reset("ForceOff")
	if b.Power() != "Off" {
		t.Errorf("after ForceOff: %s", b.Power())
	}
	eventually(t, "the QMP socket folder removed", func() bool {
		_, err := os.Stat(filepath.Dir(sock))
		return os.IsNotExist(err)
	})
}
