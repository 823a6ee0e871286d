package image

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// readStanzas calls fn with each stanza of a deb822 file (apt's Packages
// index, dpkg's status): its single-line fields by name (continuation
// lines, which only multi-line fields have, are skipped). Input is
// untrusted: a line over 1 MiB is an error, never a panic.
func readStanzas(r io.Reader, fn func(map[string]string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	st := map[string]string{}
	flush := func() {
		if len(st) > 0 {
			fn(st)
			st = map[string]string{}
		}
	}
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t' || line[0] == '#':
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return fmt.Errorf("line %d: %q is no field (expected Name: value)", n, truncate(line, 60))
			}
			st[k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	flush()
	return nil
}

// installedPackages reads dpkg's status file: every package whose status
// is "install ok installed", as name=version:arch keys.
func installedPackages(r io.Reader) (map[string]Locked, error) {
	out := map[string]Locked{}
	err := readStanzas(r, func(st map[string]string) {
		if st["Status"] == "install ok installed" {
			p := Locked{Name: st["Package"], Version: st["Version"], Arch: st["Architecture"]}
			out[p.Key()] = p
		}
	})
	return out, err
}
