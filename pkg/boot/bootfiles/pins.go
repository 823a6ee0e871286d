package bootfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// ErrChanged says a pinned first-stage file's bytes are not the pinned
// ones. Test with errors.Is.
var ErrChanged = errors.New("first-stage file changed")

// DebianIPXEPins are the sha256s of the iPXE first stages of Debian 12's
// ipxe package (1.0.0+git-20190125.36a4c85-5.1), under the names ingot's
// DHCP hands out (undionly.kpxe, snponly.efi) and its HTTP boot serves
// (ipxe.efi, ipxe.lkrn). A new package (or a file put in the boot
// directory) has other bytes: configure its pins.
func DebianIPXEPins() map[string]string {
	return map[string]string{
		"undionly.kpxe": "f09cfbe9bbd39c3f5eb9cdf7386b520a4f5858bbc4438960c5b870c7a8930a7f",
		"snponly.efi":   "18fc84b69172b9f7d1e6b5274c81121dde429fdacfdc984747f687cfb4f8090b",
		"ipxe.efi":      "67c7f1f8e062968209ca055283ca782f21faf6a18f55dd19848601bbaf8ed7aa",
		"ipxe.lkrn":     "b00bc0a320b0943c1de39a05a4c5e36ca51a37a6dd9787a50c79d5516040cd3c",
	}
}

// Pin makes d refuse to hand out a pinned file whose bytes differ from
// its pin (name as clients ask for it -> sha256 hex), and checks every
// pinned file now: the error names each changed file with the digest it
// has and the one pinned. A pinned name that is in no directory is not
// an error (it is not served either); Missing lists them.
func (d *Dirs) Pin(pins map[string]string) error {
	d.pins = map[string]string{}
	for name, sum := range pins {
		rel, err := CleanPath(name)
		if err != nil {
			return fmt.Errorf("pin %q: %w", name, err)
		}
		if len(sum) != 64 || strings.Trim(strings.ToLower(sum), "0123456789abcdef") != "" {
			return fmt.Errorf("pin %s: %q is not a sha256 (64 hex digits)", name, sum)
		}
		d.pins[rel] = strings.ToLower(sum)
	}
	var errs []error
	for _, name := range d.pinned() {
		f, err := d.Open(name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.Close()
	}
	return errors.Join(errs...)
}

// Missing lists the pinned names no directory has.
func (d *Dirs) Missing() []string {
	var out []string
	for _, name := range d.pinned() {
		if f, err := d.Open(name); err == nil {
			f.Close()
		} else if errors.Is(err, ErrNotFound) {
			out = append(out, name)
		}
	}
	return out
}

func (d *Dirs) pinned() []string {
	names := make([]string, 0, len(d.pins))
	for n := range d.pins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkPin hashes the opened file when rel is pinned and rewinds it: the
// bytes served are the bytes checked (same descriptor).
func (d *Dirs) checkPin(rel string, f *os.File) error {
	want, ok := d.pins[rel]
	if !ok {
		return nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("checking %s: %w", rel, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("checking %s: %w", rel, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s (%s) has sha256 %s, pinned %s: refusing to hand out a first stage whose bytes changed: %w", rel, f.Name(), got, want, ErrChanged)
	}
	return nil
}
