// Package drift compares a machine's normalized inventory with what its
// recipe says it must be, and lists each difference as a Finding with a
// severity: a missing GPU or a PCIe link trained at x8 instead of x16 is
// critical, and so is firmware not at the pinned version unless the
// recipe's firmware.policy says warn for that component. A pinned value the
// hardware does not report counts as a mismatch of that pin (a firmware pin
// under its policy: block and update critical, warn a warning); only what
// the in-band agent cannot read at all (BMC firmware, PSUs) is info there,
// judged on the BMC's inventory. Critical findings keep a machine from
// ready.
//
// Check is a pure function: inventory and recipe in, findings out.
package drift

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/firmware/version"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// Severity ranks a finding.
type Severity string

// The severities, most severe first.
const (
	Critical Severity = "critical" // the machine is not what the recipe sells
	Warning  Severity = "warning"  // it works but is not as pinned
	Info     Severity = "info"     // the inventory could not show it
)

func (s Severity) rank() int {
	switch s {
	case Critical:
		return 0
	case Warning:
		return 1
	}
	return 2
}

// Finding is one difference between inventory and recipe.
type Finding struct {
	Severity Severity `json:"severity"`
	Part     string   `json:"part"` // "gpu", "gpu SXM1", "cpu", "memory", "nic", "psu", "firmware BIOS", "power"
	Message  string   `json:"message"`
	Expected string   `json:"expected,omitempty"`
	Found    string   `json:"found,omitempty"`
	// Check is the acceptance check that judges the same fact (pcie-link
	// for a degraded GPU link): an operator's waiver of that check for the
	// machine covers this finding too. "" for findings no check covers.
	Check string `json:"check,omitempty"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s %s: %s", f.Severity, f.Part, f.Message)
	if f.Expected != "" || f.Found != "" {
		s += fmt.Sprintf(" (expected %s, found %s)", f.Expected, f.Found)
	}
	return s
}

// Check compares inv with r's hardware, firmware and power sections. The
// findings are sorted by severity, then part.
func Check(inv machine.Inventory, r *recipe.Recipe) []Finding {
	if r == nil {
		return nil
	}
	var fs findings
	// The in-band agent cannot see PSUs, the BMC's power readings or the
	// BMC's own firmware: those are judged on the BMC's inventory only.
	inBand := inv.Source == "agent"
	fs.gpus(inv.GPUs, r.Hardware.GPUs)
	if r.Hardware.CPU != nil {
		fs.cpu(inv.CPUs, *r.Hardware.CPU)
	}
	if r.Hardware.Memory != nil {
		fs.memory(inv.DIMMs, *r.Hardware.Memory)
	}
	for _, n := range r.Hardware.NICs {
		fs.nics(inv.NICs, n)
	}
	fs.network(inv.NICs, r.Hardware.NICs, r.Network)
	if r.Hardware.PSUs != nil && !inBand {
		fs.psus(inv.PSUs, *r.Hardware.PSUs)
	}
	fs.firmware(inv, r.Firmware, r.Hardware.NICs)
	if !inBand {
		fs.power(inv, r.Power, r.Hardware.PSUs)
	}
	for _, p := range inv.Problems {
		fs.add(Info, p.Part, "the BMC did not answer this part; facts from it are missing", "", p.Detail)
	}
	out := []Finding(fs)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Severity.rank() != out[j].Severity.rank() {
			return out[i].Severity.rank() < out[j].Severity.rank()
		}
		return out[i].Part < out[j].Part
	})
	return out
}

// Summary counts findings by severity: "2 critical, 1 warning, 0 info".
func Summary(fs []Finding) string {
	n := map[Severity]int{}
	for _, f := range fs {
		n[f.Severity]++
	}
	return fmt.Sprintf("%d critical, %d warning, %d info", n[Critical], n[Warning], n[Info])
}

// Worst returns the most severe severity in fs ("" when fs is empty).
func Worst(fs []Finding) Severity {
	var w Severity
	for _, f := range fs {
		if w == "" || f.Severity.rank() < w.rank() {
			w = f.Severity
		}
	}
	return w
}

type findings []Finding

func (fs *findings) add(sev Severity, part, msg, expected, found string) {
	*fs = append(*fs, Finding{Severity: sev, Part: part, Message: msg, Expected: expected, Found: found})
}

// judgedBy marks the finding just added as the same fact an acceptance
// check judges.
func (fs *findings) judgedBy(check string) { (*fs)[len(*fs)-1].Check = check }

func contains(s, sub string) bool { return strings.Contains(strings.ToLower(s), strings.ToLower(sub)) }

// gpuMatches: vendor and model are case-insensitive substrings
// ("nvidia" matches "Nvidia(R) Corporation", "H100" matches "NVIDIA H100 80GB HBM3").
func gpuMatches(g machine.GPU, s recipe.GPUSpec) bool {
	return (s.Vendor == "" || contains(g.Vendor, s.Vendor) || contains(g.Model, s.Vendor)) && contains(g.Model, s.Model)
}

func gpuName(g machine.GPU, i int) string {
	if g.Slot != "" {
		return "gpu " + g.Slot
	}
	return fmt.Sprintf("gpu %d", i)
}

func (fs *findings) gpus(gpus []machine.GPU, specs []recipe.GPUSpec) {
	used := make([]bool, len(gpus))
	for _, s := range specs {
		var match []int
		for i, g := range gpus {
			if !used[i] && gpuMatches(g, s) {
				match = append(match, i)
				used[i] = true
			}
		}
		want := fmt.Sprintf("%d x %s %s", s.Count, s.Vendor, s.Model)
		switch {
		case len(match) < s.Count:
			fs.add(Critical, "gpu", fmt.Sprintf("missing GPU: %d of %d %s found", len(match), s.Count, s.Model), want, fmt.Sprintf("%d", len(match)))
			fs.judgedBy("gpu-count")
		case len(match) > s.Count:
			fs.add(Warning, "gpu", fmt.Sprintf("more %s GPUs than the recipe says", s.Model), want, fmt.Sprintf("%d", len(match)))
		}
		for _, i := range match {
			fs.gpu(gpus[i], i, s)
		}
	}
	var other []string
	for i, g := range gpus {
		if !used[i] {
			other = append(other, strings.TrimSpace(g.Vendor+" "+g.Model))
		}
	}
	if len(other) > 0 {
		var want []string
		for _, s := range specs {
			want = append(want, s.Model)
		}
		sev := Critical
		if len(specs) == 0 {
			sev = Warning
		}
		fs.add(sev, "gpu", "wrong GPU model: GPUs the recipe does not list", strings.Join(want, ", "), strings.Join(other, ", "))
	}
}

// vramToleranceDiv allows 1% below min_vram: GPUs report usable memory a
// little under the nominal size (H100 80GB: 81559 MiB; B200 180GB:
// 183359 MiB), and recipe authors write the nominal size.
const vramToleranceDiv = 100

func (fs *findings) gpu(g machine.GPU, i int, s recipe.GPUSpec) {
	part := gpuName(g, i)
	if s.MinVRAM > 0 {
		switch have := g.VRAMMiB << 20; {
		case g.VRAMMiB == 0:
			fs.add(Info, part, "VRAM not reported", s.MinVRAM.String(), "unknown")
		case have < s.MinVRAM.Bytes()-s.MinVRAM.Bytes()/vramToleranceDiv:
			fs.add(Critical, part, "VRAM below the minimum", ">= "+s.MinVRAM.String(), recipe.Size(have).String())
		}
	}
	cur, maxl := g.LinkCurrent, g.LinkMax
	if s.PCIeWidth > 0 {
		switch {
		case cur.Width == 0: // not reported counts as a mismatch
			fs.add(Critical, part, fmt.Sprintf("PCIe link width not reported: counts as below x%d", s.PCIeWidth), fmt.Sprintf("x%d", s.PCIeWidth), "unknown")
			fs.judgedBy("pcie-link")
		case cur.Width < s.PCIeWidth:
			fs.add(Critical, part, fmt.Sprintf("PCIe link trained at x%d instead of x%d", cur.Width, s.PCIeWidth),
				fmt.Sprintf("x%d", s.PCIeWidth), fmt.Sprintf("x%d", cur.Width))
			fs.judgedBy("pcie-link")
		}
	} else if cur.Width > 0 && maxl.Width > cur.Width {
		fs.add(Warning, part, fmt.Sprintf("PCIe link trained at x%d below its maximum x%d", cur.Width, maxl.Width),
			fmt.Sprintf("x%d", maxl.Width), fmt.Sprintf("x%d", cur.Width))
	}
	if s.PCIeGen > 0 {
		switch {
		case cur.Gen == 0: // not reported counts as a mismatch
			fs.add(Critical, part, fmt.Sprintf("PCIe generation not reported: counts as below Gen%d", s.PCIeGen), fmt.Sprintf("Gen%d", s.PCIeGen), "unknown")
			fs.judgedBy("pcie-link")
		case cur.Gen < s.PCIeGen:
			fs.add(Critical, part, fmt.Sprintf("PCIe link at Gen%d instead of Gen%d", cur.Gen, s.PCIeGen),
				fmt.Sprintf("Gen%d", s.PCIeGen), fmt.Sprintf("Gen%d", cur.Gen))
			fs.judgedBy("pcie-link")
		}
	} else if cur.Gen > 0 && maxl.Gen > cur.Gen {
		fs.add(Warning, part, fmt.Sprintf("PCIe link at Gen%d below its maximum Gen%d", cur.Gen, maxl.Gen),
			fmt.Sprintf("Gen%d", maxl.Gen), fmt.Sprintf("Gen%d", cur.Gen))
	}
	if g.Health != "" && g.Health != "OK" {
		fs.add(Warning, part, "GPU health is not OK", "OK", g.Health)
	}
}

func (fs *findings) cpu(cpus []machine.CPU, s recipe.CPUSpec) {
	if s.Sockets > 0 && len(cpus) != s.Sockets {
		sev := Critical
		if len(cpus) > s.Sockets {
			sev = Warning
		}
		fs.add(sev, "cpu", "CPU socket count differs", fmt.Sprintf("%d", s.Sockets), fmt.Sprintf("%d", len(cpus)))
	}
	var re *regexp.Regexp
	if s.Model != "" {
		var err error
		if re, err = regexp.Compile(s.Model); err != nil {
			fs.add(Warning, "cpu", "the recipe's CPU model is not a valid regular expression: "+err.Error(), s.Model, "")
			re = nil
		}
	}
	for _, c := range cpus {
		part := "cpu " + c.Socket
		if re != nil && !re.MatchString(c.Model) {
			fs.add(Critical, part, "wrong CPU model", s.Model, c.Model)
		}
		switch {
		case s.MinCores > 0 && c.Cores == 0:
			fs.add(Info, part, "core count not reported", fmt.Sprintf(">= %d", s.MinCores), "unknown")
		case s.MinCores > 0 && c.Cores < s.MinCores:
			fs.add(Critical, part, "fewer cores than the minimum", fmt.Sprintf(">= %d", s.MinCores), fmt.Sprintf("%d", c.Cores))
		}
	}
}

func (fs *findings) memory(dimms []machine.DIMM, s recipe.MemSpec) {
	var total int64
	for _, d := range dimms {
		total += d.SizeMiB << 20
	}
	if s.Total > 0 && total < s.Total.Bytes() {
		fs.add(Critical, "memory", "less memory than the recipe's total", ">= "+s.Total.String(), recipe.Size(total).String())
		fs.judgedBy("memory-size")
	}
	switch {
	case s.DIMMs > 0 && len(dimms) < s.DIMMs:
		fs.add(Critical, "memory", fmt.Sprintf("%d DIMM(s) missing", s.DIMMs-len(dimms)), fmt.Sprintf("%d DIMMs", s.DIMMs), fmt.Sprintf("%d", len(dimms)))
	case s.DIMMs > 0 && len(dimms) > s.DIMMs:
		fs.add(Warning, "memory", "more DIMMs than the recipe says", fmt.Sprintf("%d DIMMs", s.DIMMs), fmt.Sprintf("%d", len(dimms)))
	}
}

func (fs *findings) nics(nics []machine.NIC, s recipe.NICSpec) {
	part := "nic"
	if s.Role != "" {
		part = "nic " + s.Role
	}
	var match []machine.NIC
	for _, n := range nics {
		if s.Model == "" || contains(n.Model, s.Model) {
			match = append(match, n)
		}
	}
	label := strings.TrimSpace(s.Model + " " + s.Speed.String())
	if s.Speed == 0 {
		label = s.Model
	}
	if s.Count > 0 && len(match) < s.Count {
		fs.add(Critical, part, fmt.Sprintf("missing NIC port: %d of %d %s found", len(match), s.Count, label),
			fmt.Sprintf("%d", s.Count), fmt.Sprintf("%d", len(match)))
		fs.judgedBy("nic-link")
	}
	if s.Speed == 0 {
		return
	}
	for _, n := range match {
		switch {
		case n.SpeedMbps == 0: // as slower: nic-link (count ports at speed) is what blocks
			fs.add(Warning, part+" "+n.Name, "link speed not reported (link down or unknown): counts as slower than the recipe's speed", s.Speed.String(), "unknown")
		case int64(n.SpeedMbps) < s.Speed.Mbps():
			fs.add(Warning, part+" "+n.Name, "NIC link slower than the recipe's speed", s.Speed.String(), recipe.Speed(n.SpeedMbps).String())
		}
	}
}

// psuWorking: present and not failed.
func psuWorking(p machine.PSU) bool {
	return p.State != "Absent" && p.Health != "Critical" && (p.State == "" || p.State == "Enabled" || p.State == "StandbySpare")
}

func (fs *findings) psus(psus []machine.PSU, s recipe.PSUSpec) {
	present := 0
	for _, p := range psus {
		if p.State == "Absent" {
			continue
		}
		present++
		part := "psu " + p.Name
		switch {
		case !psuWorking(p):
			fs.add(Critical, part, "PSU failed", "Enabled, OK", strings.Trim(p.State+", "+p.Health, ", "))
		case p.Health == "Warning":
			fs.add(Warning, part, "PSU health is Warning", "OK", p.Health)
		}
		if s.RatedWatts > 0 && p.RatedWatts > 0 && p.RatedWatts < s.RatedWatts {
			fs.add(Warning, part, "PSU rated below the recipe", fmt.Sprintf("%d W", s.RatedWatts), fmt.Sprintf("%d W", p.RatedWatts))
		}
	}
	if s.Count > 0 && present < s.Count {
		fs.add(Critical, "psu", fmt.Sprintf("%d PSU(s) missing", s.Count-present), fmt.Sprintf("%d", s.Count), fmt.Sprintf("%d", present))
	}
}

// pin compares a component's reported versions with its pin. component
// is the firmware pin key (bios, bmc, gpu, nic, other.NAME) and label how
// findings name it. A mismatch is critical unless the policy says warn
// (update blocks like block until a campaign brings the component to the
// pin); versions compare as vendors write them (pkg/firmware/version:
// "2.72 Sep 04 2022" is 2.72). A pinned component the hardware does not
// report is a mismatch too, unless warn, on the BMC's inventory (Source
// "redfish"): the one that judges firmware (the engine checks firmware
// pins on the BMC's read; the agent cannot see a BMC's or a CPLD's
// firmware, so on an in-band inventory a component it does not show is
// info).
func (fs *findings) pin(f recipe.Firmware, bmcRead bool, component, label, want string, have []string) {
	if want == "" {
		return
	}
	part := "firmware " + label
	action := f.Action(component)
	sev := Critical
	if action == recipe.FirmwareWarn {
		sev = Warning
	}
	if len(have) == 0 {
		if action == recipe.FirmwareWarn || !bmcRead {
			fs.add(Info, part, label+" firmware version not reported", want, "unknown")
			return
		}
		fs.add(sev, part, fmt.Sprintf("%s firmware version not reported: cannot show the pin holds (policy %s)", label, action), want, "not reported")
		return
	}
	for _, h := range dedupe(have) {
		if !version.Equal(h, want) {
			fs.add(sev, part, fmt.Sprintf("%s firmware not at the pinned version (policy %s)", label, action), want, h)
		}
	}
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// sameComponent matches a firmware.other key with a reported component
// name whatever the case and separators: "hgx-baseboard" is "HGX Baseboard"
// and "HGX_Baseboard"; "cpld" is "CPLD" and "System CPLD".
func sameComponent(reported, key string) bool {
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return -1
		}, s)
	}
	k := norm(key)
	return k != "" && strings.Contains(norm(reported), k)
}

func firmwareEntries(inv machine.Inventory, key string) []string {
	var out []string
	for _, f := range inv.Firmware {
		if contains(f.Component, key) {
			out = append(out, f.Version)
		}
	}
	return out
}

func (fs *findings) firmware(inv machine.Inventory, f recipe.Firmware, nicSpecs []recipe.NICSpec) {
	bios := firmwareEntries(inv, "BIOS")
	if inv.System.BIOSVersion != "" {
		bios = []string{inv.System.BIOSVersion}
	}
	fs.pin(f, inv.Source == "redfish", "bios", "BIOS", f.BIOS.Version, bios)
	bmcv := firmwareEntries(inv, "BMC")
	if inv.System.BMCVersion != "" {
		bmcv = []string{inv.System.BMCVersion}
	}
	fs.pin(f, inv.Source == "redfish", "bmc", "BMC", f.BMC.Version, bmcv)
	var gpu []string
	for _, g := range inv.GPUs {
		if g.Firmware != "" && (f.GPU.Component == "" || sameComponent(g.Model, f.GPU.Component)) {
			gpu = append(gpu, g.Firmware)
		}
	}
	if len(gpu) == 0 {
		gpu = firmwareEntries(inv, "GPU")
	}
	fs.pin(f, inv.Source == "redfish", "gpu", "GPU", f.GPU.Version, gpu)
	fs.nicFirmware(inv, f, nicSpecs)
	names := make([]string, 0, len(f.Other))
	for k := range f.Other {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		var have []string
		for _, e := range inv.Firmware {
			if sameComponent(e.Component, cmp.Or(f.Other[k].Component, k)) {
				have = append(have, e.Version)
			}
		}
		fs.pin(f, inv.Source == "redfish", "other."+k, k, f.Other[k].Version, have)
	}
}

// nicFirmware holds each NIC to the pin of the first hardware.nics entry
// whose model it matches and that pins firmware, and the others to
// firmware.nic (BMC-reported NIC firmware too, where no NIC reports its
// own). Every NIC pin is policy key nic.
func (fs *findings) nicFirmware(inv machine.Inventory, f recipe.Firmware, specs []recipe.NICSpec) {
	byModel := map[int][]string{}
	var rest []string
	for _, n := range inv.NICs {
		if n.Firmware == "" {
			continue
		}
		i := slices.IndexFunc(specs, func(s recipe.NICSpec) bool { return s.Firmware != "" && s.Model != "" && contains(n.Model, s.Model) })
		if i < 0 {
			rest = append(rest, n.Firmware)
			continue
		}
		byModel[i] = append(byModel[i], n.Firmware)
	}
	for i, s := range specs {
		if s.Firmware != "" {
			fs.pin(f, inv.Source == "redfish", "nic", "NIC "+s.Model, s.Firmware, byModel[i])
		}
	}
	if len(rest) == 0 && len(byModel) == 0 {
		rest = firmwareEntries(inv, "NIC")
	}
	fs.pin(f, inv.Source == "redfish", "nic", "NIC", f.NIC.Version, rest)
}

// power checks that the working PSUs, less the redundancy reserve and the
// derating margin, carry the recipe's load (and the load measured now).
func (fs *findings) power(inv machine.Inventory, p recipe.Power, spec *recipe.PSUSpec) {
	if p.LoadWatts == 0 {
		return
	}
	var ratings []int
	for _, s := range inv.PSUs {
		if psuWorking(s) && s.RatedWatts > 0 {
			ratings = append(ratings, s.RatedWatts)
		}
	}
	redundancy := ""
	if spec != nil {
		redundancy = spec.Redundancy
	}
	usable := usableWatts(ratings, redundancy)
	if usable == 0 {
		usable = inv.Power.CapacityWatts
	}
	if usable == 0 {
		fs.add(Info, "power", "PSU capacity not reported; cannot check the load", fmt.Sprintf(">= %d W", p.LoadWatts), "unknown")
		return
	}
	derated := usable * (100 - p.DeratingPct) / 100
	if p.LoadWatts > derated {
		fs.add(Critical, "power", fmt.Sprintf("power capacity %d W (after %s reserve and %d%% derating) is below the expected load",
			derated, orDefault(redundancy, "no"), p.DeratingPct), fmt.Sprintf(">= %d W", p.LoadWatts), fmt.Sprintf("%d W", derated))
	}
	if inv.Power.Watts > derated {
		fs.add(Warning, "power", "measured draw exceeds the derated PSU capacity", fmt.Sprintf("<= %d W", derated), fmt.Sprintf("%d W", inv.Power.Watts))
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// usableWatts is what ratings deliver with the redundancy reserve kept free:
// N+1 loses the largest PSU, N+N half of them.
func usableWatts(ratings []int, redundancy string) int {
	sort.Sort(sort.Reverse(sort.IntSlice(ratings)))
	total := 0
	for _, r := range ratings {
		total += r
	}
	switch strings.ToUpper(strings.ReplaceAll(redundancy, " ", "")) {
	case "N+1":
		if len(ratings) > 0 {
			total -= ratings[0]
		}
	case "N+N", "2N":
		half := 0
		for _, r := range ratings[(len(ratings)+1)/2:] {
			half += r
		}
		total = half
	}
	return total
}
