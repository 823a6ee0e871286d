// Package bootfiles serves read-only files (iPXE binaries) from a list of
// trusted directories to untrusted network clients, for both TFTP and HTTP.
//
// A requested name first passes CleanPath, a pure function: relative, no
// "..", no NUL or control bytes. It is then looked up in each directory in
// order (an override directory first, the distribution's /usr/lib/ipxe
// last). Symlinks are followed, but the file actually opened must lie inside
// the directory it was found in or inside one of the AllowTargets
// directories; this is checked on the opened descriptor itself
// (/proc/self/fd), so swapping a path component between check and open
// cannot escape. Only regular files are served: FIFOs, devices and sockets
// are refused before they are opened.
//
// AllowTargets exists because Debian's ipxe package installs
// /usr/lib/ipxe/ipxe.efi as a symlink to /boot/ipxe.efi. An entry is a file
// (symlinks may point at exactly it: the default names Debian's two) or a
// folder the operator chose (symlinks may point anywhere below it); never
// a whole system folder by default, so one stray symlink cannot serve all
// of /boot.
package bootfiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors. Test with errors.Is.
var (
	ErrBadPath  = errors.New("invalid path")
	ErrNotFound = errors.New("file not found")
	ErrEscape   = errors.New("path escapes the boot directory")
	ErrNotFile  = errors.New("not a regular file")
)

// MaxPath bounds a requested name (TFTP puts it in one 512-byte packet).
const MaxPath = 255

// CleanPath validates an untrusted requested name and returns it as a clean
// slash-separated relative path. Backslashes count as separators (some PXE
// firmware sends DOS-style names). It refuses absolute paths, any ".."
// element, empty names, NUL and control bytes.
func CleanPath(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty file name: %w", ErrBadPath)
	}
	if len(name) > MaxPath {
		return "", fmt.Errorf("file name of %d bytes, expected at most %d: %w", len(name), MaxPath, ErrBadPath)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("file name %q has control byte 0x%02x: %w", name, c, ErrBadPath)
		}
	}
	n := strings.ReplaceAll(name, `\`, "/")
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("file name %q is absolute, expected a path relative to the boot directory: %w", name, ErrBadPath)
	}
	var parts []string
	for _, p := range strings.Split(n, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", fmt.Errorf("file name %q contains '..': %w", name, ErrBadPath)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("file name %q names the directory itself: %w", name, ErrBadPath)
	}
	return strings.Join(parts, "/"), nil
}

// Dirs is an ordered list of directories to serve from.
type Dirs struct {
	roots  []string          // resolved (EvalSymlinks) absolute roots
	allow  []string          // resolved extra directories symlinks may point into
	files  []string          // resolved files symlinks may point at
	config []string          // as configured, for messages
	pins   map[string]string // clean name -> sha256 (Pin)
}

// New resolves the directories. Missing directories are skipped (an
// override directory need not exist), but at least one must exist.
func New(dirs []string, allowTargets []string) (*Dirs, error) {
	d := &Dirs{config: dirs}
	for _, dir := range dirs {
		r, err := resolveDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d.roots = append(d.roots, r)
	}
	if len(d.roots) == 0 {
		return nil, fmt.Errorf("boot files: none of the directories %v exists", dirs)
	}
	for _, t := range allowTargets {
		r, err := filepath.EvalSymlinks(t)
		if err != nil {
			continue // absent: nothing links there
		}
		if fi, err := os.Stat(r); err == nil && fi.IsDir() {
			d.allow = append(d.allow, r)
		} else if err == nil && fi.Mode().IsRegular() {
			d.files = append(d.files, r)
		}
	}
	return d, nil
}

func resolveDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("boot directory %s: %w", dir, err)
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("boot directory %s: %w", dir, err)
	}
	fi, err := os.Stat(r)
	if err != nil {
		return "", fmt.Errorf("boot directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("boot directory %s: not a directory", dir)
	}
	return r, nil
}

// Roots returns the resolved directories served, in lookup order.
func (d *Dirs) Roots() []string { return append([]string(nil), d.roots...) }

// Open validates name and opens it from the first directory that has it.
// The returned file is a regular file inside an allowed directory.
func (d *Dirs) Open(name string) (*os.File, error) {
	rel, err := CleanPath(name)
	if err != nil {
		return nil, err
	}
	for _, root := range d.roots {
		f, err := d.openIn(root, rel)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err == nil {
			if err = d.checkPin(rel, f); err != nil {
				f.Close()
				return nil, err
			}
		}
		return f, err
	}
	return nil, fmt.Errorf("%s: %w", rel, ErrNotFound)
}

func (d *Dirs) openIn(root, rel string) (*os.File, error) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, ErrNotFound)
	}
	if !d.allowed(root, resolved) {
		return nil, fmt.Errorf("%s resolves to %s: %w", rel, resolved, ErrEscape)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, ErrNotFound)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is a %s: %w", rel, fi.Mode().Type(), ErrNotFile)
	}
	// O_NOFOLLOW: the last element was resolved above; if it was swapped
	// for a symlink since, refuse. O_NONBLOCK: never hang on a FIFO swapped in.
	fd, err := unix.Open(resolved, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", rel, ErrNotFound)
	}
	f := os.NewFile(uintptr(fd), resolved)
	if err := d.checkOpened(root, rel, f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkOpened verifies what was actually opened: a regular file whose real
// path (from the kernel, not from our earlier resolution) is allowed.
func (d *Dirs) checkOpened(root, rel string, f *os.File) error {
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return fmt.Errorf("checking %s: %w", rel, err)
	}
	if !d.allowed(root, real) {
		return fmt.Errorf("%s was swapped to %s: %w", rel, real, ErrEscape)
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("checking %s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is a %s: %w", rel, fi.Mode().Type(), ErrNotFile)
	}
	return nil
}

func (d *Dirs) allowed(root, p string) bool {
	if within(root, p) {
		return true
	}
	for _, a := range d.allow {
		if within(a, p) {
			return true
		}
	}
	return slices.Contains(d.files, p)
}

// within reports whether p lies strictly below dir.
func within(dir, p string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
