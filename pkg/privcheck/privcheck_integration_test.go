//go:build integration

package privcheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// helperEnv makes the test binary, re-run under setpriv, report what
// Current and Check see instead of running the tests.
const helperEnv = "INGOT_PRIVCHECK_HELPER"

// helperReport is what the re-run process saw.
type helperReport struct {
	Caps     CapSet
	UID      int
	User     string
	Problems []Problem
	Error    string
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		sys, err := Current()
		rep := helperReport{Caps: sys.Caps, UID: sys.UID, User: sys.User}
		if err != nil {
			rep.Error = err.Error()
		}
		plan := fullPlan()
		plan.Write = []Path{{Path: dir, Why: "--data"}}
		plan.Read = nil
		rep.Problems = Check(plan, sys)
		json.NewEncoder(os.Stdout).Encode(rep)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Check on a real process: the test binary re-run as nobody through setpriv
// with the unit's capabilities less CAP_NET_RAW. It reads exactly
// CAP_NET_BIND_SERVICE from /proc/self/status, names CAP_NET_RAW for the
// router advertisements, and finds the root-owned data folder not writable.
// (The same refusal from `ingot serve` itself is
// TestIntegrationServeRefusesWithoutNetRaw in pkg/packaging/deb.)
func TestIntegrationCheckWithoutNetRaw(t *testing.T) {
	netnstest.Need(t, "setpriv")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // /tmp/...: the binary and a root-only folder
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "privcheck.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	caps := "-all,+net_bind_service"
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps="+caps,
		"--ambient-caps="+caps, "--bounding-set="+caps, "--no-new-privs", bin)
	cmd.Env = []string{helperEnv + "=" + data}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("setpriv %s: %v\n%s", bin, err, out)
	}
	var rep helperReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Error != "" || rep.Caps != CapSet(0).With(CapNetBindService) || rep.User != "nobody" {
		t.Errorf("the process saw uid %d (%s) with %v (error %q), want nobody with CAP_NET_BIND_SERVICE", rep.UID, rep.User, rep.Caps, rep.Error)
	}
	var msgs []string
	for _, p := range rep.Problems {
		if !p.Optional {
			msgs = append(msgs, p.Message)
		}
	}
	want := []string{
		"router advertisements on eth1 open a raw ICMPv6 socket (--ra): needs CAP_NET_RAW (or --ra=false: iPXE then waits ~14 s for IPv6 before it boots)",
		data + " is not writable by uid 65534 (nobody): --data (permission denied)",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("required problems:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	t.Logf("as serve would put it: %v", Error(System{Caps: rep.Caps, UID: rep.UID, User: rep.User}, rep.Problems))
}
