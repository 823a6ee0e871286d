package checks

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

const gib = 1 << 30

func q(s string) recipe.Quantity {
	v, err := recipe.ParseQuantity(s)
	if err != nil {
		panic(err)
	}
	return v
}

func node() machine.Inventory {
	full := machine.PCIeLink{Gen: 5, Width: 16}
	gpus := make([]machine.GPU, 8)
	for i := range gpus {
		gpus[i] = machine.GPU{Vendor: "NVIDIA", Model: "NVIDIA H100 80GB HBM3", PCIAddress: "0000:1" + string(rune('0'+i)) + ":00.0",
			LinkCurrent: full, LinkMax: full}
	}
	return machine.Inventory{
		GPUs:  gpus,
		DIMMs: []machine.DIMM{{Slot: "A", SizeMiB: 1 << 20}, {Slot: "B", SizeMiB: 1 << 20}}, // 2 TiB
		NICs: []machine.NIC{{Name: "eno1", SpeedMbps: 1000, LinkUp: true}, {Name: "ib0", Model: "ConnectX-7", SpeedMbps: 400000, LinkUp: true},
			{Name: "ib1", Model: "ConnectX-7", SpeedMbps: 400000, LinkUp: false}},
		Disks: []machine.Disk{{Name: "/dev/nvme0n1", SizeBytes: 480e9, Media: "NVMe", Health: "OK"},
			{Name: "/dev/nvme1n1", SizeBytes: 3840e9, Media: "NVMe", Health: "OK"}},
	}
}

func hw() recipe.Hardware {
	return recipe.Hardware{
		GPUs:   []recipe.GPUSpec{{Vendor: "nvidia", Model: "H100", Count: 8, PCIeGen: 5, PCIeWidth: 16}},
		Memory: &recipe.MemSpec{Total: 2048 * gib},
		NICs:   []recipe.NICSpec{{Model: "ConnectX-7", Speed: 400000, Count: 1, Role: "workload"}},
		Disks:  []recipe.DiskSpec{{Boot: true, MaxSize: 1000 * gib}, {MinSize: 3000 * gib}},
	}
}

func TestChecks(t *testing.T) {
	type res struct {
		OK      bool
		Skipped bool
		Value   float64
	}
	tests := map[string]struct {
		edit  func(*machine.Inventory, *recipe.Hardware)
		check recipe.Check
		want  res
	}{
		"gpu-count ok":            {nil, recipe.Check{Name: "gpu-count"}, res{true, false, 8}},
		"gpu-count one missing":   {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs = i.GPUs[1:] }, recipe.Check{Name: "gpu-count"}, res{false, false, 7}},
		"gpu-count min overrides": {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs = i.GPUs[1:] }, recipe.Check{Name: "gpu-count", Min: recipe.Number(7)}, res{true, false, 7}},
		"gpu-count extra gpu":     {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs = append(i.GPUs, i.GPUs[0]) }, recipe.Check{Name: "gpu-count"}, res{false, false, 9}},
		"gpu-model ok":            {nil, recipe.Check{Name: "gpu-model"}, res{true, false, 8}},
		"gpu-model wrong":         {func(_ *machine.Inventory, h *recipe.Hardware) { h.GPUs[0].Model = "H200" }, recipe.Check{Name: "gpu-model"}, res{false, false, 0}},
		"gpu-model wrong vendor":  {func(_ *machine.Inventory, h *recipe.Hardware) { h.GPUs[0].Vendor = "amd" }, recipe.Check{Name: "gpu-model"}, res{false, false, 0}},
		"gpu-model by args":       {nil, recipe.Check{Name: "gpu-model", Args: map[string]string{"model": "h100 80gb"}, Min: recipe.Number(8)}, res{true, false, 8}},
		"pcie ok":                 {nil, recipe.Check{Name: "pcie-link"}, res{true, false, 0}},
		"pcie width degraded":     {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs[3].LinkCurrent.Width = 8 }, recipe.Check{Name: "pcie-link"}, res{false, false, 1}},
		"pcie NIC at x8 of x16": {func(i *machine.Inventory, _ *recipe.Hardware) {
			i.NICs = append(i.NICs, machine.NIC{Name: "ens3np0", PCIAddress: "0000:4b:00.0", Model: "ConnectX-7",
				LinkCurrent: machine.PCIeLink{Gen: 5, Width: 8}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16}})
		}, recipe.Check{Name: "pcie-link"}, res{false, false, 1}},
		"pcie NIC at full link": {func(i *machine.Inventory, _ *recipe.Hardware) {
			i.NICs = append(i.NICs, machine.NIC{Name: "ens3np0", PCIAddress: "0000:4b:00.0", LinkCurrent: machine.PCIeLink{Gen: 5, Width: 16}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16}})
		}, recipe.Check{Name: "pcie-link"}, res{true, false, 0}},
		"pcie gen idle strict":  {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs[0].LinkCurrent.Gen = 1 }, recipe.Check{Name: "pcie-link"}, res{false, false, 1}},
		"pcie gen idle allowed": {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs[0].LinkCurrent.Gen = 1 }, recipe.Check{Name: "pcie-link", Args: map[string]string{"idle-downtrain": "ok"}}, res{true, false, 0}},
		"pcie slot below recipe": {func(i *machine.Inventory, _ *recipe.Hardware) {
			i.GPUs[0].LinkMax.Gen, i.GPUs[0].LinkCurrent.Gen = 4, 4
		}, recipe.Check{Name: "pcie-link"}, res{false, false, 1}},
		"pcie width below recipe": {func(i *machine.Inventory, _ *recipe.Hardware) {
			i.GPUs[0].LinkMax.Width, i.GPUs[0].LinkCurrent.Width = 8, 8
		}, recipe.Check{Name: "pcie-link"}, res{false, false, 1}},
		"pcie no gpus": {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs = nil }, recipe.Check{Name: "pcie-link"}, res{false, false, 0}},
		"pcie Gen4 x8 fails": {func(i *machine.Inventory, h *recipe.Hardware) {
			h.GPUs[0].PCIeGen, h.GPUs[0].PCIeWidth = 0, 0 // only the check's own min and width
			i.GPUs[2].LinkMax, i.GPUs[2].LinkCurrent = machine.PCIeLink{Gen: 4, Width: 8}, machine.PCIeLink{Gen: 4, Width: 8}
		}, recipe.Check{Name: "pcie-link", Min: recipe.Number(5), Args: map[string]string{"width": "16"}}, res{false, false, 1}},
		"pcie check min overrides the recipe": {func(i *machine.Inventory, _ *recipe.Hardware) {
			for g := range i.GPUs {
				i.GPUs[g].LinkMax.Gen, i.GPUs[g].LinkCurrent.Gen = 4, 4
			}
		}, recipe.Check{Name: "pcie-link", Min: recipe.Number(4)}, res{true, false, 0}},
		"pcie check width overrides the recipe": {func(i *machine.Inventory, _ *recipe.Hardware) {
			for g := range i.GPUs {
				i.GPUs[g].LinkMax.Width, i.GPUs[g].LinkCurrent.Width = 8, 8
			}
		}, recipe.Check{Name: "pcie-link", Args: map[string]string{"width": "8"}}, res{true, false, 0}},
		"pcie check min above the recipe": {nil, recipe.Check{Name: "pcie-link", Min: recipe.Number(6)}, res{false, false, 8}},
		"memory ok":                       {nil, recipe.Check{Name: "memory-size"}, res{true, false, 2 << 20}},
		"memory within tolerance":         {func(i *machine.Inventory, _ *recipe.Hardware) { i.DIMMs[0].SizeMiB -= 20 << 10 }, recipe.Check{Name: "memory-size"}, res{true, false, 2<<20 - 20<<10}},
		"memory one dimm missing":         {func(i *machine.Inventory, _ *recipe.Hardware) { i.DIMMs = i.DIMMs[:1] }, recipe.Check{Name: "memory-size"}, res{false, false, 1 << 20}},
		"memory no tolerance":             {func(i *machine.Inventory, _ *recipe.Hardware) { i.DIMMs[0].SizeMiB-- }, recipe.Check{Name: "memory-size", Args: map[string]string{"tolerance": "0"}}, res{false, false, 2<<20 - 1}},
		"memory min 4TiB":                 {nil, recipe.Check{Name: "memory-size", Min: q("4TiB")}, res{false, false, 2 << 20}},
		"memory min 2TiB":                 {func(_ *machine.Inventory, h *recipe.Hardware) { h.Memory = nil }, recipe.Check{Name: "memory-size", Min: q("2TiB")}, res{true, false, 2 << 20}},
		"memory max":                      {nil, recipe.Check{Name: "memory-size", Max: q("1TiB")}, res{false, false, 2 << 20}},
		"memory within max":               {nil, recipe.Check{Name: "memory-size", Min: q("2TiB"), Max: q("2TiB")}, res{true, false, 2 << 20}},
		"memory nothing expected":         {func(_ *machine.Inventory, h *recipe.Hardware) { h.Memory = nil }, recipe.Check{Name: "memory-size"}, res{false, false, 2 << 20}},
		"nic ok":                          {nil, recipe.Check{Name: "nic-link"}, res{true, false, 400000}},
		"nic two needed, one up":          {func(_ *machine.Inventory, h *recipe.Hardware) { h.NICs[0].Count = 2 }, recipe.Check{Name: "nic-link"}, res{false, false, 400000}},
		"nic slow":                        {func(i *machine.Inventory, _ *recipe.Hardware) { i.NICs[1].SpeedMbps = 200000 }, recipe.Check{Name: "nic-link"}, res{false, false, 200000}},
		"nic min 1Gbps":                   {nil, recipe.Check{Name: "nic-link", Min: q("1Gbps")}, res{true, false, 400000}},
		"nic min 400Gbps":                 {nil, recipe.Check{Name: "nic-link", Min: q("400Gbps")}, res{true, false, 400000}},
		"nic 1GbE fails 400Gbps":          {func(i *machine.Inventory, _ *recipe.Hardware) { i.NICs = i.NICs[:1] }, recipe.Check{Name: "nic-link", Min: q("400Gbps")}, res{false, false, 1000}},
		"nic min above the ports":         {nil, recipe.Check{Name: "nic-link", Min: q("800Gbps")}, res{false, false, 400000}},
		// 8 fabric ports, one down: one port up at min is not enough (it was before count).
		"nic 7 of 8 fabric links up fails":                 {eightFabricPorts(1), recipe.Check{Name: "nic-link", Min: q("400Gbps"), Count: 8}, res{false, false, 400000}},
		"nic 8 of 8 fabric links up":                       {eightFabricPorts(0), recipe.Check{Name: "nic-link", Min: q("400Gbps"), Count: 8}, res{true, false, 400000}},
		"nic min without count holds the recipe's 8 ports": {eightFabricPorts(1), recipe.Check{Name: "nic-link", Min: q("400Gbps")}, res{false, false, 400000}},
		"nic count below the ports up":                     {eightFabricPorts(1), recipe.Check{Name: "nic-link", Min: q("400Gbps"), Count: 7}, res{true, false, 400000}},
		"pcie a GPU of the recipe missing":                 {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs = i.GPUs[1:] }, recipe.Check{Name: "pcie-link"}, res{false, false, 1}},
		"disk present":                                     {nil, recipe.Check{Name: "disk-present"}, res{true, false, 2}},
		"disk data missing":                                {func(i *machine.Inventory, _ *recipe.Hardware) { i.Disks = i.Disks[:1] }, recipe.Check{Name: "disk-present"}, res{false, false, 1}},
		"disk min count":                                   {nil, recipe.Check{Name: "disk-present", Min: recipe.Number(3)}, res{false, false, 2}},
		"disk max count":                                   {nil, recipe.Check{Name: "disk-present", Max: recipe.Number(1)}, res{false, false, 2}},
		"disk health ok":                                   {nil, recipe.Check{Name: "disk-health"}, res{true, false, 0}},
		"disk health dead":                                 {func(i *machine.Inventory, _ *recipe.Hardware) { i.Disks[1].Health = "dead" }, recipe.Check{Name: "disk-health"}, res{false, false, 1}},
		"disk health no disks":                             {func(i *machine.Inventory, _ *recipe.Hardware) { i.Disks = nil }, recipe.Check{Name: "disk-health"}, res{false, false, 0}},
		"gpu-burn skipped":                                 {nil, recipe.Check{Name: "gpu-burn"}, res{false, true, 0}},
		"nccl skipped":                                     {nil, recipe.Check{Name: "nccl-allreduce", Min: q("350GB/s")}, res{false, true, 0}},
		"unknown check fails":                              {nil, recipe.Check{Name: "gpu-burnin"}, res{false, false, 0}},
		"unknown optional skipped":                         {nil, recipe.Check{Name: "gpu-burnin", Optional: true}, res{false, true, 0}},
		"optional failure stays failed": {func(i *machine.Inventory, _ *recipe.Hardware) { i.GPUs = i.GPUs[1:] },
			recipe.Check{Name: "gpu-count", Optional: true}, res{false, false, 7}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inv, want := node(), hw()
			if tc.edit != nil {
				tc.edit(&inv, &want)
			}
			rs := Run(inv, []recipe.Check{tc.check}, want)
			if len(rs) != 1 || rs[0].Name != tc.check.Name {
				t.Fatalf("results %+v", rs)
			}
			got := res{rs[0].OK, rs[0].Skipped, rs[0].Value}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\ndetail: %s", diff, rs[0].Detail)
			}
			if rs[0].Detail == "" {
				t.Errorf("no detail")
			}
		})
	}
}

func TestFailed(t *testing.T) {
	rs := []api.CheckResult{{Name: "a", OK: true}, {Name: "b"}, {Name: "c", Skipped: true}, {Name: "d"}}
	if diff := cmp.Diff([]string{"b", "d"}, Failed(rs)); diff != "" {
		t.Error(diff)
	}
	cs := []recipe.Check{{Name: "a"}, {Name: "b", Optional: true}, {Name: "c"}, {Name: "d"}}
	if diff := cmp.Diff([]string{"d"}, Blocking(cs, rs)); diff != "" {
		t.Errorf("Blocking: %s", diff)
	}
}

// TestRegistryAgrees: the agent runs exactly the agent-stage checks of
// the recipe registry, and no burn-in check.
func TestRegistryAgrees(t *testing.T) {
	var agent []string
	for _, s := range recipe.Checks() {
		_, ok := Lookup(s.Name)
		if s.Stage == recipe.StageAgent {
			agent = append(agent, s.Name)
		}
		if ok != (s.Stage == recipe.StageAgent) {
			t.Errorf("%s (stage %s): Lookup ok = %v", s.Name, s.Stage, ok)
		}
	}
	slices.Sort(agent)
	if diff := cmp.Diff(agent, Names()); diff != "" {
		t.Errorf("Names() differs from the registry's agent stage (-registry +Names):\n%s", diff)
	}
	for _, n := range Names() {
		if _, ok := Lookup(n); !ok {
			t.Errorf("Names lists %s, Lookup does not find it", n)
		}
	}
}

// eightFabricPorts gives the node 8 ConnectX-7 400G ports, down of them
// down, and the recipe 8 of them.
func eightFabricPorts(down int) func(*machine.Inventory, *recipe.Hardware) {
	return func(i *machine.Inventory, h *recipe.Hardware) {
		i.NICs = i.NICs[:1]
		for p := range 8 {
			i.NICs = append(i.NICs, machine.NIC{Name: "ib" + string(rune('0'+p)), Model: "ConnectX-7", SpeedMbps: 400000, LinkUp: p >= down})
		}
		h.NICs[0].Count = 8
	}
}

// TestNICLinkNamesPorts: the ports that fall short are named, and the
// verdict kind is set.
func TestNICLinkNamesPorts(t *testing.T) {
	inv, want := node(), hw()
	eightFabricPorts(1)(&inv, &want)
	inv.NICs[5].SpeedMbps = 200000
	rs := Run(inv, []recipe.Check{{Name: "nic-link", Min: q("400Gbps"), Count: 8}, {Name: "gpu-count"}, {Name: "gpu-burn"}}, want)
	if w := "found 6 of 8 ports up at 400Gbps (not: eno1 up 1000Mbps, ib0 down, ib4 up 200000Mbps)"; !strings.HasPrefix(rs[0].Detail, w) {
		t.Errorf("detail %q, want it to start %q", rs[0].Detail, w)
	}
	for i, v := range []api.Verdict{api.VerdictFailed, api.VerdictPassed, api.VerdictCouldNotRun} {
		if rs[i].Verdict != v {
			t.Errorf("%s: verdict %q, want %q", rs[i].Name, rs[i].Verdict, v)
		}
	}
}

// TestDetails: what a failure says names what was expected.
func TestDetails(t *testing.T) {
	inv := node()
	inv.NICs = inv.NICs[:1]
	inv.GPUs[2].LinkMax, inv.GPUs[2].LinkCurrent = machine.PCIeLink{Gen: 4, Width: 8}, machine.PCIeLink{Gen: 4, Width: 8}
	want := hw()
	want.GPUs[0].PCIeGen, want.GPUs[0].PCIeWidth = 0, 0
	rs := Run(inv, []recipe.Check{
		{Name: "nic-link", Min: q("400Gbps")},
		{Name: "pcie-link", Min: recipe.Number(5), Args: map[string]string{"width": "16"}},
		{Name: "memory-size", Min: q("4TiB"), Optional: true},
		{Name: "gpu-burn"},
	}, want)
	for i, w := range []string{
		"found 0 of 1 ports up at 400Gbps (not: eno1 up 1000Mbps); ports: eno1 up 1000Mbps",
		"degraded: 0000:12:00.0 (NVIDIA H100 80GB HBM3): x8, expected x16, Gen4, expected Gen5",
		"optional, not met: found 2TiB, expected at least 4TiB (2% tolerance)",
		"a burn-in check: the installed OS runs it at first boot, not the agent",
	} {
		if rs[i].Detail != w {
			t.Errorf("%s detail %q, want %q", rs[i].Name, rs[i].Detail, w)
		}
	}
}
