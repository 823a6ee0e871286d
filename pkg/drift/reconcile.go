package drift

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// ReconcileGPUs compares the GPUs the machine reports in-band (the agent:
// sysfs, nvidia-smi) with those its BMC reports, and lists where they
// disagree. GPUs are paired by serial number, then PCI address (0000:18:00.0,
// 18:00.0 and 00000000:18:00.0 are one address), then slot ("PCI-E Slot 1"
// and sysfs's "1" are one slot). A GPU only one side shows is critical; a
// pair whose model or serial differ is a warning. A BMC that shows no GPUs
// at all (many cannot) gives one info finding instead of a critical per GPU.
// The findings are sorted by severity, then part.
func ReconcileGPUs(inBand, bmc []machine.GPU) []Finding {
	if len(bmc) == 0 {
		if len(inBand) == 0 {
			return nil
		}
		return []Finding{{Severity: Info, Part: "gpu",
			Message:  "the BMC shows no GPUs (some BMCs cannot); the in-band GPUs were not cross-checked",
			Expected: fmt.Sprintf("the %d GPUs seen in-band", len(inBand)), Found: "none from the BMC"}}
	}
	pairs, onlyIn, onlyBMC := pairGPUs(inBand, bmc)
	var fs findings
	for _, g := range onlyIn {
		fs.add(Critical, reconcilePart(g), "GPU in the in-band inventory only; the BMC does not show it",
			"in both inventories", "in-band: "+gpuIdentity(g))
	}
	for _, g := range onlyBMC {
		fs.add(Critical, reconcilePart(g), "GPU in the BMC inventory only; the machine does not see it in-band",
			"in both inventories", "BMC: "+gpuIdentity(g))
	}
	for _, p := range pairs {
		fs.mismatch(p[0], p[1])
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

// pairGPUs pairs in-band and BMC GPUs one to one: by serial, then PCI
// address, then slot, each pass in input order. It returns the pairs
// (in-band, BMC) and what is left on each side.
func pairGPUs(inBand, bmc []machine.GPU) (pairs [][2]machine.GPU, onlyIn, onlyBMC []machine.GPU) {
	usedIn, usedBMC := make([]bool, len(inBand)), make([]bool, len(bmc))
	for _, key := range []func(machine.GPU) string{
		func(g machine.GPU) string { return normSerial(g.Serial) },
		func(g machine.GPU) string { return normPCIAddress(g.PCIAddress) },
		func(g machine.GPU) string { return normSlot(g.Slot) },
	} {
		for i, a := range inBand {
			ka := key(a)
			if usedIn[i] || ka == "" {
				continue
			}
			for j, b := range bmc {
				if !usedBMC[j] && ka == key(b) {
					usedIn[i], usedBMC[j] = true, true
					pairs = append(pairs, [2]machine.GPU{a, b})
					break
				}
			}
		}
	}
	for i, g := range inBand {
		if !usedIn[i] {
			onlyIn = append(onlyIn, g)
		}
	}
	for j, g := range bmc {
		if !usedBMC[j] {
			onlyBMC = append(onlyBMC, g)
		}
	}
	return pairs, onlyIn, onlyBMC
}

// mismatch reports a paired GPU whose two inventories disagree on what it is.
func (fs *findings) mismatch(in, bmc machine.GPU) {
	part := reconcilePart(in)
	if si, sb := normSerial(in.Serial), normSerial(bmc.Serial); si != "" && sb != "" && si != sb {
		fs.add(Warning, part, "in-band and BMC serial numbers differ for the same GPU", "in-band "+in.Serial, "BMC "+bmc.Serial)
	}
	if !sameModel(in.Model, bmc.Model) {
		fs.add(Warning, part, "in-band and BMC models differ for the same GPU", "in-band "+in.Model, "BMC "+bmc.Model)
	}
}

// reconcilePart names a GPU by slot, else PCI address, else serial.
func reconcilePart(g machine.GPU) string {
	for _, s := range []string{g.Slot, normPCIAddress(g.PCIAddress), g.PCIAddress, g.Serial} {
		if strings.TrimSpace(s) != "" {
			return "gpu " + strings.TrimSpace(s)
		}
	}
	return "gpu"
}

// gpuIdentity says which GPU it is: "NVIDIA A40, serial 1650, pci
// 0000:21:00.0, slot PCI-E Slot 1".
func gpuIdentity(g machine.GPU) string {
	parts := []string{strings.TrimSpace(g.Model)}
	if parts[0] == "" {
		parts[0] = "unknown model"
	}
	for _, f := range [][2]string{{"serial", g.Serial}, {"pci", g.PCIAddress}, {"slot", g.Slot}} {
		if v := strings.TrimSpace(f[1]); v != "" {
			parts = append(parts, f[0]+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

// normPCIAddress writes a PCI address as domain:bus:device.function in
// lower-case hex, 0000:18:00.0, from any of the forms inventories use:
// "18:00.0" (no domain), "00000000:18:00.0" (nvidia-smi's 32-bit domain),
// "0000:18:00" (no function: function 0), upper case. It returns "" for
// what is not a PCI address.
func normPCIAddress(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	if a == "" {
		return ""
	}
	rest, fn, hasFn := strings.Cut(a, ".")
	if !hasFn {
		fn = "0"
	}
	f := strings.Split(rest, ":")
	if len(f) == 2 {
		f = append([]string{"0"}, f...)
	}
	if len(f) != 3 {
		return ""
	}
	var v [4]uint64
	limits := [4]uint64{0xffffffff, 0xff, 0x1f, 0x7}
	for i, s := range append(f, fn) {
		n, err := strconv.ParseUint(s, 16, 32)
		if err != nil || n > limits[i] {
			return ""
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0]&0xffff, v[1], v[2], v[3])
}

// normSerial folds case and space and treats placeholders as no serial.
func normSerial(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "n/a", "[n/a]", "na", "none", "unknown", "not specified", "0":
		return ""
	}
	return s
}

// normSlot keeps letters and digits, folds case and drops a generic "PCIe
// slot" prefix, so the BMC's "PCI-E Slot 1", SMBIOS's "PCIe Slot 1" and
// sysfs's "1" are one slot; "SXM1" stays "sxm1".
func normSlot(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	k := b.String()
	for _, p := range []string{"pciexpress", "pcie", "pci"} {
		if strings.HasPrefix(k, p) {
			k = k[len(p):]
			break
		}
	}
	if rest := strings.TrimPrefix(k, "slot"); rest != "" {
		k = rest
	}
	return k
}

// sameModel: vendor words, case and punctuation aside, the models agree when
// their model numbers (the first word with a digit that is not a size, as
// A40, H100, B200, MI300X) agree, or, lacking those, when one name holds
// the other ("B200" and "B200 180GB HBM3e").
func sameModel(a, b string) bool {
	ta, tb := modelWords(a), modelWords(b)
	if len(ta) == 0 || len(tb) == 0 {
		return true // one side does not say: nothing to compare
	}
	if na, nb := modelNumber(ta), modelNumber(tb); na != "" && nb != "" {
		return na == nb
	}
	ja, jb := strings.Join(ta, " "), strings.Join(tb, " ")
	return strings.Contains(ja, jb) || strings.Contains(jb, ja)
}

func modelWords(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	var out []string
	for _, w := range f {
		switch w {
		case "nvidia", "amd", "ati", "corporation", "corp", "inc", "r", "tm", "tesla", "instinct":
			continue
		}
		out = append(out, w)
	}
	return out
}

func modelNumber(words []string) string {
	for _, w := range words {
		if !strings.ContainsAny(w, "0123456789") || isSize(w) {
			continue
		}
		return w
	}
	return ""
}

// isSize: "40gb", "80g", "48gb".
func isSize(w string) bool {
	for _, u := range []string{"gb", "g", "tb", "mb"} {
		if n, ok := strings.CutSuffix(w, u); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}
