// Package checks runs a recipe's acceptance checks against an in-band
// inventory. Each check is a pure function of (inventory, check, expected
// hardware) -> result; nothing here touches the machine.
//
// Thresholds: a check's Min/Max override what the recipe's hardware section
// implies. Units of Min/Max per check: gpu-count and disk-present count
// devices, memory-size is GiB, nic-link is Mbps.
package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/api"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Func is one check.
type Func func(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult

// Lookup returns the check named name, as the recipe names it.
func Lookup(name string) (Func, bool) {
	switch name {
	case "gpu-count":
		return GPUCount, true
	case "gpu-model":
		return GPUModel, true
	case "pcie-link":
		return PCIeLink, true
	case "memory-size":
		return MemorySize, true
	case "nic-link":
		return NICLink, true
	case "disk-present":
		return DiskPresent, true
	case "disk-health":
		return DiskHealth, true
	}
	return nil, false
}

// Names lists the checks the agent runs.
func Names() []string {
	return []string{"disk-health", "disk-present", "gpu-count", "gpu-model", "memory-size", "nic-link", "pcie-link"}
}

// Run runs every check in order. Checks the agent cannot run (gpu-burn,
// nccl-allreduce, ...) come back Skipped, not OK.
func Run(inv machine.Inventory, cs []recipe.Check, want recipe.Hardware) []api.CheckResult {
	out := make([]api.CheckResult, 0, len(cs))
	for _, c := range cs {
		f, ok := Lookup(c.Name)
		if !ok {
			out = append(out, api.CheckResult{Name: c.Name, Skipped: true,
				Detail: fmt.Sprintf("the agent does not run %q (it runs: %s)", c.Name, strings.Join(Names(), ", "))})
			continue
		}
		r := f(inv, c, want)
		r.Name = c.Name
		out = append(out, r)
	}
	return out
}

// Failed lists the names of results that are neither OK nor skipped.
func Failed(rs []api.CheckResult) []string {
	var bad []string
	for _, r := range rs {
		if !r.OK && !r.Skipped {
			bad = append(bad, r.Name)
		}
	}
	return bad
}

// bounds checks v against [min, max] where a zero bound is absent.
func bounds(v, lo, hi float64) bool {
	return (lo == 0 || v >= lo) && (hi == 0 || v <= hi)
}

// GPUCount: the number of GPUs equals the recipe's total (sum of GPU group
// counts), or lies within the check's Min/Max when given.
func GPUCount(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	n := float64(len(inv.GPUs))
	lo, hi := c.Min, c.Max
	if lo == 0 && hi == 0 {
		total := 0
		for _, g := range want.GPUs {
			total += g.Count
		}
		lo, hi = float64(total), float64(total)
		if total == 0 {
			return api.CheckResult{OK: n == 0, Value: n, Detail: fmt.Sprintf("recipe expects no GPUs, found %g", n)}
		}
	}
	return api.CheckResult{OK: bounds(n, lo, hi), Value: n, Detail: fmt.Sprintf("found %g GPUs, expected %s", n, rangeText(lo, hi))}
}

// GPUModel: for each recipe GPU group, at least Count GPUs of that vendor
// whose model contains the group's model (case-insensitive). Value is the
// number of GPUs matching some group.
func GPUModel(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	groups := want.GPUs
	if m := c.Args["model"]; m != "" {
		groups = []recipe.GPUSpec{{Model: m, Count: max(int(c.Min), 1)}}
	}
	if len(groups) == 0 {
		return api.CheckResult{OK: false, Detail: "no GPU model to check: the recipe has no hardware.gpus and the check no args.model"}
	}
	var miss []string
	matched := 0
	for _, g := range groups {
		n := 0
		for _, gpu := range inv.GPUs {
			if modelMatch(gpu, g) {
				n++
			}
		}
		matched += n
		if n < g.Count {
			miss = append(miss, fmt.Sprintf("%d of %d %s %s", n, g.Count, g.Vendor, g.Model))
		}
	}
	if len(miss) > 0 {
		return api.CheckResult{Value: float64(matched), Detail: "found only " + strings.Join(miss, "; ") + "; GPUs: " + gpuModels(inv.GPUs)}
	}
	return api.CheckResult{OK: true, Value: float64(matched), Detail: "GPUs: " + gpuModels(inv.GPUs)}
}

func modelMatch(gpu machine.GPU, g recipe.GPUSpec) bool {
	if g.Vendor != "" && !strings.EqualFold(g.Vendor, gpu.Vendor) {
		return false
	}
	return strings.Contains(strings.ToLower(gpu.Model), strings.ToLower(g.Model))
}

func gpuModels(gs []machine.GPU) string {
	if len(gs) == 0 {
		return "none"
	}
	count := map[string]int{}
	var order []string
	for _, g := range gs {
		if count[g.Model] == 0 {
			order = append(order, g.Model)
		}
		count[g.Model]++
	}
	var p []string
	for _, m := range order {
		p = append(p, fmt.Sprintf("%dx %s", count[m], m))
	}
	return strings.Join(p, ", ")
}

// PCIeLink: no GPU link is degraded. Width must equal the link's max width
// and the recipe's pcie_width; generation must equal the max generation and
// reach the recipe's pcie_gen. Idle NVIDIA GPUs train down to Gen1 to save
// power: with args idle-downtrain=ok the current generation is not compared
// (width still is). Value is the number of degraded links.
func PCIeLink(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	idleOK := c.Args["idle-downtrain"] == "ok"
	var bad []string
	for _, g := range inv.GPUs {
		spec := specFor(g, want.GPUs)
		cur, mx := g.LinkCurrent, g.LinkMax
		var why []string
		if cur.Width == 0 && cur.Gen == 0 {
			why = append(why, "link unknown")
		}
		if mx.Width > 0 && cur.Width < mx.Width {
			why = append(why, fmt.Sprintf("x%d of x%d", cur.Width, mx.Width))
		}
		if spec.PCIeWidth > 0 && cur.Width < spec.PCIeWidth {
			why = append(why, fmt.Sprintf("x%d, recipe x%d", cur.Width, spec.PCIeWidth))
		}
		if !idleOK && mx.Gen > 0 && cur.Gen < mx.Gen {
			why = append(why, fmt.Sprintf("Gen%d of Gen%d", cur.Gen, mx.Gen))
		}
		gen := cur.Gen
		if idleOK {
			gen = mx.Gen
		}
		if spec.PCIeGen > 0 && gen < spec.PCIeGen {
			why = append(why, fmt.Sprintf("Gen%d, recipe Gen%d", gen, spec.PCIeGen))
		}
		if len(why) > 0 {
			bad = append(bad, fmt.Sprintf("%s (%s): %s", g.PCIAddress, g.Model, strings.Join(why, ", ")))
		}
	}
	if len(inv.GPUs) == 0 {
		return api.CheckResult{OK: len(want.GPUs) == 0, Detail: "no GPUs found"}
	}
	if len(bad) > 0 {
		return api.CheckResult{Value: float64(len(bad)), Detail: "degraded: " + strings.Join(bad, "; ")}
	}
	return api.CheckResult{OK: true, Detail: fmt.Sprintf("%d GPU links at full width and speed", len(inv.GPUs))}
}

func specFor(g machine.GPU, specs []recipe.GPUSpec) recipe.GPUSpec {
	for _, s := range specs {
		if modelMatch(g, s) {
			return s
		}
	}
	return recipe.GPUSpec{}
}

// MemorySize: the memory seen (sum of DIMMs) is at least the recipe's
// memory.total (or Min GiB), less a tolerance in percent (args tolerance,
// default 2: in-band totals miss firmware-reserved holes). Value is MiB.
func MemorySize(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	var mib int64
	for _, d := range inv.DIMMs {
		mib += d.SizeMiB
	}
	need := float64(0)
	if want.Memory != nil {
		need = float64(want.Memory.Total.Bytes()) / (1 << 20)
	}
	if c.Min > 0 {
		need = c.Min * 1024
	}
	tol := 2.0
	if t, err := strconv.ParseFloat(c.Args["tolerance"], 64); err == nil && t >= 0 {
		tol = t
	}
	v := float64(mib)
	ok := need > 0 && v >= need*(1-tol/100)
	if c.Max > 0 && v > c.Max*1024 {
		ok = false
	}
	detail := fmt.Sprintf("found %s, expected at least %s (%.3g%% tolerance)", recipe.Size(mib<<20), recipe.Size(int64(need)<<20), tol)
	if need == 0 {
		detail = "no memory size to check: the recipe has no hardware.memory.total and the check no min"
	}
	return api.CheckResult{OK: ok, Value: v, Detail: detail}
}

// NICLink: for each recipe NIC group with a speed, at least Count (default 1)
// ports are up at that speed or faster. With Min (Mbps) and no groups: at
// least one port up at Min. Value is the fastest up port's Mbps.
func NICLink(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	fastest := 0
	for _, n := range inv.NICs {
		if n.LinkUp && n.SpeedMbps > fastest {
			fastest = n.SpeedMbps
		}
	}
	groups := want.NICs
	if c.Min > 0 {
		groups = []recipe.NICSpec{{Speed: recipe.Speed(c.Min), Count: 1}}
	}
	var miss []string
	for _, g := range groups {
		if g.Speed == 0 {
			continue
		}
		n := 0
		for _, nic := range inv.NICs {
			if nic.LinkUp && int64(nic.SpeedMbps) >= g.Speed.Mbps() &&
				(g.Model == "" || strings.Contains(strings.ToLower(nic.Model), strings.ToLower(g.Model))) {
				n++
			}
		}
		if n < max(g.Count, 1) {
			miss = append(miss, fmt.Sprintf("%d of %d %s ports up at %s", n, max(g.Count, 1), g.Model, g.Speed))
		}
	}
	if len(miss) > 0 {
		return api.CheckResult{Value: float64(fastest), Detail: "found " + strings.Join(miss, "; ") + "; ports: " + nicList(inv.NICs)}
	}
	return api.CheckResult{OK: true, Value: float64(fastest), Detail: "ports: " + nicList(inv.NICs)}
}

func nicList(ns []machine.NIC) string {
	var p []string
	for _, n := range ns {
		state := "down"
		if n.LinkUp {
			state = fmt.Sprintf("up %dMbps", n.SpeedMbps)
		}
		p = append(p, fmt.Sprintf("%s %s", n.Name, state))
	}
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ", ")
}

// DiskPresent: each recipe disk rule matches at least Count (default 1)
// disks (or Min disks in all without rules). Value is the disk count.
func DiskPresent(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	n := float64(len(inv.Disks))
	if len(want.Disks) == 0 || c.Min > 0 {
		lo := max(c.Min, 1)
		return api.CheckResult{OK: bounds(n, lo, c.Max), Value: n, Detail: fmt.Sprintf("found %g disks, expected %s", n, rangeText(lo, c.Max))}
	}
	var miss []string
	for i, spec := range want.Disks {
		m := 0
		for _, d := range inv.Disks {
			if diskMatch(d, spec) {
				m++
			}
		}
		if m < max(spec.Count, 1) {
			miss = append(miss, fmt.Sprintf("disks[%d]: %d of %d match", i, m, max(spec.Count, 1)))
		}
	}
	if len(miss) > 0 {
		return api.CheckResult{Value: n, Detail: strings.Join(miss, "; ")}
	}
	return api.CheckResult{OK: true, Value: n, Detail: fmt.Sprintf("%g disks, every rule matched", n)}
}

func diskMatch(d machine.Disk, s recipe.DiskSpec) bool {
	switch {
	case s.Path != "" && s.Path != d.Name:
		return false
	case s.MinSize > 0 && d.SizeBytes < s.MinSize.Bytes():
		return false
	case s.MaxSize > 0 && d.SizeBytes > s.MaxSize.Bytes():
		return false
	case s.Model != "" && !strings.Contains(strings.ToLower(d.Model), strings.ToLower(s.Model)):
		return false
	case s.Serial != "" && s.Serial != d.Serial:
		return false
	case s.Media != "" && !strings.EqualFold(s.Media, d.Media):
		return false
	}
	return true
}

// DiskHealth: every disk reports health OK (in-band: the device state is
// live/running; there is no SMART reader in the agent). Value is the number
// of unhealthy disks.
func DiskHealth(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	var bad []string
	for _, d := range inv.Disks {
		if d.Health != "" && d.Health != "OK" {
			bad = append(bad, d.Name+": "+d.Health)
		}
	}
	if len(inv.Disks) == 0 {
		return api.CheckResult{Detail: "no disks found"}
	}
	if len(bad) > 0 {
		return api.CheckResult{Value: float64(len(bad)), Detail: "unhealthy: " + strings.Join(bad, "; ")}
	}
	return api.CheckResult{OK: true, Detail: fmt.Sprintf("%d disks healthy", len(inv.Disks))}
}

func rangeText(lo, hi float64) string {
	switch {
	case lo == hi:
		return fmt.Sprintf("%g", lo)
	case hi == 0:
		return fmt.Sprintf("at least %g", lo)
	case lo == 0:
		return fmt.Sprintf("at most %g", hi)
	}
	return fmt.Sprintf("%g-%g", lo, hi)
}
