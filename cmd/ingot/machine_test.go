package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// machineCLI runs ingot in-process against one database and recipes folder.
type machineCLI struct {
	t       *testing.T
	db      string
	recipes string
}

func newMachineCLI(t *testing.T) *machineCLI {
	t.Setenv("USER", "alice")
	t.Setenv("INGOT_DB", "") // the flag below decides, not the developer's environment
	dir := t.TempDir()
	recipes := filepath.Join(dir, "recipes")
	if err := os.Mkdir(recipes, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"gpu-train-h100x8", "lab-qemu"} {
		if err := os.WriteFile(filepath.Join(recipes, r+".yaml"), []byte("name: "+r+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(recipes, "base-gpu.yaml"), []byte("name: base-gpu\ntemplate: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &machineCLI{t: t, db: filepath.Join(dir, "ingot.db"), recipes: recipes}
}

// run runs `ingot ARGS --db DB` and returns stdout, stderr and the error.
func (c *machineCLI) run(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	args = append(args, "--db", c.db)
	err := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// ok runs ingot and fails the test on error.
func (c *machineCLI) ok(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("ingot %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// store opens the database directly (between commands) for setup.
func (c *machineCLI) store() *store.Bolt {
	c.t.Helper()
	s, err := store.Open(c.db, store.Options{Timeout: time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

var (
	maskTime = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?Z?`)
	maskID   = regexp.MustCompile(`\bm-[0-9a-f]{10}\b`)
)

// checkCLIGolden compares out, with times and IDs masked (same widths, so
// columns stay aligned), to testdata/NAME.golden; UPDATE_TESTDATA=1 rewrites it.
func checkCLIGolden(t *testing.T, name, out string) {
	t.Helper()
	out = maskTime.ReplaceAllStringFunc(out, func(s string) string { return strings.Repeat("T", len(s)) })
	out = maskID.ReplaceAllString(out, "m-IDIDIDIDID")
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("UPDATE_TESTDATA") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), out); diff != "" {
		t.Errorf("%s differs (-want +got; UPDATE_TESTDATA=1 to accept):\n%s", path, diff)
	}
}

func TestMachineLifecycleCLI(t *testing.T) {
	c := newMachineCLI(t)
	c.ok("machine", "add", "gpu-01", "--mac", "52-54-00-AA-BB-01", "--mac", "52:54:00:aa:bb:02", "--serial", "SN1",
		"--bmc", "https://10.0.0.5", "--bmc-cred", "env:GPU01_BMC", "--recipe", "gpu-train-h100x8", "--recipes", c.recipes,
		"--rack", "r12", "--location", "row3/r12/u07", "--ip", "192.168.10.21")
	c.ok("machine", "add", "--mac", "52:54:00:aa:bb:03", "lab-01", "--rack", "r1")
	c.ok("machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:04", "--recipe", "gpu-train-h100x8", "--recipes", c.recipes)

	checkCLIGolden(t, "machine_ls", c.ok("machine", "ls"))
	checkCLIGolden(t, "machine_ls_recipe", c.ok("machine", "ls", "--recipe", "gpu-train-h100x8"))
	if out := c.ok("machine", "ls", "--state", "ready"); strings.Count(out, "\n") != 1 {
		t.Errorf("ls --state ready lists machines:\n%s", out)
	}

	out := c.ok("machine", "set-recipe", "lab-01", "lab-qemu", "--recipes", c.recipes)
	if out != "lab-01: recipe (none) -> lab-qemu\n" {
		t.Errorf("set-recipe printed %q", out)
	}
	c.ok("machine", "set-recipe", "lab-01", "gpu-train-h100x8", "--recipes", c.recipes)

	s := c.store()
	m1, _ := s.GetMachine(context.Background(), "gpu-01")
	inv := machineTestInventory()
	if _, err := s.PutInventory(context.Background(), m1.ID, inv); err != nil {
		t.Fatal(err)
	}
	inv.GPUs = inv.GPUs[:1]
	inv.GPUs[0].LinkCurrent.Width = 8
	inv.PSUs[1].State, inv.PSUs[1].Health = "UnavailableOffline", "Critical"
	if _, err := s.PutInventory(context.Background(), m1.ID, inv); err != nil {
		t.Fatal(err)
	}
	s.Close()

	checkCLIGolden(t, "machine_show", c.ok("machine", "show", "gpu-01"))
	checkCLIGolden(t, "machine_show_empty", c.ok("machine", "show", "lab-01"))
	checkCLIGolden(t, "events", c.ok("events", "lab-01"))
	checkCLIGolden(t, "inventory_show", c.ok("inventory", "show", "gpu-01"))
	checkCLIGolden(t, "inventory_history", c.ok("inventory", "show", "gpu-01", "--history"))
	checkCLIGolden(t, "inventory_diff", c.ok("inventory", "show", "gpu-01", "--diff"))
	if got := c.ok("inventory", "show", "gpu-01", "--diff", "2", "1"); !strings.Contains(got, "snapshot 2") || !regexp.MustCompile(`gpus\.count\s+1\s+2\n`).MatchString(got) {
		t.Errorf("--diff 2 1:\n%s", got)
	}

	// Events: newest N, or after --since.
	var evs []machine.Event
	if err := json.Unmarshal([]byte(c.ok("events", "lab-01", "-n", "1", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Seq != 3 || evs[0].Fields["to"] != "gpu-train-h100x8" || evs[0].Actor != "operator:alice" {
		t.Errorf("events -n 1 = %+v", evs)
	}
	if err := json.Unmarshal([]byte(c.ok("events", "lab-01", "--since", "1", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 2 {
		t.Errorf("events --since 1 = %+v", evs)
	}

	// JSON output is what scripts read.
	var view struct {
		Machine   machine.Machine `json:"machine"`
		Events    []machine.Event `json:"events"`
		Inventory *store.Snapshot `json:"inventory"`
	}
	if err := json.Unmarshal([]byte(c.ok("machine", "show", "gpu-01", "-o", "json")), &view); err != nil {
		t.Fatal(err)
	}
	if view.Machine.Name != "gpu-01" || len(view.Events) != 1 || view.Inventory == nil || view.Inventory.Seq != 2 {
		t.Errorf("machine show -o json = %+v", view)
	}
	var diff struct {
		Changes []machine.Change `json:"changes"`
	}
	if err := json.Unmarshal([]byte(c.ok("inventory", "show", "gpu-01", "--diff", "1", "2", "-o", "json")), &diff); err != nil {
		t.Fatal(err)
	}
	if len(diff.Changes) == 0 || diff.Changes[0].Path != "gpus.count" {
		t.Errorf("diff -o json = %+v", diff)
	}

	out = c.ok("machine", "rm", "gpu-02")
	if !strings.HasPrefix(out, "removed gpu-02 (m-") {
		t.Errorf("rm printed %q", out)
	}
	if _, _, err := c.run("machine", "show", "gpu-02"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("show after rm: %v", err)
	}
	var ms []machine.Machine
	if err := json.Unmarshal([]byte(c.ok("machine", "ls", "-o", "json")), &ms); err != nil || len(ms) != 2 {
		t.Errorf("ls -o json after rm: %d machines, %v", len(ms), err)
	}
}

func machineTestInventory() machine.Inventory {
	h100 := func(slot, serial string) machine.GPU {
		return machine.GPU{Slot: slot, Vendor: "NVIDIA", Model: "H100 80GB HBM3", VRAMMiB: 81920, Serial: serial,
			LinkCurrent: machine.PCIeLink{Gen: 5, Width: 16}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16},
			Firmware: "96.00.5E.00.01", Health: "OK"}
	}
	return machine.Inventory{
		Source: "redfish",
		System: machine.System{Vendor: "Supermicro", Model: "SYS-821GE-TNHR", Serial: "SN1", BIOSVersion: "2.1", BMCVersion: "1.02", PowerState: "On"},
		CPUs:   []machine.CPU{{Socket: "CPU0", Model: "Xeon 8480+", Cores: 56}, {Socket: "CPU1", Model: "Xeon 8480+", Cores: 56}},
		DIMMs:  []machine.DIMM{{Slot: "A1", SizeMiB: 65536}, {Slot: "B1", SizeMiB: 65536}},
		GPUs:   []machine.GPU{h100("SXM1", "G1"), h100("SXM2", "G2")},
		NICs:   []machine.NIC{{Name: "eth0", MAC: "52:54:00:aa:bb:01", Model: "ConnectX-7", SpeedMbps: 400000, LinkUp: true}},
		Disks:  []machine.Disk{{Name: "nvme0n1", Model: "PM1743", SizeBytes: 3_840_000_000_000, Media: "NVMe", Health: "OK"}},
		PSUs: []machine.PSU{{Name: "PSU1", Model: "PWS-3K", RatedWatts: 3000, State: "Enabled", Health: "OK"},
			{Name: "PSU2", Model: "PWS-3K", RatedWatts: 3000, State: "Enabled", Health: "OK"}},
		Firmware: []machine.Firmware{{Component: "BIOS", Version: "2.1"}},
		Problems: []machine.Problem{{Part: "Systems/1/Storage/1/Drives/M.2-2", Detail: "500 Internal Server Error"}},
	}
}

func TestMachineCLIErrors(t *testing.T) {
	c := newMachineCLI(t)
	c.ok("machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:01", "--serial", "SN1")
	tests := map[string]struct {
		args []string
		want string
	}{
		"bad MAC":            {[]string{"machine", "add", "gpu-02", "--mac", "zz"}, `--mac "zz": expected six hex bytes like 52:54:00:12:34:56`},
		"no MAC":             {[]string{"machine", "add", "gpu-02"}, "--mac: at least one MAC is required"},
		"bad name":           {[]string{"machine", "add", "gpu 02", "--mac", "52:54:00:aa:bb:02"}, `NAME "gpu 02": expected a hostname`},
		"no name":            {[]string{"machine", "add", "--mac", "52:54:00:aa:bb:02"}, "expected 1 argument(s) NAME, got 0"},
		"bad BMC":            {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--bmc", "10.0.0.5"}, `--bmc "10.0.0.5": expected a URL like https://10.0.0.5`},
		"bad cred":           {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--bmc-cred", "hunter2"}, `--bmc-cred "hunter2": expected file:PATH or env:VARIABLE`},
		"bad IP":             {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--ip", "::1"}, `--ip "::1": expected an IPv4 address`},
		"unknown recipe":     {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--recipe", "nope", "--recipes", c.recipes}, `recipe "nope": expected ` + filepath.Join(c.recipes, "nope.yaml") + " to exist"},
		"duplicate name":     {[]string{"machine", "add", "gpu-01", "--mac", "52:54:00:aa:bb:02"}, "name gpu-01 already belongs to machine gpu-01"},
		"duplicate MAC":      {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:AA:BB:01"}, "MAC 52:54:00:aa:bb:01 already belongs to machine gpu-01"},
		"duplicate serial":   {[]string{"machine", "add", "gpu-02", "--mac", "52:54:00:aa:bb:02", "--serial", "SN1"}, "serial SN1 already belongs to machine gpu-01"},
		"bad output":         {[]string{"machine", "ls", "-o", "yaml"}, `-o "yaml": expected table or json`},
		"bad state":          {[]string{"machine", "ls", "--state", "sleeping"}, `--state "sleeping": expected one of`},
		"unknown node":       {[]string{"machine", "show", "gpu-99"}, "reading machine gpu-99: not found"},
		"set-recipe absent":  {[]string{"machine", "set-recipe", "gpu-01", "nope", "--recipes", c.recipes}, `recipe "nope": expected`},
		"recipe as path":     {[]string{"machine", "set-recipe", "gpu-01", "../x", "--recipes", c.recipes}, `recipe "../x": expected a recipe name, not a path`},
		"template assigned":  {[]string{"machine", "set-recipe", "gpu-01", "base-gpu", "--recipes", c.recipes}, `is a template (template: true)`},
		"no inventory":       {[]string{"inventory", "show", "gpu-01"}, "machine gpu-01 has no inventory yet"},
		"diff needs two":     {[]string{"inventory", "show", "gpu-01", "--diff"}, "has 0 snapshot(s); expected two to compare"},
		"diff bad seq":       {[]string{"inventory", "show", "gpu-01", "--diff", "1", "x"}, `B "x": expected a snapshot sequence number`},
		"negative n":         {[]string{"events", "gpu-01", "-n", "-1"}, "-n -1: expected a count >= 0"},
		"inspect dispatched": {[]string{"machine", "inspect", "gpu-01"}, "inspect"}, // gpu-01 has no BMC
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, stderr, err := c.run(tc.args...)
			if err == nil {
				t.Fatalf("ingot %s succeeded", strings.Join(tc.args, " "))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q (stderr: %s)", err, tc.want, stderr)
			}
		})
	}
}

func TestMachineCLIMissingDatabase(t *testing.T) {
	t.Setenv("INGOT_DB", "")
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(t.TempDir(), "nope.db")
	err := run(context.Background(), []string{"machine", "ls", "--db", missing}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "set --db or INGOT_DB") {
		t.Errorf("ls on a missing database: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("ls created the database file")
	}
}

func TestMachineCLIDatabaseFromEnv(t *testing.T) {
	c := newMachineCLI(t)
	t.Setenv("INGOT_DB", c.db)
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"machine", "add", "env-01", "--mac", "52:54:00:aa:bb:09"}, &stdout, &stderr); err != nil {
		t.Fatal(err, stderr.String())
	}
	if out := c.ok("machine", "ls"); !strings.Contains(out, "env-01") {
		t.Errorf("machine added via INGOT_DB not in --db listing:\n%s", out)
	}
}
