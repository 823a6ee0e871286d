// Package checks runs a recipe's agent-stage acceptance checks (the
// registry in pkg/recipe, Stage "agent") against an in-band inventory.
// Each check is a pure function of (inventory, check, expected hardware)
// -> result; nothing here touches the machine.
//
// Thresholds: a check's Min/Max override what the recipe's hardware section
// implies. They arrive canonical (recipe.Quantity): gpu-count and
// disk-present count devices, pcie-link's min is a PCIe generation,
// memory-size is bytes, nic-link bits per second. A result's Value keeps
// the API's units: a count, MiB for memory-size, Mbps for nic-link.
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

// Names lists the checks the agent runs: the agent stage of the registry.
func Names() []string {
	return []string{"disk-health", "disk-present", "gpu-count", "gpu-model", "memory-size", "nic-link", "pcie-link"}
}

// Run runs every check in order. A burn-in check (gpu-burn,
// nccl-allreduce, ...) comes back Skipped: the installed OS runs it. A
// name the registry does not know fails, unless the check is optional
// (a newer server may send an optional check this agent lacks): a
// required check is never passed by not running it.
func Run(inv machine.Inventory, cs []recipe.Check, want recipe.Hardware) []api.CheckResult {
	out := make([]api.CheckResult, 0, len(cs))
	for _, c := range cs {
		f, ok := Lookup(c.Name)
		spec, known := recipe.LookupCheck(c.Name)
		switch {
		case ok:
			r := f(inv, c, want)
			r.Name, r.Verdict = c.Name, api.VerdictFailed
			if r.OK {
				r.Verdict = api.VerdictPassed
			}
			if !r.OK && c.Optional {
				r.Detail = "optional, not met: " + r.Detail
			}
			out = append(out, r)
		case known && spec.Stage != recipe.StageAgent:
			out = append(out, api.CheckResult{Name: c.Name, Skipped: true, Verdict: api.VerdictCouldNotRun,
				Detail: fmt.Sprintf("a %s check: the installed OS runs it at first boot, not the agent", spec.Stage)})
		default:
			out = append(out, api.CheckResult{Name: c.Name, Skipped: c.Optional, Verdict: api.VerdictCouldNotRun,
				Detail: fmt.Sprintf("unknown check %q: this agent runs %s", c.Name, strings.Join(Names(), ", "))})
		}
	}
	return out
}

// Failed lists the names of results that are neither OK nor skipped,
// optional checks included (see Blocking).
func Failed(rs []api.CheckResult) []string {
	var bad []string
	for _, r := range rs {
		if !r.OK && !r.Skipped {
			bad = append(bad, r.Name)
		}
	}
	return bad
}

// Blocking lists the failed results (as Failed) whose check is required:
// those that fail acceptance. cs are the checks Run was given.
func Blocking(cs []recipe.Check, rs []api.CheckResult) []string {
	optional := map[string]bool{}
	for _, c := range cs {
		if c.Optional {
			optional[c.Name] = true
		}
	}
	var bad []string
	for _, n := range Failed(rs) {
		if !optional[n] {
			bad = append(bad, n)
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
	lo, hi := c.Min.Value, c.Max.Value
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
		groups = []recipe.GPUSpec{{Model: m, Count: max(int(c.Min.Value), 1)}}
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
// and reach the expected width; generation must equal the max generation
// and reach the expected generation. Expected is the recipe's pcie_width
// and pcie_gen of the GPU's group, overridden for every GPU by the check's
// own args.width and min (a generation). Idle NVIDIA GPUs train down to
// Gen1 to save power: with args idle-downtrain=ok the current generation
// is not compared (width still is) and the expected one is compared with
// the link's maximum. Value is the number of degraded links.
//
// NICs are not checked: machine.NIC has no PCIe link in the inventory.
func PCIeLink(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	idleOK := c.Args["idle-downtrain"] == "ok"
	width, _ := strconv.Atoi(c.Args["width"])
	var bad []string
	for _, g := range inv.GPUs {
		spec := specFor(g, want.GPUs)
		if width > 0 {
			spec.PCIeWidth = width
		}
		if c.Min.Value > 0 {
			spec.PCIeGen = int(c.Min.Value)
		}
		if why := degraded(g, spec, idleOK); len(why) > 0 {
			bad = append(bad, fmt.Sprintf("%s (%s): %s", g.PCIAddress, g.Model, strings.Join(why, ", ")))
		}
	}
	// NIC ports are held to their own device's maximum: a 400G port on a
	// Gen5 x16 card trained at x8 cannot reach its line rate.
	nics := 0
	for _, n := range inv.NICs {
		if n.LinkMax.Width == 0 && n.LinkMax.Gen == 0 {
			continue // virtual, or no PCIe link to read
		}
		nics++
		if why := degradedLink(n.LinkCurrent, n.LinkMax, recipe.GPUSpec{}, false); len(why) > 0 {
			bad = append(bad, fmt.Sprintf("%s %s (%s): %s", n.Name, n.PCIAddress, n.Model, strings.Join(why, ", ")))
		}
	}
	if len(inv.GPUs) == 0 && len(want.GPUs) > 0 {
		return api.CheckResult{Detail: "no GPUs found"}
	}
	if n := wantGPUs(want); len(inv.GPUs) < n {
		bad = append(bad, fmt.Sprintf("%d of the recipe's %d GPUs have no link to judge (found %d)", n-len(inv.GPUs), n, len(inv.GPUs)))
	}
	if len(bad) > 0 {
		return api.CheckResult{Value: float64(len(bad)), Detail: "degraded: " + strings.Join(bad, "; ")}
	}
	return api.CheckResult{OK: true, Detail: fmt.Sprintf("%d GPU and %d NIC links at full width and speed", len(inv.GPUs), nics)}
}

func wantGPUs(want recipe.Hardware) int {
	n := 0
	for _, g := range want.GPUs {
		n += g.Count
	}
	return n
}

// degraded lists why one GPU's link falls short of spec's width and generation.
func degraded(g machine.GPU, spec recipe.GPUSpec, idleOK bool) []string {
	return degradedLink(g.LinkCurrent, g.LinkMax, spec, idleOK)
}

// degradedLink lists why a link trained at cur falls short of its maximum
// mx and of spec's width and generation.
func degradedLink(cur, mx machine.PCIeLink, spec recipe.GPUSpec, idleOK bool) []string {
	var why []string
	if cur.Width == 0 && cur.Gen == 0 {
		why = append(why, "link unknown")
	}
	if mx.Width > 0 && cur.Width < mx.Width {
		why = append(why, fmt.Sprintf("x%d of x%d", cur.Width, mx.Width))
	}
	if spec.PCIeWidth > 0 && cur.Width < spec.PCIeWidth {
		why = append(why, fmt.Sprintf("x%d, expected x%d", cur.Width, spec.PCIeWidth))
	}
	if !idleOK && mx.Gen > 0 && cur.Gen < mx.Gen {
		why = append(why, fmt.Sprintf("Gen%d of Gen%d", cur.Gen, mx.Gen))
	}
	gen := cur.Gen
	if idleOK {
		gen = mx.Gen
	}
	if spec.PCIeGen > 0 && gen < spec.PCIeGen {
		why = append(why, fmt.Sprintf("Gen%d, expected Gen%d", gen, spec.PCIeGen))
	}
	return why
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
// memory.total (or Min, in bytes), less a tolerance in percent (args
// tolerance, default 2: in-band totals miss firmware-reserved holes), and
// at most Max when given. Value is MiB.
func MemorySize(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	var mib int64
	for _, d := range inv.DIMMs {
		mib += d.SizeMiB
	}
	have := float64(mib) * (1 << 20)
	need := float64(0)
	if want.Memory != nil {
		need = float64(want.Memory.Total.Bytes())
	}
	if c.Min.Value > 0 {
		need = c.Min.Value
	}
	tol := 2.0
	if t, err := strconv.ParseFloat(c.Args["tolerance"], 64); err == nil && t >= 0 {
		tol = t
	}
	ok := need > 0 && have >= need*(1-tol/100)
	detail := fmt.Sprintf("found %s, expected at least %s (%.3g%% tolerance)", recipe.Size(mib<<20), recipe.Size(int64(need)), tol)
	if c.Max.Value > 0 {
		ok = ok && have <= c.Max.Value
		detail += fmt.Sprintf(" and at most %s", recipe.Size(int64(c.Max.Value)))
	}
	if need == 0 {
		detail = "no memory size to check: the recipe has no hardware.memory.total and the check no min"
	}
	return api.CheckResult{OK: ok, Value: float64(mib), Detail: detail}
}

// NICLink: for each recipe NIC group with a speed, at least Count (default
// 1) ports of its model are up at that speed or faster. With Min (bits per
// second) instead: the check's count of ports up at Min or faster, where
// the count defaults to the ports of the recipe's NIC groups at Min or
// faster (else 1): 7 of 8 fabric links up fails. Every port that falls
// short is named. Value is the fastest up port's Mbps.
func NICLink(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	fastest := 0
	for _, n := range inv.NICs {
		if n.LinkUp && n.SpeedMbps > fastest {
			fastest = n.SpeedMbps
		}
	}
	var miss []string
	for _, g := range nicGroups(c, want) {
		var up int
		var short []string
		for _, nic := range inv.NICs {
			if g.model != "" && !strings.Contains(strings.ToLower(nic.Model), strings.ToLower(g.model)) {
				continue
			}
			if nic.LinkUp && float64(nic.SpeedMbps)*1e6 >= g.bps {
				up++
			} else {
				short = append(short, nicState(nic))
			}
		}
		if up < g.count {
			m := strings.Join(strings.Fields(fmt.Sprintf("%d of %d %s ports up at %s", up, g.count, g.model, g.text)), " ")
			if len(short) > 0 {
				m += " (not: " + strings.Join(short, ", ") + ")"
			}
			miss = append(miss, m)
		}
	}
	if len(miss) > 0 {
		return api.CheckResult{Value: float64(fastest), Detail: "found " + strings.Join(miss, "; ") + "; ports: " + nicList(inv.NICs)}
	}
	return api.CheckResult{OK: true, Value: float64(fastest), Detail: "ports: " + nicList(inv.NICs)}
}

// nicGroup is a number of ports that must be up at a speed.
type nicGroup struct {
	model string
	bps   float64
	count int
	text  string
}

// nicGroups: the recipe's NIC groups with a speed, or, with the check's
// min, one group of its count at min.
func nicGroups(c recipe.Check, want recipe.Hardware) []nicGroup {
	var groups []nicGroup
	atMin := 0
	for _, g := range want.NICs {
		if g.Speed <= 0 {
			continue
		}
		bps := float64(g.Speed.Mbps()) * 1e6
		groups = append(groups, nicGroup{g.Model, bps, max(g.Count, 1), g.Speed.String()})
		if c.Min.Value > 0 && bps >= c.Min.Value {
			atMin += max(g.Count, 1)
		}
	}
	if c.Min.Value <= 0 {
		return groups
	}
	n := c.Count
	if n <= 0 {
		n = max(atMin, 1)
	}
	return []nicGroup{{bps: c.Min.Value, count: n, text: c.Min.String()}}
}

func nicState(n machine.NIC) string {
	if !n.LinkUp {
		return n.Name + " down"
	}
	return fmt.Sprintf("%s up %dMbps", n.Name, n.SpeedMbps)
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
// disks; with Min or Max (or without rules), the number of disks lies
// within them (at least 1). Value is the disk count.
func DiskPresent(inv machine.Inventory, c recipe.Check, want recipe.Hardware) api.CheckResult {
	n := float64(len(inv.Disks))
	if len(want.Disks) == 0 || c.Min.Value > 0 || c.Max.Value > 0 {
		lo, hi := max(c.Min.Value, 1), c.Max.Value
		return api.CheckResult{OK: bounds(n, lo, hi), Value: n, Detail: fmt.Sprintf("found %g disks, expected %s", n, rangeText(lo, hi))}
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
