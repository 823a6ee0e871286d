package debpkg

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

var describe = regexp.MustCompile(`^v?([0-9][0-9A-Za-z.]*)(?:-([0-9]+)-g([0-9a-f]+))?$`)

// Version turns `git describe --tags --always --dirty` into a Debian
// version that sorts as releases do:
//
//	v1.2.0                 -> 1.2.0
//	v1.2.0-5-gabc1234      -> 1.2.0+git20261202.5.abc1234   (after 1.2.0)
//	abc1234 (no tag)       -> 0.0~git20261202.abc1234       (before any release)
//	... -dirty             -> ...+dirty
//
// commit is the commit's time (the date orders untagged builds).
func Version(desc string, commit time.Time) (string, error) {
	d, dirty := strings.CutSuffix(strings.TrimSpace(desc), "-dirty")
	date := commit.UTC().Format("20060102")
	var v string
	if m := describe.FindStringSubmatch(d); m != nil && (strings.HasPrefix(d, "v") || m[2] != "" || strings.Contains(m[1], ".")) {
		v = m[1]
		if m[2] != "" {
			v = fmt.Sprintf("%s+git%s.%s.%s", m[1], date, m[2], m[3])
		}
	} else if regexp.MustCompile(`^[0-9a-f]{4,40}$`).MatchString(d) {
		v = fmt.Sprintf("0.0~git%s.%s", date, d)
	} else {
		return "", fmt.Errorf("version %q: expected git describe's TAG, TAG-N-gHASH or HASH (tags vX.Y.Z)", desc)
	}
	if dirty {
		v += "+dirty"
	}
	if !debVersion.MatchString(v) || strings.Contains(v, "-") {
		return "", fmt.Errorf("version %q gives %q: not a native Debian version", desc, v)
	}
	return v, nil
}
