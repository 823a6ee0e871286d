package recipe

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// firmware lints the pins (every field, at its file:line) and the policy
// map: known components, update/block/warn, a package for every pin a
// campaign updates, and no conflict between the two ways to say a policy.
func (l *linter) firmware(r *Recipe) {
	f := &r.Firmware
	keys := FirmwareKeys()
	for _, k := range slices.Sorted(maps.Keys(f.Other)) {
		keys = append(keys, "other."+k)
	}
	for _, k := range keys {
		if p, _ := f.Get(k); !p.IsZero() || l.has(pinPath(k)) {
			l.pin(r, k, p)
		}
	}
	l.firmwarePolicy(f)
}

// pinPath is the field path of a pin key: firmware.bios, firmware.other.cpld.
func pinPath(key string) string {
	if name, ok := strings.CutPrefix(key, "other."); ok {
		return join("firmware.other", name)
	}
	return "firmware." + key
}

var numericID = regexp.MustCompile(`^[0-9 ]+$`)

func (l *linter) pin(r *Recipe, key string, p Pin) {
	path := pinPath(key)
	// A mapping without version is the decoder's error, but in a recipe
	// that extends a base, where mappings may be partial.
	if strings.TrimSpace(p.Version) == "" && (l.has(join(path, "version")) || l.has("extends")) {
		l.bad(join(path, "version"), "expected a pinned version such as 1.7.2, found none (a pin mapping given over a base's string form replaces it whole: give version here too)")
	}
	if l.has(join(path, "component")) {
		switch c := strings.TrimSpace(p.Component); {
		case c == "":
			l.bad(join(path, "component"), "expected a component name, model or SKU (NVIDIA A40, ConnectX-7), found an empty string")
		case numericID.MatchString(c):
			l.bad(join(path, "component"), "%q is a number: components are matched by the inventory's normalised name, model or SKU, never by a vendor's numeric Id (HPE iLO numbers its firmware entries 1, 2, 3 ...)", p.Component)
		}
	}
	l.sha256(join(path, "package"), p.Package)
	l.placeholder(r, join(path, "package"), p.Package)
	if strings.HasPrefix(key, "other.") { // the fixed keys get these from tagChecks
		l.pinEnums(path, p)
	}
	action := r.Firmware.Action(key)
	switch {
	case action == FirmwareUpdate && p.Package == "":
		l.bad(l.pinField(path, "policy"), "policy update needs a package: the sha256 of the firmware package in ingot's content store (ingot firmware import FILE prints it)")
	case action != FirmwareUpdate && p.AllowDowngrade:
		l.warn(join(path, "allow_downgrade"), "allow_downgrade only matters with policy update; this pin's policy is %s", action)
	case action != FirmwareUpdate && l.has(join(path, "package")):
		l.warn(join(path, "package"), "a package is only applied with policy update; this pin's policy is %s", action)
	}
}

// pinField is path.field when the file gives it, else the pin itself (a
// policy given in firmware.policy is reported there).
func (l *linter) pinField(path, field string) string {
	if l.has(join(path, field)) {
		return join(path, field)
	}
	return path
}

func (l *linter) pinEnums(path string, p Pin) {
	if l.has(join(path, "apply_time")) && !slices.Contains([]ApplyTime{ApplyImmediate, ApplyOnReset, ApplyACCycle}, p.ApplyTime) {
		l.bad(join(path, "apply_time"), "expected one of immediate, on-reset, ac-cycle, found %q", p.ApplyTime)
	}
	if l.has(join(path, "policy")) && !validAction(p.Policy) {
		l.bad(join(path, "policy"), "expected one of update, block, warn, found %q", p.Policy)
	}
}

func validAction(a FirmwareAction) bool {
	return a == FirmwareUpdate || a == FirmwareBlock || a == FirmwareWarn
}

// firmwarePolicy lints firmware.policy: known components, update, block
// or warn, and no pin that says otherwise.
func (l *linter) firmwarePolicy(f *Firmware) {
	for _, k := range slices.Sorted(maps.Keys(f.Policy)) {
		p := join("firmware.policy", k)
		pin, known := f.Get(k)
		switch {
		case !known:
			l.bad(p, "%s", unknownComponent(f, k))
			continue
		case pin.Version == "":
			l.warn(p, "firmware.%s is not pinned: this policy has nothing to act on", k)
		}
		v := f.Policy[k]
		if !validAction(v) {
			l.bad(p, "expected update, block or warn, found %q", v)
			continue
		}
		if pin.Policy != "" && pin.Policy != v {
			l.bad(p, "firmware.policy says %s but %s.policy says %s: keep one", v, pinPath(k), pin.Policy)
		}
	}
}

func unknownComponent(f *Firmware, k string) string {
	have := "none"
	if len(f.Other) > 0 {
		have = strings.Join(slices.Sorted(maps.Keys(f.Other)), ", ")
	}
	msg := fmt.Sprintf("unknown firmware component %q; expected bios, bmc, gpu, nic, or other.NAME for a key of firmware.other (have: %s)", k, have)
	known := FirmwareKeys()
	for _, o := range slices.Sorted(maps.Keys(f.Other)) {
		known = append(known, "other."+o)
	}
	if s := suggest(k, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}
