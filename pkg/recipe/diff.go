package recipe

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Change is one semantic difference between two versions of a recipe.
type Change struct {
	Recipe string `json:"recipe"`
	Kind   string `json:"kind"`            // "added", "removed" or "changed"
	Field  string `json:"field,omitempty"` // path such as bios.attributes.SriovGlobalEnable; empty for a whole recipe
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Text   string `json:"text"` // for people: "BIOS SriovGlobalEnable: Disabled -> Enabled"
}

// Change kinds.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
	ChangeChanged = "changed"
)

func (c Change) String() string { return c.Text }

// Diff lists what changed from old to new, field by field, in the order of
// the recipe's fields (map keys sorted). Pass resolved recipes (Set.Get) so
// a change in a base shows in every recipe that extends it. A nil old means
// the recipe was added, a nil new that it was removed.
func Diff(old, new *Recipe) []Change {
	switch {
	case old == nil && new == nil:
		return nil
	case old == nil:
		return []Change{{Recipe: new.Name, Kind: ChangeAdded, Text: "recipe added"}}
	case new == nil:
		return []Change{{Recipe: old.Name, Kind: ChangeRemoved, Text: "recipe removed"}}
	}
	d := &differ{recipe: new.Name}
	d.walk("", reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem())
	return d.changes
}

// DiffSets diffs every recipe of two sets, by name, in name order.
func DiffSets(old, new *Set) []Change {
	names := map[string]bool{}
	for _, s := range []*Set{old, new} {
		if s != nil {
			for _, n := range s.Names() {
				names[n] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	var out []Change
	for _, n := range sorted {
		a, _ := old.getOrNil(n)
		b, _ := new.getOrNil(n)
		for _, c := range Diff(a, b) {
			c.Recipe = n
			out = append(out, c)
		}
	}
	return out
}

func (s *Set) getOrNil(name string) (*Recipe, bool) {
	if s == nil {
		return nil, false
	}
	return s.Get(name)
}

type differ struct {
	recipe  string
	changes []Change
}

func (d *differ) walk(path string, a, b reflect.Value) {
	t := a.Type()
	switch {
	case t == typeSize || t == typeSpeed || t == typeDuration || t == typeValue || t == typeQuantity:
		d.leaf(path, a, b)
	case t.Kind() == reflect.Pointer:
		if a.IsNil() && b.IsNil() {
			return
		}
		d.walk(path, derefOrZero(a), derefOrZero(b))
	case t.Kind() == reflect.Struct:
		for _, f := range fieldsOf(t) {
			d.walk(join(path, f.key), a.Field(f.index), b.Field(f.index))
		}
	case t.Kind() == reflect.Map:
		keys := map[string]bool{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[k.String()] = true
			}
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			kv := reflect.ValueOf(k).Convert(t.Key())
			d.walk(join(path, k), mapIndexOrZero(a, kv), mapIndexOrZero(b, kv))
		}
	case t.Kind() == reflect.Slice:
		for i := range max(a.Len(), b.Len()) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= a.Len():
				d.add(ChangeAdded, p, "", summary(b.Index(i)))
			case i >= b.Len():
				d.add(ChangeRemoved, p, summary(a.Index(i)), "")
			default:
				d.walk(p, a.Index(i), b.Index(i))
			}
		}
	default:
		d.leaf(path, a, b)
	}
}

func derefOrZero(v reflect.Value) reflect.Value {
	if v.IsNil() {
		return reflect.Zero(v.Type().Elem())
	}
	return v.Elem()
}

func mapIndexOrZero(m, k reflect.Value) reflect.Value {
	if v := m.MapIndex(k); v.IsValid() {
		return v
	}
	return reflect.Zero(m.Type().Elem())
}

func (d *differ) leaf(path string, a, b reflect.Value) {
	if a.Type() == typeValue {
		va, vb := a.Interface().(Value), b.Interface().(Value)
		if va.Equal(vb) {
			return
		}
		os, ns := va.String(), vb.String()
		if va.Any() != nil && vb.Any() != nil && va.Type() != vb.Type() {
			os, ns = fmt.Sprintf("%s (%s)", quoteValue(va), va.Type()), fmt.Sprintf("%s (%s)", quoteValue(vb), vb.Type())
		}
		switch {
		case va.Any() == nil:
			d.add(ChangeAdded, path, "", ns)
		case vb.Any() == nil:
			d.add(ChangeRemoved, path, os, "")
		default:
			d.add(ChangeChanged, path, os, ns)
		}
		return
	}
	if a.Equal(b) {
		return
	}
	switch {
	case a.IsZero():
		d.add(ChangeAdded, path, "", format(b))
	case b.IsZero():
		d.add(ChangeRemoved, path, format(a), "")
	default:
		d.add(ChangeChanged, path, format(a), format(b))
	}
}

func quoteValue(v Value) string {
	if v.Str != nil {
		return strconv.Quote(*v.Str)
	}
	return v.String()
}

func format(v reflect.Value) string {
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprint(v.Interface())
}

// summary prints a list element's given fields: vendor=nvidia model=H100 count=8.
func summary(v reflect.Value) string {
	if v.Kind() != reflect.Struct {
		return format(v)
	}
	var parts []string
	for _, f := range fieldsOf(v.Type()) {
		fv := v.Field(f.index)
		if fv.IsZero() {
			continue
		}
		s := format(fv)
		if fv.Kind() == reflect.Map {
			s = fmt.Sprint(fv.Interface())
		}
		parts = append(parts, f.key+"="+s)
	}
	return strings.Join(parts, " ")
}

func (d *differ) add(kind, path, old, new string) {
	d.changes = append(d.changes, Change{Recipe: d.recipe, Kind: kind, Field: path, Old: old, New: new,
		Text: describeChange(kind, path, old, new)})
}

var indexRE = regexp.MustCompile(`\[(\d+)\]`)

// describeChange writes a change for people, naming fields as an operator
// says them ("GPU count 8 -> 4") where the field is a well-known one.
func describeChange(kind, path, old, new string) string {
	generic := indexRE.ReplaceAllString(path, "[*]")
	index := ""
	if m := indexRE.FindStringSubmatch(path); m != nil && m[1] != "0" {
		index = "[" + m[1] + "]"
	}
	if generic == "os.first_boot.cloud_init" {
		return "cloud-init user-data " + kind
	}
	if strings.Contains(old, "\n") || strings.Contains(new, "\n") {
		return path + " " + kind
	}
	switch {
	case strings.HasSuffix(generic, ".sha256"):
		what := map[string]string{"os.image.sha256": "image", "os.agent.kernel.sha256": "agent kernel",
			"os.agent.initrd.sha256": "agent initrd"}[generic]
		if what == "" {
			what = path
		}
		return fmt.Sprintf("%s sha256 %s: %s -> %s", what, kind, short(old), short(new))
	case strings.HasPrefix(path, "bios.attributes."), strings.HasPrefix(path, "bios.attributes["):
		return describeKeyed("BIOS", "BIOS attribute", attrName(path, "bios.attributes"), kind, old, new)
	case strings.HasPrefix(path, "drivers"):
		return describeKeyed("driver", "driver pin", attrName(path, "drivers"), kind, old, new)
	case strings.HasPrefix(path, "firmware.") && !strings.HasPrefix(path, "firmware.policy"):
		return describePin(path, kind, old, new)
	}
	label, ok := fieldLabel(generic)
	if !ok {
		label = path
	} else {
		label = strings.Replace(label, "{i}", index, 1)
	}
	switch kind {
	case ChangeAdded:
		if strings.HasSuffix(path, "]") {
			return fmt.Sprintf("added %s: %s", path, new)
		}
		return fmt.Sprintf("added %s = %s", label, new)
	case ChangeRemoved:
		if strings.HasSuffix(path, "]") {
			return fmt.Sprintf("removed %s: %s", path, old)
		}
		return fmt.Sprintf("removed %s (was %s)", label, old)
	}
	return fmt.Sprintf("%s %s -> %s", label, old, new)
}

// describePin writes a change of a firmware pin's field: "BIOS firmware
// 1.7.2 -> 1.8.0", "GPU firmware policy block -> update", "added firmware
// pin cpld = 1.0.4".
func describePin(path, kind, old, new string) string {
	rest := strings.TrimPrefix(path, "firmware.")
	var key, field string
	if o, ok := strings.CutPrefix(rest, "other"); ok {
		i := strings.LastIndex(o, ".")
		if i < 0 {
			return path + " " + kind
		}
		key, field = attrName(o[:i], ""), o[i+1:]
	} else {
		key, field, _ = strings.Cut(rest, ".")
	}
	label := map[string]string{"bios": "BIOS firmware", "bmc": "BMC firmware", "gpu": "GPU firmware", "nic": "NIC firmware"}[key]
	if label == "" {
		label = "firmware pin " + key
	}
	if field != "version" {
		label += " " + strings.ReplaceAll(field, "_", " ")
	}
	if field == "package" {
		old, new = short(old), short(new)
	}
	switch kind {
	case ChangeAdded:
		return fmt.Sprintf("added %s = %s", label, new)
	case ChangeRemoved:
		return fmt.Sprintf("removed %s (was %s)", label, old)
	}
	return fmt.Sprintf("%s %s -> %s", label, old, new)
}

func describeKeyed(prefix, noun, key, kind, old, new string) string {
	switch kind {
	case ChangeAdded:
		return fmt.Sprintf("added %s %s = %s", noun, key, new)
	case ChangeRemoved:
		return fmt.Sprintf("removed %s %s (was %s)", noun, key, old)
	}
	return fmt.Sprintf("%s %s: %s -> %s", prefix, key, old, new)
}

// attrName is the map key at the end of path under prefix.
func attrName(path, prefix string) string {
	k := strings.TrimPrefix(strings.TrimPrefix(path, prefix), ".")
	if strings.HasPrefix(k, "[") {
		if u, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(k, "["), "]")); err == nil {
			return u
		}
	}
	return k
}

// short abbreviates a digest: 1a2b3c4d…
func short(h string) string {
	if len(h) > 8 {
		return h[:8] + "…"
	}
	if h == "" {
		return "(none)"
	}
	return h
}

// fieldLabel names well-known fields; {i} is replaced by [N] for list
// elements after the first.
func fieldLabel(generic string) (string, bool) {
	l, ok := map[string]string{
		"version":                           "version",
		"extends":                           "extends",
		"hardware.gpus[*].vendor":           "GPU{i} vendor",
		"hardware.gpus[*].model":            "GPU{i} model",
		"hardware.gpus[*].count":            "GPU{i} count",
		"hardware.gpus[*].min_vram":         "GPU{i} min VRAM",
		"hardware.gpus[*].pcie_gen":         "GPU{i} PCIe gen",
		"hardware.gpus[*].pcie_width":       "GPU{i} PCIe width",
		"hardware.cpu.model":                "CPU model",
		"hardware.cpu.sockets":              "CPU sockets",
		"hardware.cpu.min_cores":            "CPU min cores",
		"hardware.memory.total":             "memory",
		"hardware.memory.dimms":             "DIMM count",
		"hardware.nics[*].model":            "NIC{i} model",
		"hardware.nics[*].speed":            "NIC{i} speed",
		"hardware.nics[*].count":            "NIC{i} count",
		"hardware.nics[*].role":             "NIC{i} role",
		"hardware.nics[*].firmware":         "NIC{i} firmware",
		"hardware.disks[*].boot":            "disk rule{i} boot",
		"hardware.disks[*].min_size":        "disk rule{i} min size",
		"hardware.disks[*].max_size":        "disk rule{i} max size",
		"hardware.disks[*].model":           "disk rule{i} model",
		"hardware.disks[*].path":            "disk rule{i} path",
		"hardware.disks[*].count":           "disk rule{i} count",
		"hardware.psus.count":               "PSU count",
		"hardware.psus.rated_watts":         "PSU rated watts",
		"hardware.psus.redundancy":          "PSU redundancy",
		"bios.boot_mode":                    "boot mode",
		"os.image.name":                     "image",
		"os.image.format":                   "image format",
		"os.image.url":                      "image URL",
		"os.cmdline":                        "kernel command line",
		"os.handoff":                        "handoff",
		"os.agent.cmdline":                  "agent command line",
		"os.agent.boot":                     "agent boot",
		"network.management_vlan":           "management VLAN",
		"network.workload_vlan":             "workload VLAN",
		"network.hostname":                  "hostname pattern",
		"network.pool":                      "address pool",
		"acceptance.burn_in.duration":       "burn-in duration",
		"acceptance.burn_in.max_gpu_temp_c": "burn-in max GPU temperature (C)",
		"acceptance.burn_in.timeout":        "burn-in timeout",
		"template":                          "template",
		"power.idle_watts":                  "idle power (W)",
		"power.load_watts":                  "load power (W)",
		"power.derating_pct":                "PSU derating (%)",
		"timeouts.post":                     "POST timeout",
		"timeouts.provision":                "provision timeout",
		"timeouts.verify":                   "verify timeout",
	}[generic]
	return l, ok
}
