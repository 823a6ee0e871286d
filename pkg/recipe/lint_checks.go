package recipe

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// This file lints what must name something the rest of ingot knows: the
// acceptance checks (the registry in checks.go), driver keys (what first
// boot reports) and firmware policy components.

func (l *linter) acceptance(a *Acceptance) {
	seen := map[string]bool{}
	var burnIn []string
	for i, c := range a.Checks {
		p := fmt.Sprintf("acceptance.checks[%d]", i)
		if !l.has(p + ".name") {
			continue // missing or not a string: the decoder said so
		}
		if c.Name == "" {
			l.bad(p+".name", "expected a check name such as gpu-count, found an empty string")
			continue
		}
		// The same check with other args is another check (nvbandwidth
		// per testcase, cuda-bandwidth per direction).
		key := c.Name + fmt.Sprint(c.Args)
		if seen[key] {
			l.warn(p+".name", "check %q is listed twice", c.Name)
		}
		seen[key] = true
		def, ok := lookupDef(c.Name)
		if !ok {
			l.bad(p+".name", "%s", unknownCheck(c.Name))
			continue
		}
		if def.spec.Stage == StageBurnIn {
			burnIn = append(burnIn, c.Name)
		}
		l.check(p, c, def)
	}
	b := a.BurnIn
	if b == nil {
		if len(burnIn) > 0 {
			verb := "runs"
			if len(burnIn) > 1 {
				verb = "run"
			}
			l.bad("acceptance.checks", "%s %s during the burn-in: expected acceptance.burn_in with a duration such as 2h",
				strings.Join(burnIn, ", "), verb)
		}
		return
	}
	if l.has("acceptance.burn_in.duration") && b.Duration <= 0 {
		l.bad("acceptance.burn_in.duration", "expected a duration above zero such as 2h, found %s", b.Duration)
	}
	if l.has("acceptance.burn_in.timeout") && b.Timeout <= b.Duration {
		l.bad("acceptance.burn_in.timeout", "expected a timeout longer than the burn-in duration (%s), found %s", b.Duration, b.Timeout)
	}
}

func unknownCheck(name string) string {
	all := append(checkNames(StageAgent), checkNames(StageBurnIn)...)
	msg := fmt.Sprintf("unknown check %q; expected one of the agent checks (%s) or the burn-in checks (%s)",
		name, strings.Join(checkNames(StageAgent), ", "), strings.Join(checkNames(StageBurnIn), ", "))
	if s := suggest(name, all); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg
}

// check lints one registered check: its bounds in its unit, its args.
func (l *linter) check(p string, c Check, def checkDef) {
	l.bound(p+".min", c.Min, def, "min", def.min)
	l.bound(p+".max", c.Max, def, "max", def.max)
	if l.has(p+".min") && l.has(p+".max") && c.Min.Unit == c.Max.Unit && c.Max.Value < c.Min.Value {
		l.bad(p+".max", "expected max >= min (%s), found %s", c.Min, c.Max)
	}
	l.count(p, c, def)
	if def.minNeeds != "" && l.has(p+".min") && c.Args[def.minNeeds] == "" {
		l.bad(p+".min", "%s reads min only with args.%s; add args.%s or remove min", c.Name, def.minNeeds, def.minNeeds)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Args)) {
		ap := join(p+".args", k)
		rule, ok := def.arg(k)
		switch {
		case !ok && len(def.args) == 0:
			l.bad(ap, "unknown argument %q: %s takes no args", k, c.Name)
		case !ok:
			msg := fmt.Sprintf("unknown argument %q for %s; expected one of: %s", k, c.Name, strings.Join(def.argNames(), ", "))
			if s := suggest(k, def.argNames()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			l.bad(ap, "%s", msg)
		case !rule.ok(c.Args[k]):
			l.bad(ap, "expected %s, found %q", rule.expect, c.Args[k])
		}
	}
}

// count lints a check's count: only nic-link reads it, at least 1, with
// min. (nic-link's min without a count holds the ports of the recipe's NIC
// groups at that speed or faster, or one port where no group says.)
func (l *linter) count(p string, c Check, def checkDef) {
	switch {
	case l.has(p+".count") && !def.count:
		l.bad(p+".count", "%s reads no count; remove count", c.Name)
	case l.has(p+".count") && c.Count < 1:
		l.bad(p+".count", "expected a port count of at least 1, found %d", c.Count)
	case l.has(p+".count") && !l.has(p+".min"):
		l.bad(p+".count", "count says how many ports must be up at min: add min, e.g. 400Gbps")
	}
}

// bound lints a min or max against the check's unit: a physical check
// needs its unit written, a count or generation a plain number.
func (l *linter) bound(path string, q Quantity, def checkDef, which string, reads bool) {
	if !l.has(path) {
		return
	}
	name, u := def.spec.Name, def.spec.Unit
	switch {
	case !reads:
		l.bad(path, "%s reads %s; remove %s", name, def.describeBounds(), which)
	case u.Physical() && q.Unit == "":
		l.bad(path, "%s needs a unit for %s (%s), e.g. %s", q, name, u.Words(), u.Example(q.String()))
	case u.Physical() && q.Unit != u:
		l.bad(path, "%s is in %s; %s needs %s, e.g. %s", q, q.Unit.Words(), name, u.Words(), u.Example(leadingNumber(q.String())))
	case !u.Physical() && q.Unit != "":
		l.bad(path, "%s takes a plain number (%s), found %s", name, u.Words(), q)
	case u == UnitGeneration && (q.Value != math.Trunc(q.Value) || q.Value < 1 || q.Value > 6):
		l.bad(path, "expected a PCIe generation from 1 to 6, found %s", q)
	case u == UnitCount && q.Value != math.Trunc(q.Value):
		l.bad(path, "expected a whole number (%s), found %s", u.Words(), q)
	}
}

// leadingNumber is the number at the start of a quantity's text: 400 of 400GB/s.
func leadingNumber(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	if i <= 0 {
		return "400"
	}
	return s[:i]
}

// drivers lints the driver pins: only the keys first boot reports.
func (l *linter) drivers(d map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(d)) {
		p := join("drivers", k)
		switch {
		case !slices.Contains(DriverKeys(), k):
			msg := fmt.Sprintf("unknown driver %q; expected one of the versions first boot reports: %s", k, strings.Join(DriverKeys(), ", "))
			if s := suggest(k, DriverKeys()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			l.bad(p, "%s", msg)
		case d[k] == "":
			l.bad(p, "expected a pinned version, found an empty string")
		}
	}
}
