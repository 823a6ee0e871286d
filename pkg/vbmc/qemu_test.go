package vbmc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeQEMU puts a qemu-system-x86_64 script first on PATH. It appends its
// arguments (one per line, then "--") to the returned log file and runs
// until SIGTERM, until the file "poweroff" appears beside the log (the
// guest powering itself off), or at once when FAKE_QEMU_EXIT is set.
func fakeQEMU(t *testing.T) (logFile, dir string) {
	t.Helper()
	dir = t.TempDir()
	logFile = filepath.Join(dir, "args.log")
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do echo "$a" >> %[1]q; done
echo -- >> %[1]q
[ -n "$FAKE_QEMU_EXIT" ] && exit 0
trap 'exit 0' TERM
while [ ! -e %[2]q ]; do sleep 0.02; done
rm -f %[2]q
`, logFile, filepath.Join(dir, "poweroff"))
	if err := os.WriteFile(filepath.Join(dir, "qemu-system-x86_64"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logFile, dir
}

// runs reads the argument lists of every fake QEMU start.
func runs(t *testing.T, logFile string) [][]string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	var cur []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "--" {
			out = append(out, cur)
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// bootArgs returns the -boot value of an argument list ("" if none).
func bootArgs(args []string) string {
	if i := slices.Index(args, "-boot"); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// Reset through the BMC starts and stops QEMU, the boot override picks the
// boot device once, and the guest powering off turns PowerState Off.
func TestQEMUBackend(t *testing.T) {
	logFile, dir := fakeQEMU(t)
	q := &QEMU{Args: []string{"-m", "512", "-nographic"}}
	t.Cleanup(func() { _ = q.PowerOff(t.Context()) })
	sys := "/redfish/v1/Systems/437XR1238R2"
	b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Backend = q })
	reset := func(rt string) {
		c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}).want(t, 204, rt)
	}
	power := func() string { return c.get(sys)["PowerState"].(string) }

	if p := power(); p != "Off" {
		t.Fatalf("PowerState before any power on = %q, want Off (no QEMU running)", p)
	}
	c.do(http.MethodPatch, sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}).want(t, 200, "override Pxe")
	reset("On")
	if p := power(); p != "On" || b.Power() != "On" {
		t.Fatalf("after On: PowerState %q Power() %q", p, b.Power())
	}
	eventually(t, "QEMU start recorded", func() bool { return len(runs(t, logFile)) == 1 })
	first := runs(t, logFile)[0]
	if got := bootArgs(first); got != "order=nc" {
		t.Errorf("Pxe boot: -boot %q, want order=nc; args %q", got, first)
	}
	if !slices.Equal(first[:3], []string{"-m", "512", "-nographic"}) || !slices.Contains(first, "-qmp") {
		t.Errorf("args %q: want the configured args first and a -qmp socket", first)
	}
	reset("ForceRestart")
	eventually(t, "second QEMU start", func() bool { return len(runs(t, logFile)) == 2 })
	if got := bootArgs(runs(t, logFile)[1]); got != "" {
		t.Errorf("restart after a one-time override: -boot %q, want none (normal order)", got)
	}
	if p := power(); p != "On" {
		t.Fatalf("after restart: %q", p)
	}
	c.do(http.MethodPatch, sys, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Continuous"}}).want(t, 200, "override Hdd")
	reset("ForceOff")
	if p := power(); p != "Off" {
		t.Fatalf("after ForceOff: %q", p)
	}
	for i := range 2 {
		reset("On")
		eventually(t, "QEMU start", func() bool { return len(runs(t, logFile)) == 3+i })
		if got := bootArgs(runs(t, logFile)[2+i]); got != "order=cn" {
			t.Errorf("continuous Hdd boot %d: -boot %q, want order=cn", i, got)
		}
		// The guest powers itself off.
		if err := os.WriteFile(filepath.Join(dir, "poweroff"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		eventually(t, "PowerState Off after guest poweroff", func() bool { return power() == "Off" })
	}
}

// GracefulShutdown presses the power button over QMP; the guest then powers off.
func TestQEMUGracefulShutdownQMP(t *testing.T) {
	_, dir := fakeQEMU(t)
	q := &QEMU{Grace: 5 * time.Second}
	t.Cleanup(func() { _ = q.PowerOff(t.Context()) })
	if err := q.PowerOn(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	args := q.LastArgs()
	i := slices.Index(args, "-qmp")
	sock := strings.TrimSuffix(strings.TrimPrefix(args[i+1], "unix:"), ",server=on,wait=off")
	got := make(chan []string, 1)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go fakeQMP(ln, filepath.Join(dir, "poweroff"), got)

	sys := "/redfish/v1/Systems/437XR1238R2"
	_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Backend = q })
	c.do(http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "GracefulShutdown"}).want(t, 204, "graceful")
	eventually(t, "PowerState Off after the power button", func() bool { return c.get(sys)["PowerState"] == "Off" })
	select {
	case cmds := <-got:
		if !slices.Equal(cmds, []string{"qmp_capabilities", "system_powerdown"}) {
			t.Errorf("QMP commands %q", cmds)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no QMP session")
	}
}

// fakeQMP answers one QMP client like QEMU and makes the fake guest power
// off when it gets system_powerdown.
func fakeQMP(ln net.Listener, poweroff string, got chan<- []string) {
	conn, err := ln.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintln(conn, `{"QMP": {"version": {}, "capabilities": []}}`)
	var cmds []string
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		var m map[string]string
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			return
		}
		cmds = append(cmds, m["execute"])
		fmt.Fprintln(conn, `{"return": {}}`)
		if m["execute"] == "system_powerdown" {
			fmt.Fprintln(conn, `{"event": "POWERDOWN"}`)
			_ = os.WriteFile(poweroff, nil, 0o644)
			got <- cmds
			return
		}
	}
}

// Without an answering QMP socket, graceful shutdown falls back to SIGTERM.
func TestQEMUShutdownWithoutQMP(t *testing.T) {
	fakeQEMU(t)
	q := &QEMU{}
	if err := q.PowerOn(t.Context(), "Cd"); err != nil {
		t.Fatal(err)
	}
	if got := bootArgs(q.LastArgs()); got != "order=dc" {
		t.Errorf("Cd: -boot %q", got)
	}
	if err := q.PowerOn(t.Context(), "Pxe"); err != nil || len(q.LastArgs()) == 0 || bootArgs(q.LastArgs()) != "order=dc" {
		t.Errorf("PowerOn while on restarted QEMU or failed: %v %q", err, q.LastArgs())
	}
	if err := q.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := q.State(); s != "Off" {
		t.Errorf("State after shutdown %q", s)
	}
}

// Custom boot arguments replace the default for a target; a QEMU that
// cannot start is an error naming the program.
func TestQEMUBootArgsAndMissingBinary(t *testing.T) {
	logFile, _ := fakeQEMU(t)
	t.Setenv("FAKE_QEMU_EXIT", "1")
	q := &QEMU{BootArgs: map[string][]string{"Pxe": {"-device", "virtio-net-pci,netdev=n0,bootindex=0"}}}
	if err := q.PowerOn(t.Context(), "Pxe"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fake QEMU exit", func() bool { return q.State() == "Off" })
	if r := runs(t, logFile); len(r) != 1 || !slices.Contains(r[0], "virtio-net-pci,netdev=n0,bootindex=0") || bootArgs(r[0]) != "" {
		t.Errorf("runs %q", r)
	}
	bad := &QEMU{Binary: filepath.Join(t.TempDir(), "no-qemu")}
	err := bad.PowerOn(t.Context(), "")
	if err == nil || !strings.Contains(err.Error(), "no-qemu") {
		t.Errorf("err = %v, want one naming the missing program", err)
	}
}
