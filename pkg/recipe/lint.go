package recipe

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// linter runs the semantic checks on one decoded recipe. Checks look at a
// field only when the file gives it (positions holds every given path), so
// a recipe that extends another is checked on what it and its base say.
type linter struct {
	diagnoser
	file      string
	pos       map[string]pos
	imagesDir string
}

func (l *linter) has(path string) bool { _, ok := l.pos[path]; return ok }

// at is the position of a path, or of its nearest given parent.
func (l *linter) at(path string) pos {
	for {
		if p, ok := l.pos[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			if p, ok := l.pos[""]; ok {
				return p
			}
			return pos{file: l.file, line: 1, col: 1}
		}
		path = path[:i]
	}
}

func (l *linter) bad(path, format string, args ...any) {
	l.errorf(l.at(path), path, format, args...)
}

func (l *linter) warn(path, format string, args ...any) {
	l.warnf(l.at(path), path, format, args...)
}

// tagChecks applies the enum, min and max tags of types.go to every field
// the file gives (the JSON Schema carries the same tags).
func (l *linter) tagChecks(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			l.tagChecks(v.Elem(), path)
		}
	case reflect.Slice:
		for i := range v.Len() {
			l.tagChecks(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		if v.Type() == typeValue || v.Type() == typeQuantity {
			return
		}
		for _, f := range fieldsOf(v.Type()) {
			p := join(path, f.key)
			fv := v.Field(f.index)
			if l.has(p) {
				l.checkTags(p, fv, v.Type().Field(f.index).Tag)
			}
			l.tagChecks(fv, p)
		}
	}
}

func (l *linter) checkTags(path string, v reflect.Value, tag reflect.StructTag) {
	if enum := tag.Get("enum"); enum != "" {
		allowed := strings.Split(enum, ",")
		if got := fmt.Sprint(v.Interface()); !slices.Contains(allowed, got) {
			if v.Kind() == reflect.String {
				got = strconv.Quote(got)
			}
			l.bad(path, "expected one of %s, found %s", strings.Join(allowed, ", "), got)
		}
	}
	var x float64
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		x = float64(v.Int())
	case reflect.Float64:
		x = v.Float()
	default:
		return
	}
	lo, hasLo := tagFloat(tag, "min")
	hi, hasHi := tagFloat(tag, "max")
	switch {
	case hasLo && hasHi && (x < lo || x > hi):
		l.bad(path, "expected %g to %g, found %v", lo, hi, v.Interface())
	case hasLo && !hasHi && x < lo && lo == 1:
		l.bad(path, "expected a positive number, found %v", v.Interface())
	case hasLo && !hasHi && x < lo:
		l.bad(path, "expected %g or more, found %v", lo, v.Interface())
	}
}

func tagFloat(tag reflect.StructTag, key string) (float64, bool) {
	s, ok := tag.Lookup(key)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	redundRE = regexp.MustCompile(`^N(\+([0-9]+|N))?$`)
)

func (l *linter) lint(r *Recipe) {
	if r == nil {
		return
	}
	l.tagChecks(reflect.ValueOf(r).Elem(), "")
	l.identity(r)
	l.hardware(&r.Hardware)
	l.firmware(r)
	l.drivers(r.Drivers)
	l.os(r)
	l.imageProvides(r)
	l.network(&r.Network)
	l.acceptance(&r.Acceptance)
	l.power(r)
}

func (l *linter) identity(r *Recipe) {
	if l.has("name") {
		base := filepath.Base(l.file)
		base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
		switch {
		case !nameRE.MatchString(r.Name):
			l.bad("name", "expected lowercase letters, digits and dashes (e.g. gpu-train-h100x8), found %q", r.Name)
		case base != r.Name:
			l.bad("name", "recipe %q must be in a file named %s.yaml, found %s", r.Name, r.Name, filepath.Base(l.file))
		}
	}
	if l.has("version") && strings.TrimSpace(r.Version) == "" {
		l.bad("version", "expected a version such as 1.0.0, found an empty string")
	}
}

func (l *linter) hardware(h *Hardware) {
	for i, g := range h.GPUs {
		p := fmt.Sprintf("hardware.gpus[%d]", i)
		if l.has(p+".model") && g.Model == "" {
			l.bad(p+".model", "expected a model substring such as H100, found an empty string")
		}
		if l.has(p+".min_vram") && g.MinVRAM <= 0 {
			l.bad(p+".min_vram", "expected a positive size, found %s", g.MinVRAM)
		}
	}
	for i, n := range h.NICs {
		if p := fmt.Sprintf("hardware.nics[%d]", i); n.Firmware != "" && n.Model == "" {
			l.bad(p+".firmware", "a per-model firmware pin needs hardware.nics[%d].model (pin NICs of every model with firmware.nic)", i)
		}
	}
	if c := h.CPU; c != nil {
		if _, err := regexp.Compile(c.Model); err != nil {
			l.bad("hardware.cpu.model", "expected a regular expression: %v", err)
		}
	}
	if m := h.Memory; m != nil {
		if l.has("hardware.memory.total") && m.Total <= 0 {
			l.bad("hardware.memory.total", "expected a positive size such as 512GiB, found %s", m.Total)
		}
	}
	if ps := h.PSUs; ps != nil {
		if l.has("hardware.psus.redundancy") && !redundRE.MatchString(ps.Redundancy) {
			l.bad("hardware.psus.redundancy", "expected N, N+1, N+2 or N+N, found %q", ps.Redundancy)
		}
		if ps.Redundancy == "N+N" && ps.Count%2 != 0 {
			l.bad("hardware.psus.count", "N+N redundancy needs an even number of PSUs, found %d", ps.Count)
		}
	}
	l.disks(h.Disks)
}

func (l *linter) disks(disks []DiskSpec) {
	var boot []string
	for i, d := range disks {
		p := fmt.Sprintf("hardware.disks[%d]", i)
		if d.Boot {
			boot = append(boot, fmt.Sprintf("disks[%d]", i))
			if d.MinSize == 0 && d.MaxSize == 0 && d.Model == "" && d.Serial == "" && d.Path == "" && d.Media == "" {
				l.bad(p, "the boot disk rule selects any disk: expected at least one of min_size, max_size, model, serial, path, media")
			}
		}
		if d.MaxSize > 0 && d.MinSize > d.MaxSize {
			l.bad(p+".max_size", "expected max_size >= min_size (%s), found %s", d.MinSize, d.MaxSize)
		}
		if l.has(p+".path") && !strings.HasPrefix(d.Path, "/dev/") {
			l.bad(p+".path", "expected a device path under /dev/, found %q", d.Path)
		}
	}
	if len(disks) > 0 && len(boot) != 1 {
		found := "none"
		if len(boot) > 1 {
			found = fmt.Sprintf("%d (%s)", len(boot), strings.Join(boot, ", "))
		}
		l.bad("hardware.disks", "expected exactly one boot disk rule (boot: true), found %s", found)
	}
}

func (l *linter) sha256(path, v string) {
	if l.has(path) && !sha256RE.MatchString(v) {
		shown := v
		if len(shown) > 72 {
			shown = shown[:72] + "..."
		}
		l.bad(path, "expected 64 lowercase hex digits, found %q (%d characters)", shown, len(v))
	}
}

// placeholder refuses an all-zero sha256 outside a template: such a pin
// names no artifact, so the machine could never boot it. A placeholder
// inherited from a base is reported at this recipe's extends.
func (l *linter) placeholder(r *Recipe, path, v string) {
	if !l.has(path) || r.IsTemplate() || !IsPlaceholderSHA256(v) {
		return
	}
	fix := "pin the artifact's digest (ingot recipe pin fills it from the content store), or mark the recipe template: true if it is only extended"
	if p := l.at(path); p.file != l.file && l.has("extends") {
		l.bad("extends", "%s inherited from %s (%s:%d) is the all-zero placeholder, and %s is not a template: %s",
			path, r.Extends, p.file, p.line, r.Name, fix)
		return
	}
	l.bad(path, "the all-zero placeholder is not a digest: %s", fix)
}

// IsPlaceholderSHA256 reports whether v is 64 zeros, the placeholder a
// template may pin until the artifact exists.
func IsPlaceholderSHA256(v string) bool { return len(v) == 64 && strings.Trim(v, "0") == "" }

func (l *linter) os(r *Recipe) {
	o := &r.OS
	img := o.Image
	l.sha256("os.image.sha256", img.SHA256)
	l.placeholder(r, "os.image.sha256", img.SHA256)
	l.placeholder(r, "os.agent.kernel.sha256", o.Agent.Kernel.SHA256)
	l.placeholder(r, "os.agent.initrd.sha256", o.Agent.Initrd.SHA256)
	if l.has("os.image.name") {
		switch {
		case !nameRE.MatchString(img.Name):
			l.bad("os.image.name", "expected a folder name in images/ (lowercase letters, digits, dashes), found %q", img.Name)
		case l.imagesDir != "":
			f := filepath.Join(l.imagesDir, img.Name, "image.yaml")
			if _, err := os.Stat(f); err != nil {
				l.bad("os.image.name", "image %q not found: expected %s", img.Name, f)
			}
		}
	}
	l.sha256("os.agent.kernel.sha256", o.Agent.Kernel.SHA256)
	l.sha256("os.agent.initrd.sha256", o.Agent.Initrd.SHA256)
}

func (l *linter) network(n *Network) {
	if n.ManagementVLAN != 0 && n.ManagementVLAN == n.WorkloadVLAN {
		l.warn("network.workload_vlan", "workload VLAN %d is the management VLAN", n.WorkloadVLAN)
	}
	if l.has("network.pool") {
		p, err := netip.ParsePrefix(n.Pool)
		switch {
		case err != nil || !p.Addr().Is4():
			l.bad("network.pool", "expected an IPv4 CIDR such as 10.20.0.0/22, found %q", n.Pool)
		case p.Masked() != p:
			l.bad("network.pool", "expected a network address, found %s (did you mean %s?)", p, p.Masked())
		}
	}
	if l.has("network.hostname") {
		if err := CheckHostnamePattern(n.Hostname); err != nil {
			l.bad("network.hostname", "%v", err)
		}
	}
}

func (l *linter) power(r *Recipe) {
	pw := r.Power
	if pw.IdleWatts > 0 && pw.LoadWatts > 0 && pw.IdleWatts > pw.LoadWatts {
		l.bad("power.idle_watts", "expected idle_watts <= load_watts (%d), found %d", pw.LoadWatts, pw.IdleWatts)
	}
	ps := r.Hardware.PSUs
	if ps == nil || pw.LoadWatts <= 0 || ps.RatedWatts <= 0 || ps.Count <= 0 {
		return
	}
	usable := ps.Count
	switch {
	case ps.Redundancy == "N+N":
		usable = ps.Count / 2
	case strings.HasPrefix(ps.Redundancy, "N+"):
		var k int
		fmt.Sscanf(ps.Redundancy, "N+%d", &k)
		usable = ps.Count - k
	}
	capacity := usable * ps.RatedWatts * (100 - pw.DeratingPct) / 100
	if pw.LoadWatts > capacity {
		l.bad("power.load_watts", "load %dW exceeds the usable PSU capacity %dW (%d of %d PSUs at %dW, %s, %d%% derating)",
			pw.LoadWatts, capacity, usable, ps.Count, ps.RatedWatts, ps.Redundancy, pw.DeratingPct)
	}
}

// HostnamePlaceholders lists the placeholders a hostname pattern may use:
// {recipe}, {rack}, {index} (with an optional width such as {index:02d}),
// {serial} and {mac} (the boot MAC without colons).
func HostnamePlaceholders() []string { return []string{"recipe", "rack", "index", "serial", "mac"} }

var placeholderRE = regexp.MustCompile(`\{([^{}]*)\}`)

// CheckHostnamePattern checks a hostname pattern such as
// h100-{rack}-{index:02d}: known placeholders, balanced braces, and
// hostname characters elsewhere.
func CheckHostnamePattern(p string) error {
	if p == "" {
		return fmt.Errorf("expected a pattern such as h100-{rack}-{index:02d}, found an empty string")
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(p, -1) {
		name, format, _ := strings.Cut(m[1], ":")
		if !slices.Contains(HostnamePlaceholders(), name) {
			return fmt.Errorf("unknown placeholder {%s}; expected one of {%s}", m[1], strings.Join(HostnamePlaceholders(), "}, {"))
		}
		if format != "" && (name != "index" || !regexp.MustCompile(`^0?[0-9]*d$`).MatchString(format)) {
			return fmt.Errorf("placeholder {%s}: only {index} takes a width, written like {index:02d}", m[1])
		}
	}
	rest := placeholderRE.ReplaceAllString(p, "x")
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("expected lowercase letters, digits, dashes, dots and {placeholders}, found %q in %q", c, p)
		}
	}
	return nil
}
