// Package version compares firmware version strings as vendors write them:
// "1.45.455b66-rev4", "P79 v1.45 (12/06/2017)", "iLO 5 v2.72", "2.72 Sep 04
// 2022", NVIDIA VBIOS "94.02.5C.00.03" (hexadecimal fields), "7.10.30.00",
// "ex235n.bios-1.2.1". It is a leaf package: drift and the firmware
// planner both use it, so a pin reads the same everywhere.
package version

import (
	"regexp"
	"strconv"
	"strings"
)

// Version is a parsed firmware version.
type Version struct {
	Raw    string
	Family string   // a platform or product prefix before " v1.2" ("P79", "iLO 5", "A48"), lowercased
	word   string   // the first word when it starts with a letter ("ex235n" of "ex235n.bios-1.2.1"): a product, compared whole
	tokens []string // lowercased, split at separators and digit/letter changes
	hex    bool     // every field is two hexadecimal digits (NVIDIA VBIOS)
}

var (
	parenSuffix = regexp.MustCompile(`\s*\([^()]*\)\s*$`)
	// A trailing build date: "Sep 04 2022", "04/19/2023", "2023-01-19".
	dateSuffix = regexp.MustCompile(`(?i)\s+((jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+\d{1,2},?\s+\d{4}|\d{1,2}/\d{1,2}/\d{2,4}|\d{4}-\d{2}-\d{2})$`)
	familyV    = regexp.MustCompile(`^(.*\S)\s+[vV](\d.*)$`)
	hexFields  = regexp.MustCompile(`^[0-9A-Fa-f]{2}(\.[0-9A-Fa-f]{2}){3,}$`)
	unknowns   = map[string]bool{"": true, "undefined": true, "unknown": true, "n/a": true, "na": true, "none": true, "null": true, "-": true}
)

// Parse reads s. An empty or placeholder version ("undefined", "N/A")
// parses to a Version that Known reports false for.
func Parse(s string) Version {
	v := Version{Raw: s}
	t := strings.TrimSpace(s)
	for range 2 {
		t = parenSuffix.ReplaceAllString(t, "")
		t = dateSuffix.ReplaceAllString(t, "")
	}
	t = strings.TrimSpace(t)
	if m := familyV.FindStringSubmatch(t); m != nil {
		v.Family, t = strings.ToLower(strings.Join(strings.Fields(m[1]), " ")), m[2]
	}
	if len(t) > 1 && (t[0] == 'v' || t[0] == 'V') && t[1] >= '0' && t[1] <= '9' {
		t = t[1:]
	}
	if unknowns[strings.ToLower(t)] {
		return v
	}
	v.hex = hexFields.MatchString(t)
	if v.hex {
		v.tokens = strings.Split(strings.ToLower(t), ".")
		return v
	}
	lower := strings.ToLower(t)
	if f := strings.FieldsFunc(lower, isSep); len(f) > 1 && lower[0] >= 'a' && lower[0] <= 'z' {
		v.word = f[0] // a product before the version ("ex235n.bios-1.2.1"); "C27" alone is a version
	}
	v.tokens = tokenize(lower)
	return v
}

// Known reports whether the version says anything.
func (v Version) Known() bool { return len(v.tokens) > 0 }

func isSep(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') }

// tokenize splits at separators and where digits and letters meet:
// "455b66-rev4" -> 455 b 66 rev 4.
func tokenize(s string) []string {
	var out []string
	cur := []rune{}
	kind := 0 // 1 digit, 2 letter
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	for _, r := range s {
		k := 0
		switch {
		case r >= '0' && r <= '9':
			k = 1
		case r >= 'a' && r <= 'z':
			k = 2
		}
		if k == 0 || k != kind {
			flush()
		}
		kind = k
		if k != 0 {
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

// Compare orders a and b: -1, 0 or +1, and ok false when the two cannot be
// ordered (different families "P79" and "U46", an unknown version, a
// letter where the other has a number).
func Compare(a, b string) (int, bool) {
	return Parse(a).Compare(Parse(b))
}

// Compare orders v and w (see the package function).
func (v Version) Compare(w Version) (int, bool) {
	if !v.Known() || !w.Known() {
		return 0, false
	}
	if v.Family != "" && w.Family != "" && v.Family != w.Family {
		return 0, false
	}
	if v.word != w.word && v.word != "" && w.word != "" {
		return 0, false
	}
	if v.hex && w.hex {
		return compareHex(v.tokens, w.tokens), true
	}
	n := max(len(v.tokens), len(w.tokens))
	for i := range n {
		a, b := tokenAt(v.tokens, i), tokenAt(w.tokens, i)
		c, ok := compareToken(a, b, i)
		if !ok {
			return 0, false
		}
		if c != 0 {
			return c, true
		}
	}
	return 0, true
}

// tokenAt is the i-th token, "0" past the end (1.7 is 1.7.0).
func tokenAt(t []string, i int) string {
	if i < len(t) {
		return t[i]
	}
	return "0"
}

func compareToken(a, b string, i int) (int, bool) {
	an, aNum := number(a)
	bn, bNum := number(b)
	switch {
	case aNum && bNum:
		return cmp(an, bn), true
	case aNum != bNum:
		// "1.0" against "1.0-rc1": the release after its candidates; a
		// letter against a digit elsewhere cannot be ordered.
		if a == "0" || b == "0" {
			if aNum {
				return 1, true
			}
			return -1, true
		}
		return 0, false
	case a == b:
		return 0, true
	case i == 0:
		return 0, false // a different product prefix: "ex235n" and "ex425"
	}
	return strings.Compare(a, b), true
}

func compareHex(a, b []string) int {
	for i := range max(len(a), len(b)) {
		x, _ := strconv.ParseUint(tokenAt(a, i), 16, 64)
		y, _ := strconv.ParseUint(tokenAt(b, i), 16, 64)
		if c := cmp(x, y); c != 0 {
			return c
		}
	}
	return 0
}

func number(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Equal reports whether a running version a is the pinned version b:
// the same after build dates, a "v" and a product prefix are set aside
// ("2.72 Sep 04 2022" is 2.72, "iLO 5 v2.72" is 2.72), and the same
// text where the two cannot be ordered.
func Equal(a, b string) bool {
	if strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b)) {
		return true
	}
	c, ok := Compare(a, b)
	return ok && c == 0
}
