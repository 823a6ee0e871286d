package recipe

import (
	"fmt"
	"strconv"
	"strings"
)

// HostnameVars are the machine facts a hostname pattern is rendered from.
type HostnameVars struct {
	Recipe string
	Rack   string
	Index  int // the machine's index in its rack, given at enrolment
	Serial string
	MAC    string // the boot MAC, any form
}

// RenderHostname fills a network.hostname pattern (see
// CheckHostnamePattern) from a machine's facts. A placeholder whose fact
// the machine lacks is an error naming it, so no two machines end up with
// the same name by accident; the result is checked as a hostname.
func RenderHostname(pattern string, v HostnameVars) (string, error) {
	if err := CheckHostnamePattern(pattern); err != nil {
		return "", err
	}
	var bad error
	out := placeholderRE.ReplaceAllStringFunc(pattern, func(m string) string {
		name, format, _ := strings.Cut(m[1:len(m)-1], ":")
		val := ""
		switch name {
		case "recipe":
			val = v.Recipe
		case "rack":
			val = v.Rack
		case "serial":
			val = v.Serial
		case "mac":
			val = strings.NewReplacer(":", "", "-", "").Replace(v.MAC)
		case "index":
			width, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(format, "0"), "d"))
			val = fmt.Sprintf("%0*d", width, v.Index)
		}
		if val == "" && bad == nil {
			bad = fmt.Errorf("hostname pattern %q needs {%s}, which the machine does not have (set it at enrolment)", pattern, name)
		}
		return strings.ToLower(val)
	})
	if bad != nil {
		return "", bad
	}
	if len(out) > 63 || strings.HasPrefix(out, "-") || strings.HasSuffix(out, "-") {
		return "", fmt.Errorf("hostname %q from pattern %q: expected 1-63 characters, not starting or ending with '-'", out, pattern)
	}
	for _, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return "", fmt.Errorf("hostname %q from pattern %q: %q is not a hostname character", out, pattern, c)
		}
	}
	return out, nil
}
