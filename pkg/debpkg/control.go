package debpkg

import (
	"fmt"
	"regexp"
	"strings"
)

// Control is the package's control file (deb-control(5)).
type Control struct {
	Package, Version, Architecture, Maintainer string
	Section, Priority, Homepage                string
	Depends, Recommends, Suggests              []string
	// Description is the synopsis on its first line, then the extended
	// description; a blank line separates paragraphs.
	Description string
}

var (
	packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	// deb-version(7): [epoch:]upstream[-revision], upstream starting with a digit.
	debVersion = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
)

func (c Control) check() error {
	switch {
	case !packageName.MatchString(c.Package):
		return fmt.Errorf("control: Package %q: expected lower case letters, digits, + - . (deb-control(5))", c.Package)
	case !debVersion.MatchString(c.Version):
		return fmt.Errorf("control: Version %q: expected [epoch:]upstream[-revision] starting with a digit (deb-version(7))", c.Version)
	case c.Architecture == "" || c.Maintainer == "":
		return fmt.Errorf("control: Architecture and Maintainer are required")
	case strings.TrimSpace(c.Description) == "":
		return fmt.Errorf("control: Description is required")
	}
	return nil
}

// render writes the fields in the order dpkg-gencontrol does.
func (c Control) render(installedKiB int64) []byte {
	var b strings.Builder
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%s: %s\n", name, value)
		}
	}
	field("Package", c.Package)
	field("Version", c.Version)
	field("Architecture", c.Architecture)
	field("Maintainer", c.Maintainer)
	field("Installed-Size", fmt.Sprint(installedKiB))
	field("Depends", strings.Join(c.Depends, ", "))
	field("Recommends", strings.Join(c.Recommends, ", "))
	field("Suggests", strings.Join(c.Suggests, ", "))
	field("Section", c.Section)
	field("Priority", c.Priority)
	field("Homepage", c.Homepage)
	synopsis, long, _ := strings.Cut(strings.TrimSpace(c.Description), "\n")
	field("Description", synopsis)
	for _, l := range strings.Split(strings.TrimSpace(long), "\n") {
		if l = strings.TrimRight(l, " "); l == "" {
			l = "."
		}
		if long != "" {
			b.WriteString(" " + l + "\n")
		}
	}
	return []byte(b.String())
}
