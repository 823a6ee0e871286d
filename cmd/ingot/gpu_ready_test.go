package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"
	wire "github.com/ingot-dev/ingot/pkg/api/operator"
	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/drift"
	"github.com/ingot-dev/ingot/pkg/engine"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// gpuReadyCase is one machine of TestGPUReady: a fault set on the node (its
// BMC and what its agent sees) or its installed OS, the waivers an operator
// gives it, and how its reimage must end.
type gpuReadyCase struct {
	recipe string // default gpu-train-h100x8
	node   func(*hgxSpec)
	os     func(*hgxOS)
	waive  []string // checks waived through the API before the reimage
	want   machine.State
	reason []string // the job's reason contains each
	check  func(t *testing.T, l *hgxLab, n *hgxNode, j *store.Job)
}

// The shipped GPU recipes reach ready on a healthy 8x H100 HGX node, and
// each promise of "ready is proof" that a node breaks ends its job failed
// with the reason, never ready: real engine and API (newProvisioning,
// HTTP), the shipped recipes pinned by `ingot recipe pin`, a virtual BMC
// per node serving a synthetic HGX tree through pkg/bmc, agent checks from
// pkg/agent/checks, burn-in from pkg/burnin's Runner on tool fixtures.
func TestGPUReady(t *testing.T) {
	cases := map[string]gpuReadyCase{
		"8x H100 as the recipe says":               {want: machine.StateReady, check: gpuReadyHealthy},
		"4x L40S, Debian-only, as the recipe says": withCheck(l40sCase(machine.StateReady, nil), l40sHealthy),
		"4x L40S: clpeak lists two of the four GPUs": l40sCase(machine.StateFailed,
			func(o *hgxOS) { o.tools["clpeak"] = "../../pkg/burnin/testdata/clpeak/pass_2gpu.txt" },
			"burn-in failed: clpeak: ", "no result for GPU 2; GPU 3"),
		"4x L40S: a cuBLAS product differs from the CPU's": withCheck(l40sCase(machine.StateFailed,
			func(o *hgxOS) { o.tools["matrixMulCUBLAS"] = "../../pkg/burnin/testdata/cublas/miscompare.txt" },
			"burn-in failed: cublas-gemm: matrixMulCUBLAS: GPU 1: product differs from the CPU's in 4 of 12 runs"),
			verdictIs("cublas-gemm", api.VerdictFailed)),
		"4x L40S: bandwidthTest not in the image": withCheck(l40sCase(machine.StateFailed,
			func(o *hgxOS) { o.missing["bandwidthTest"] = true },
			"burn-in failed: cuda-bandwidth: did not run: bandwidthTest: not found in the installed system"),
			verdictIs("cuda-bandwidth", api.VerdictCouldNotRun)),
		"a GPU missing": {
			node:   func(s *hgxSpec) { s.gpus = s.gpus[:7] },
			reason: []string{"inventory: hardware does not match recipe gpu-train-h100x8", "gpu: missing GPU: 7 of 8 H100 80GB HBM3 found"}},
		"a GPU fallen off the bus": {
			// The BMC still lists SXM8; the machine does not see it.
			node: func(s *hgxSpec) { s.fallenOff = 1 },
			reason: []string{"gpu: missing GPU: 7 of 8 H100 80GB HBM3 found",
				"GPU in the BMC inventory only; the machine does not see it in-band"}},
		"a GPU at Gen4 x8": {
			node: func(s *hgxSpec) { s.gpus[2].gen, s.gpus[2].width = 4, 8 },
			reason: []string{"inventory: hardware does not match recipe", "PCIe link trained at x8 instead of x16",
				"PCIe link at Gen4 instead of Gen5"}},
		"a driver pin mismatch at first boot": {
			os:     func(o *hgxOS) { o.software.Drivers["nvidia"] = "535.288.01" },
			reason: []string{"verify: driver versions differ from the recipe's pins: nvidia: want 535.309.01, found 535.288.01"}},
		// What images/debian-12-nvidia*/ingot-firstboot reports on a node
		// whose driver does not load (TestFirstBootReporterNoGPU): the job
		// ends failed at first boot with the reason, not at a deadline.
		"no GPU for the driver at first boot": {
			os: func(o *hgxOS) {
				o.software.Drivers["nvidia"] = "not loaded (no NVIDIA GPU: no PCI display or 3D controller of vendor 10de; " +
					"modprobe nvidia: modprobe: ERROR: could not insert 'nvidia_current': No such device)"
			},
			reason: []string{"verify: driver versions differ from the recipe's pins: nvidia: want 535.309.01, found not loaded (no NVIDIA GPU",
				"could not insert 'nvidia_current': No such device"}},
		"BIOS firmware not at the pin": {
			// The machine runs BIOS 1.7.1: its BMC (System and
			// FirmwareInventory) and its SMBIOS, read in-band, say so.
			node: func(s *hgxSpec) { s.bios = "1.7.1" },
			reason: []string{"inventory: hardware does not match recipe",
				"firmware BIOS: BIOS firmware not at the pinned version (policy block) (expected 1.7.2, found 1.7.1)"}},
		"bus bandwidth under threshold": {
			os: func(o *hgxOS) { o.tools["all_reduce_perf"] = "testdata/hgx-h100/nccl-low.txt" },
			reason: []string{"verify: burn-in failed: nccl-allreduce: all_reduce_perf: 16GiB at 313.2GB/s, " +
				"want at least 460GB/s"}},
		"a FAULTY gpu-burn line": {
			os:     func(o *hgxOS) { o.tools["gpu_burn"] = "testdata/hgx-h100/gpuburn-faulty.txt" },
			reason: []string{"verify: burn-in failed: gpu-burn: gpu-burn: GPU 3: FAULTY, 4096 errors"}},
		"a required burn-in tool missing": {
			os:     func(o *hgxOS) { o.missing["all_reduce_perf"] = true },
			reason: []string{"verify: burn-in failed: nccl-allreduce: did not run: all_reduce_perf: not found in the installed system"}},
		"dcgmi missing where the recipe requires dcgm-diag": {
			recipe: "gpu-train-h100x8-dcgm",
			os:     func(o *hgxOS) { o.missing["dcgmi"] = true },
			reason: []string{"verify: burn-in failed: dcgm-diag: did not run: dcgmi: not found in the installed system"}},
		"a first boot without the secret": {
			os:     func(o *hgxOS) { o.noSecret = true },
			reason: []string{"firstboot: step firstboot timed out"},
			check:  gpuReadyRefusedFirstBoot},
		"bios.boot_mode does not stick": {
			// A BMC with no Boot.BootSourceOverrideMode: pkg/bmc stages the
			// BIOS attribute BootMode instead, which this BIOS drops.
			node: func(s *hgxSpec) {
				s.bootModes, s.biosAttrs["BootMode"], s.stuckBIOS = nil, "LegacyBios", []string{"BootMode"}
			},
			reason: []string{"verify: boot mode is Legacy, the recipe's bios.boot_mode is uefi"}},
		"the management network on a workload port": {
			node: func(s *hgxSpec) { s.nics[0].boot, s.nics[3].boot, s.nics[3].vlan = false, true, 110 },
			reason: []string{"inventory: hardware does not match recipe",
				"the machine booted over ens3np0 (ConnectX-7 400Gbps, switch leaf-r07 port Eth1/ens3np0), a workload port"}},
		"the management port on the workload VLAN": {
			node: func(s *hgxSpec) { s.nics[0].vlan = 210 },
			reason: []string{"inventory: hardware does not match recipe",
				"nic management eno1np0: the boot port's switch port is on another VLAN than the recipe's management_vlan (expected 110, found 210)"}},

		// Waivers: an operator lets exactly one machine past one failed
		// check. The workload ports trained at 200G: nic-link fails, and
		// drift only warns (a slower NIC is not critical), so the check
		// alone decides.
		"waiver: nic-link waived": {
			node: hgxSlowWorkloadNICs, waive: []string{"nic-link"}, want: machine.StateReady, check: gpuReadyWaived},
		"waiver: nic-link, no waiver": {
			node:   hgxSlowWorkloadNICs,
			reason: []string{"checks: acceptance checks failed: nic-link: found 0 of 8 ports up at 400Gbps (not: eno1np0 up 25000Mbps, ens1np0 up 200000Mbps"}},
		"waiver: nic-link waived, nccl-allreduce fails too": {
			node: hgxSlowWorkloadNICs, waive: []string{"nic-link"},
			os:     func(o *hgxOS) { o.tools["all_reduce_perf"] = "testdata/hgx-h100/nccl-low.txt" },
			reason: []string{"verify: burn-in failed: nccl-allreduce: all_reduce_perf: 16GiB at 313.2GB/s"},
			check:  gpuReadyWaiverScope},
		"waiver: pcie-link waived on a Gen4 x8 GPU": {
			node: func(s *hgxSpec) { s.gpus[2].gen, s.gpus[2].width = 4, 8 }, waive: []string{"pcie-link"},
			want: machine.StateReady, check: gpuReadyWaived},

		"firmware drift only the BMC shows": {
			node:   func(s *hgxSpec) { s.bmc = "7.10.20.00" },
			reason: []string{"firmware BMC: BMC firmware not at the pinned version (policy block) (expected 7.10.30.00, found 7.10.20.00)"}},
		"in-band inventory without PSUs": {
			node: func(s *hgxSpec) { s.inbandPSUs = false }, want: machine.StateReady},
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := newHGXLab(ctx, t)
	names := slices.Sorted(maps.Keys(cases))
	type setup struct {
		name, recipe, root string
		spec               hgxSpec
		os                 hgxOS
	}
	var setups []*setup
	for i, name := range names {
		c := cases[name]
		s := &setup{name: name, recipe: c.recipe, spec: defaultHGX(i + 1), os: defaultHGXOS(), root: t.TempDir()}
		if c.node != nil {
			c.node(&s.spec)
		}
		if c.os != nil {
			c.os(&s.os)
		}
		if s.recipe == "" {
			s.recipe = "gpu-train-h100x8"
		}
		setups = append(setups, s)
	}
	var wg sync.WaitGroup // the trees are some 100 files each
	errs := make([]error, len(setups))
	for i, s := range setups {
		wg.Go(func() { errs[i] = writeHGXTree(s.root, s.spec) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*hgxNode{}
	for _, s := range setups {
		n := l.enrol(ctx, s.spec.index, s.root, s.spec, s.os, s.recipe)
		for _, check := range cases[s.name].waive {
			req := wire.WaiverRequest{Check: check, Reason: "INFRA-1234: " + s.name}
			if code, err := l.sim.Call(ctx, l.op, "POST", "/api/v1/machines/"+n.id+"/waivers", req, nil); code != http.StatusCreated {
				t.Fatalf("%s: waiving %s: %d %v", s.name, check, code, err)
			}
		}
		nodes[s.name] = n
	}
	go l.sim.Run(ctx)
	jobs := l.reimage(ctx, nodes)

	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			n := nodes[name]
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			j, err := l.prov.Engine.Wait(wctx, jobs[n.name])
			if err != nil {
				t.Fatalf("%s: job %s did not end: %v\nsimulation:\n%s", n.name, jobs[n.name], err, n.history())
			}
			want := c.want
			if want == "" {
				want = machine.StateFailed
			}
			// The engine marks a failed job before its machine (a ready
			// machine before its job): wait, bounded, for the machine too.
			m, evs := l.settled(ctx, t, n)
			wantJob := store.JobSucceeded
			if want != machine.StateReady {
				wantJob = store.JobFailed
			}
			if m.State != want || j.State != wantJob {
				t.Fatalf("machine %s, job %s (%s); want machine %s, job %s\nsimulation:\n%s",
					m.State, j.State, j.Reason, want, wantJob, n.history())
			}
			for _, r := range c.reason {
				if !strings.Contains(j.Reason, r) {
					t.Errorf("job reason %q\nwant it to contain %q", j.Reason, r)
				}
			}
			if len(evs) == 0 {
				t.Fatal("no events")
			}
			last := evs[len(evs)-1]
			if last.Kind != "state" || last.To != want || (want == machine.StateFailed && last.Message != j.Reason) {
				t.Errorf("last event %+v: want the move to %s with the job's reason", last, want)
			}
			if want != machine.StateReady && slices.ContainsFunc(evs, func(e machine.Event) bool { return e.To == machine.StateReady }) {
				t.Errorf("a failed machine was ready on the way: %+v", evs)
			}
			if c.check != nil {
				c.check(t, l, n, j)
			}
		})
	}
}

// settled returns the node's machine and events once it is ready or
// failed and that move is recorded, or as they are after 5 s.
func (l *hgxLab) settled(ctx context.Context, t *testing.T, n *hgxNode) (*machine.Machine, []machine.Event) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m, err := l.st.GetMachine(ctx, n.id)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := l.st.Events(ctx, n.id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		final := m.State == machine.StateReady || m.State == machine.StateFailed
		if final && len(evs) > 0 && evs[len(evs)-1].To == m.State || time.Now().After(deadline) {
			return m, evs
		}
	}
}

// hgxSlowWorkloadNICs: every ConnectX-7 port trained at 200G.
func hgxSlowWorkloadNICs(s *hgxSpec) {
	for i := range s.nics[1:] {
		s.nics[i+1].mbps = 200000
	}
}

// reimage starts every node's reimage in one API request, as the
// operator's `ingot reimage` does, and returns the job ID of each node.
func (l *hgxLab) reimage(ctx context.Context, nodes map[string]*hgxNode) map[string]string {
	t := l.t
	req := wire.ReimageRequest{Reason: "acceptance of the GPU recipes"}
	for _, n := range nodes {
		req.Machines = append(req.Machines, n.name)
	}
	sort.Strings(req.Machines)
	var res []wire.ReimageResult
	if code, err := l.sim.Call(ctx, l.op, "POST", "/api/v1/reimage", req, &res); code != http.StatusAccepted {
		t.Fatalf("reimage: %d %v", code, err)
	}
	jobs := map[string]string{}
	for _, r := range res {
		if r.Error != "" || r.Job == nil {
			t.Fatalf("reimage %s: %s", r.Machine, r.Error)
		}
		jobs[r.Machine] = r.Job.ID
	}
	return jobs
}

// gpuReadyHealthy: the ready job keeps its evidence (every check passed,
// the burn-in numbers, the software, no critical finding), the events show
// each step, the burn-in ran the recipe's tools with its arguments, and
// the BMC, read back over Redfish, holds what the recipe set.
func gpuReadyHealthy(t *testing.T, l *hgxLab, n *hgxNode, j *store.Job) {
	st, err := engine.Status(j)
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]engine.CheckResult{}
	for _, c := range append(st.Checks, st.BurnIn...) {
		if c.OK {
			ok[c.Name] = c
		}
	}
	for _, name := range []string{"gpu-count", "gpu-model", "pcie-link", "memory-size", "nic-link", "disk-health", "gpu-burn", "nccl-allreduce"} {
		if _, passed := ok[name]; !passed {
			t.Errorf("check %s did not pass: checks %+v, burn-in %+v", name, st.Checks, st.BurnIn)
		}
	}
	if c := ok["gpu-count"]; c.Value != 8 {
		t.Errorf("gpu-count value %g, want 8", c.Value)
	}
	burn, nccl := ok["gpu-burn"], ok["nccl-allreduce"]
	if burn.Value < 51e12 || !strings.HasPrefix(burn.Detail, "gpu-burn: 8 GPUs, slowest") || burn.Metrics["max_gpu_temp_c"] != 71 || burn.Metrics["gpus_sampled"] != 8 {
		t.Errorf("gpu-burn kept %g flop/s, %q, metrics %v; want >= 51 Tflop/s for each of 8 GPUs, 8 sampled, hottest 71 C", burn.Value, burn.Detail, burn.Metrics)
	}
	if nccl.Value != 462e9 {
		t.Errorf("nccl-allreduce kept %g B/s, want the bus bandwidth at 16 GiB, 462 GB/s (in-place)", nccl.Value)
	}
	m, _ := l.st.GetMachine(context.Background(), n.id)
	host := fmt.Sprintf("h100-r07-%02d", m.Index) // the recipe's network.hostname
	if sw := st.Software; sw == nil || sw.Drivers["nvidia-fabricmanager"] != "535.309.01" || sw.Hostname != host {
		t.Errorf("software kept %+v, want the drivers and hostname %s", sw, host)
	}
	for _, f := range st.Findings {
		if f.Severity == string(drift.Critical) {
			t.Errorf("critical finding on a ready machine: %+v", f)
		}
	}

	evs, _ := l.st.Events(context.Background(), n.id, 0, 0)
	var kinds, states []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
		if e.Kind == "state" {
			states = append(states, string(e.To))
		}
	}
	for _, k := range []string{"bmc.bios", "bmc.bootmode", "bmc.boot", "agent.started", "inventory", "checks", "bmc.handoff", "firstboot"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no %s event; events: %v", k, kinds)
		}
	}
	if want := []string{"provisioning", "verifying", "ready"}; !slices.Equal(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}

	n.mu.Lock()
	calls := slices.Clone(n.calls)
	n.mu.Unlock()
	for _, want := range []string{"gpu_burn 7200", "all_reduce_perf -b 1G -e 17179869184 -f 2 -g 8", "nvbandwidth -t device_to_device_memcpy_read_ce", "dcgmi diag -r 2 -j"} {
		if !slices.Contains(calls, want) {
			t.Errorf("the burn-in did not run %q (the recipe's 2h, 16GiB, 8 GPUs, dcgm level 2); ran %q", want, calls)
		}
	}

	if p := n.bmc.Power(); p != "On" {
		t.Errorf("BMC power %s, want On", p)
	}
	var sys struct {
		Boot struct{ BootSourceOverrideTarget, BootSourceOverrideEnabled, BootSourceOverrideMode string }
	}
	var bios struct{ Attributes map[string]any }
	hgxRedfishGet(t, n, "/redfish/v1/Systems/1", &sys)
	hgxRedfishGet(t, n, "/redfish/v1/Systems/1/Bios", &bios)
	// The recipe hands off by kexec: nothing power-cycled the machine after
	// the image, so the one-time Hdd override is still armed for its next
	// reboot.
	if b := sys.Boot; b.BootSourceOverrideMode != "UEFI" || b.BootSourceOverrideTarget != "Hdd" || b.BootSourceOverrideEnabled != "Once" {
		t.Errorf("BMC boot %+v, want mode UEFI and the one-time Hdd override armed (kexec hand-off: no power cycle)", b)
	}
	r, err := l.recipes("gpu-train-h100x8")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.BIOS.Attributes {
		if got, want := fmt.Sprint(bios.Attributes[k]), fmt.Sprint(v.Any()); got != want {
			t.Errorf("BIOS attribute %s = %s, want %s", k, got, want)
		}
	}

	// What the BMC reports, read by pkg/bmc as `ingot machine inspect`
	// does, matches the recipe too.
	c, err := bmc.Dial(context.Background(), bmc.Config{Endpoint: n.url, Username: "admin", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 8 || len(inv.CPUs) != 2 || len(inv.DIMMs) != 32 || len(inv.PSUs) != 6 || len(inv.NICs) != 9 ||
		len(inv.Disks) != 9 || len(inv.Problems) > 0 || inv.System.BMCVersion != "7.10.30.00" {
		t.Errorf("BMC inventory: %d GPUs, %d CPUs, %d DIMMs, %d PSUs, %d NICs, %d disks, BMC %s, problems %v",
			len(inv.GPUs), len(inv.CPUs), len(inv.DIMMs), len(inv.PSUs), len(inv.NICs), len(inv.Disks), inv.System.BMCVersion, inv.Problems)
	}
	for _, f := range drift.Check(inv, r) {
		if f.Severity != drift.Info {
			t.Errorf("the BMC's inventory drifts from the recipe: %s", f)
		}
	}
}

// gpuReadyWaived: the waived check failed and is shown as waived, the
// others passed, and the waiver is on record with who gave it and why.
func gpuReadyWaived(t *testing.T, l *hgxLab, n *hgxNode, j *store.Job) {
	m, _ := l.st.GetMachine(context.Background(), n.id)
	if len(m.Waivers) != 1 {
		t.Fatalf("waivers %+v, want one", m.Waivers)
	}
	w := m.Waivers[0]
	st, _ := engine.Status(j)
	for _, c := range append(st.Checks, st.BurnIn...) {
		switch {
		case c.Name == w.Check && (c.OK || !c.Waived || !strings.Contains(c.Detail, "waived by operator:alice")):
			t.Errorf("%s: %+v, want failed and waived by operator:alice", c.Name, c)
		case c.Name != w.Check && !c.OK && !c.Skipped:
			t.Errorf("%s failed on a machine that reached ready: %+v", c.Name, c)
		}
	}
	evs, _ := l.st.Events(context.Background(), n.id, 0, 0)
	var given, used bool
	for _, e := range evs {
		given = given || e.Kind == "check.waiver" && e.Actor == "operator:alice" && strings.Contains(e.Message, "INFRA-1234")
		used = used || e.Kind == "check.waived" && strings.Contains(e.Message, w.Check)
	}
	if !given || !used {
		t.Errorf("waiver events: given %v, used %v; events %+v", given, used, evs)
	}
}

// gpuReadyWaiverScope: the waiver covered its own check (nic-link passed as
// waived at the agent's stage) and not the burn-in check that failed.
func gpuReadyWaiverScope(t *testing.T, _ *hgxLab, _ *hgxNode, j *store.Job) {
	st, _ := engine.Status(j)
	results := map[string]engine.CheckResult{}
	for _, c := range append(st.Checks, st.BurnIn...) {
		results[c.Name] = c
	}
	if c := results["nic-link"]; !c.Waived || c.OK {
		t.Errorf("nic-link %+v, want failed and waived", c)
	}
	if c := results["nccl-allreduce"]; c.Waived || c.OK || c.Skipped {
		t.Errorf("nccl-allreduce %+v, want failed and not waived", c)
	}
}

// gpuReadyRefusedFirstBoot: a first-boot report without the job's secret is
// refused (401 with none, 403 with the agent's credential), leaves the
// machine verifying, and the job ends failed when the step times out.
func gpuReadyRefusedFirstBoot(t *testing.T, l *hgxLab, n *hgxNode, j *store.Job) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.codes["no credential"] != http.StatusUnauthorized || n.codes["the agent credential"] != http.StatusForbidden {
		t.Errorf("first boot without the secret answered %v, want 401 without a credential and 403 with the agent's", n.codes)
	}
	if !slices.ContainsFunc(n.log, func(s string) bool {
		return strings.Contains(s, "first boot refused: machine verifying, job running at firstboot")
	}) {
		t.Errorf("after the refused reports the machine was not left verifying:\n  %s", strings.Join(n.log, "\n  "))
	}
	if st, _ := engine.Status(j); st.Software != nil {
		t.Errorf("a refused report was recorded: %+v", st.Software)
	}
}

// hgxRedfishGet reads one resource of the node's BMC.
func hgxRedfishGet(t *testing.T, n *hgxNode, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", n.url+path, nil)
	req.SetBasicAuth("admin", "pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
}
