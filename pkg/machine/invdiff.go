package machine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Change is one human-meaningful difference between two inventories.
// From is empty for a part that was added, To for one that was removed.
type Change struct {
	Path string `json:"path"` // "gpus[SXM3].link_current", "dimms.count", "firmware[BMC]"
	From string `json:"from"`
	To   string `json:"to"`
}

func (c Change) String() string {
	switch {
	case c.From == "":
		return fmt.Sprintf("%s: added %s", c.Path, c.To)
	case c.To == "":
		return fmt.Sprintf("%s: removed %s", c.Path, c.From)
	}
	return fmt.Sprintf("%s: %s -> %s", c.Path, c.From, c.To)
}

// DiffInventory lists what changed from a to b in the hardware an operator
// cares about: parts added or removed (GPUs matched by serial, then slot),
// PCIe links, memory size and DIMM count, firmware and driver versions, PSU
// and disk state. Readings that change all the time (power draw,
// temperatures, fans) and Problems are not compared. The order is stable:
// system, CPUs, memory, GPUs, NICs, disks, PSUs, firmware, software.
func DiffInventory(a, b Inventory) []Change {
	d := &differ{}
	d.system(a.System, b.System)
	d.cpus(a.CPUs, b.CPUs)
	d.dimms(a.DIMMs, b.DIMMs)
	d.gpus(a.GPUs, b.GPUs)
	d.nics(a.NICs, b.NICs)
	d.disks(a.Disks, b.Disks)
	d.psus(a.PSUs, b.PSUs)
	d.firmware(a.Firmware, b.Firmware)
	d.software(a.Software, b.Software)
	return d.out
}

type differ struct{ out []Change }

func (d *differ) field(path, from, to string) {
	if from != to {
		d.out = append(d.out, Change{Path: path, From: from, To: to})
	}
}

func (d *differ) count(path string, a, b int) {
	if a != b {
		d.field(path, strconv.Itoa(a), strconv.Itoa(b))
	}
}

func (d *differ) system(a, b System) {
	d.field("system.vendor", a.Vendor, b.Vendor)
	d.field("system.model", a.Model, b.Model)
	d.field("system.serial", a.Serial, b.Serial)
	d.field("system.uuid", a.UUID, b.UUID)
	d.field("system.bios_version", a.BIOSVersion, b.BIOSVersion)
	d.field("system.bmc_version", a.BMCVersion, b.BMCVersion)
}

func (d *differ) cpus(a, b []CPU) {
	d.count("cpus.count", len(a), len(b))
	pairs, removed, added := matchParts(a, b, func(c CPU) string { return c.Socket })
	for _, p := range pairs {
		path := "cpus[" + p.b.Socket + "]"
		d.field(path+".model", p.a.Model, p.b.Model)
		d.field(path+".cores", diffItoa(p.a.Cores), diffItoa(p.b.Cores))
		d.field(path+".threads", diffItoa(p.a.Threads), diffItoa(p.b.Threads))
	}
	for _, c := range removed {
		d.field("cpus["+diffLabel(c.Socket)+"]", describeCPU(c), "")
	}
	for _, c := range added {
		d.field("cpus["+diffLabel(c.Socket)+"]", "", describeCPU(c))
	}
}

func describeCPU(c CPU) string {
	return diffJoin(c.Model, diffUnit(c.Cores, " cores"))
}

func (d *differ) dimms(a, b []DIMM) {
	d.count("dimms.count", len(a), len(b))
	d.field("memory.total", diffTotalMem(a), diffTotalMem(b))
	pairs, removed, added := matchParts(a, b, func(m DIMM) string { return m.Slot })
	for _, p := range pairs {
		path := "dimms[" + p.b.Slot + "]"
		d.field(path, describeDIMM(p.a), describeDIMM(p.b))
		d.field(path+".serial", p.a.Serial, p.b.Serial)
	}
	for _, m := range removed {
		d.field("dimms["+diffLabel(m.Slot)+"]", describeDIMM(m), "")
	}
	for _, m := range added {
		d.field("dimms["+diffLabel(m.Slot)+"]", "", describeDIMM(m))
	}
}

func diffTotalMem(ds []DIMM) string {
	var mib int64
	for _, m := range ds {
		mib += m.SizeMiB
	}
	if mib == 0 {
		return ""
	}
	return diffMiB(mib)
}

func diffMiB(mib int64) string {
	if mib%1024 == 0 {
		return strconv.FormatInt(mib/1024, 10) + " GiB"
	}
	return strconv.FormatInt(mib, 10) + " MiB"
}

func describeDIMM(m DIMM) string {
	size := ""
	if m.SizeMiB > 0 {
		size = diffMiB(m.SizeMiB)
	}
	return diffJoin(size, m.Type, diffUnit(m.SpeedMHz, " MHz"))
}

func (d *differ) gpus(a, b []GPU) {
	d.count("gpus.count", len(a), len(b))
	pairs, removed, added := matchParts(a, b, func(g GPU) string { return g.Serial }, func(g GPU) string { return g.Slot })
	for _, p := range pairs {
		path := "gpus[" + gpuLabel(p.b) + "]"
		d.field(path+".slot", p.a.Slot, p.b.Slot)
		d.field(path+".serial", p.a.Serial, p.b.Serial)
		d.field(path+".model", p.a.Model, p.b.Model)
		d.field(path+".vram", diffVRAM(p.a.VRAMMiB), diffVRAM(p.b.VRAMMiB))
		d.field(path+".link_current", linkString(p.a.LinkCurrent), linkString(p.b.LinkCurrent))
		d.field(path+".link_max", linkString(p.a.LinkMax), linkString(p.b.LinkMax))
		d.field(path+".firmware", p.a.Firmware, p.b.Firmware)
		d.field(path+".health", p.a.Health, p.b.Health)
	}
	for _, g := range removed {
		d.field("gpus["+gpuLabel(g)+"]", describeGPU(g), "")
	}
	for _, g := range added {
		d.field("gpus["+gpuLabel(g)+"]", "", describeGPU(g))
	}
}

func gpuLabel(g GPU) string {
	for _, s := range []string{g.Slot, g.Serial, g.PCIAddress} {
		if s != "" {
			return s
		}
	}
	return "?"
}

func describeGPU(g GPU) string {
	serial := ""
	if g.Serial != "" {
		serial = "serial " + g.Serial
	}
	return diffJoin(g.Vendor, g.Model, diffVRAM(g.VRAMMiB), serial)
}

func diffVRAM(mib int64) string {
	if mib == 0 {
		return ""
	}
	return diffMiB(mib)
}

// linkString formats a link as "Gen5 x16"; unknown parts are left out.
func linkString(l PCIeLink) string {
	gen, width := "", ""
	if l.Gen > 0 {
		gen = "Gen" + strconv.Itoa(l.Gen)
	}
	if l.Width > 0 {
		width = "x" + strconv.Itoa(l.Width)
	}
	return diffJoin(gen, width)
}

func (d *differ) nics(a, b []NIC) {
	d.count("nics.count", len(a), len(b))
	pairs, removed, added := matchParts(a, b, func(n NIC) string { return strings.ToLower(n.MAC) }, func(n NIC) string { return n.Name })
	for _, p := range pairs {
		path := "nics[" + nicLabel(p.b) + "]"
		d.field(path+".name", p.a.Name, p.b.Name)
		d.field(path+".mac", strings.ToLower(p.a.MAC), strings.ToLower(p.b.MAC))
		d.field(path+".model", p.a.Model, p.b.Model)
		d.field(path+".speed", diffMbps(p.a.SpeedMbps), diffMbps(p.b.SpeedMbps))
		d.field(path+".link", diffLinkState(p.a.LinkUp), diffLinkState(p.b.LinkUp))
		d.field(path+".firmware", p.a.Firmware, p.b.Firmware)
	}
	for _, n := range removed {
		d.field("nics["+nicLabel(n)+"]", diffJoin(n.Model, diffMbps(n.SpeedMbps)), "")
	}
	for _, n := range added {
		d.field("nics["+nicLabel(n)+"]", "", diffJoin(n.Model, diffMbps(n.SpeedMbps)))
	}
}

func nicLabel(n NIC) string {
	if n.Name != "" {
		return n.Name
	}
	return diffLabel(strings.ToLower(n.MAC))
}

func diffMbps(v int) string {
	switch {
	case v == 0:
		return ""
	case v%1000 == 0:
		return strconv.Itoa(v/1000) + " Gb/s"
	}
	return strconv.Itoa(v) + " Mb/s"
}

func diffLinkState(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func (d *differ) disks(a, b []Disk) {
	d.count("disks.count", len(a), len(b))
	pairs, removed, added := matchParts(a, b, func(k Disk) string { return k.Serial }, func(k Disk) string { return k.Name })
	for _, p := range pairs {
		path := "disks[" + diskLabel(p.b) + "]"
		d.field(path+".serial", p.a.Serial, p.b.Serial)
		d.field(path+".model", p.a.Model, p.b.Model)
		d.field(path+".size", diffBytes(p.a.SizeBytes), diffBytes(p.b.SizeBytes))
		d.field(path+".health", p.a.Health, p.b.Health)
	}
	for _, k := range removed {
		d.field("disks["+diskLabel(k)+"]", diffJoin(k.Model, diffBytes(k.SizeBytes)), "")
	}
	for _, k := range added {
		d.field("disks["+diskLabel(k)+"]", "", diffJoin(k.Model, diffBytes(k.SizeBytes)))
	}
}

func diskLabel(k Disk) string {
	if k.Name != "" {
		return k.Name
	}
	return diffLabel(k.Serial)
}

func diffBytes(n int64) string {
	if n == 0 {
		return ""
	}
	const gb = 1000 * 1000 * 1000
	if n >= gb {
		return strconv.FormatInt(n/gb, 10) + " GB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

func (d *differ) psus(a, b []PSU) {
	d.count("psus.count", len(a), len(b))
	pairs, removed, added := matchParts(a, b, func(p PSU) string { return p.Name }, func(p PSU) string { return p.Serial })
	for _, p := range pairs {
		path := "psus[" + diffLabel(p.b.Name) + "]"
		d.field(path+".state", p.a.State, p.b.State)
		d.field(path+".health", p.a.Health, p.b.Health)
		d.field(path+".redundancy", p.a.Redundancy, p.b.Redundancy)
		d.field(path+".serial", p.a.Serial, p.b.Serial)
		d.field(path+".model", p.a.Model, p.b.Model)
		d.field(path+".rated_watts", diffItoa(p.a.RatedWatts), diffItoa(p.b.RatedWatts))
	}
	for _, p := range removed {
		d.field("psus["+diffLabel(p.Name)+"]", diffJoin(p.Model, diffUnit(p.RatedWatts, " W")), "")
	}
	for _, p := range added {
		d.field("psus["+diffLabel(p.Name)+"]", "", diffJoin(p.Model, diffUnit(p.RatedWatts, " W")))
	}
}

func (d *differ) firmware(a, b []Firmware) {
	pairs, removed, added := matchParts(a, b, func(f Firmware) string { return f.Component })
	for _, p := range pairs {
		d.field("firmware["+p.b.Component+"]", p.a.Version, p.b.Version)
	}
	for _, f := range removed {
		d.field("firmware["+diffLabel(f.Component)+"]", f.Version, "")
	}
	for _, f := range added {
		d.field("firmware["+diffLabel(f.Component)+"]", "", f.Version)
	}
}

func (d *differ) software(a, b Software) {
	d.field("software.kernel", a.Kernel, b.Kernel)
	d.field("software.os_release", a.OSRelease, b.OSRelease)
	names := map[string]bool{}
	for n := range a.Drivers {
		names[n] = true
	}
	for n := range b.Drivers {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		d.field("software.drivers["+n+"]", a.Drivers[n], b.Drivers[n])
	}
}

// pair is a part present in both inventories.
type partPair[T any] struct{ a, b T }

// match pairs parts of a and b by the first key that is non-empty and
// unique on both sides, then by the next key among the rest. Pairs and
// added parts keep b's order, removed parts a's order.
func matchParts[T any](a, b []T, keys ...func(T) string) (pairs []partPair[T], removed, added []T) {
	usedA := make([]bool, len(a))
	usedB := make([]bool, len(b))
	pairOf := make([]int, len(b))
	for i := range pairOf {
		pairOf[i] = -1
	}
	for _, key := range keys {
		idxA := uniquePartIndex(a, usedA, key)
		for j, x := range b {
			if usedB[j] {
				continue
			}
			k := key(x)
			if i, ok := idxA[k]; ok && k != "" {
				usedA[i], usedB[j], pairOf[j] = true, true, i
				delete(idxA, k)
			}
		}
	}
	for j, x := range b {
		if pairOf[j] >= 0 {
			pairs = append(pairs, partPair[T]{a[pairOf[j]], x})
		} else {
			added = append(added, x)
		}
	}
	for i, x := range a {
		if !usedA[i] {
			removed = append(removed, x)
		}
	}
	return pairs, removed, added
}

// uniqueIndex maps keys that occur once among a's unused parts to their index.
func uniquePartIndex[T any](a []T, used []bool, key func(T) string) map[string]int {
	idx := map[string]int{}
	seen := map[string]int{}
	for i, x := range a {
		if used[i] {
			continue
		}
		k := key(x)
		seen[k]++
		idx[k] = i
	}
	for k, n := range seen {
		if n > 1 {
			delete(idx, k)
		}
	}
	return idx
}

func diffItoa(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}

func diffUnit(v int, unit string) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v) + unit
}

func diffLabel(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// join joins the non-empty parts with spaces.
func diffJoin(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}
