package image

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/artifact"
)

// LockFile is the lock's name in each image folder.
const LockFile = "packages.lock"

// Locked is one .deb of a lock: exactly the file that goes into the image.
type Locked struct {
	Name, Version, Arch string
	SHA256              string
	Size                int64
	// Origin is where it was resolved: "debian:SUITE" (the suite's mirror
	// in the build host's apt sources, or the spec's snapshot for it),
	// "repo:NAME" (a repositories: entry), or "host" (the build host's
	// apt, for a pieces image's kernel and deb: files).
	Origin string
	// Filename is its path below the origin's URL (pool/main/...), "-"
	// for the host's apt.
	Filename string
}

// Key names a package at one version and architecture.
func (l Locked) Key() string { return l.Name + "=" + l.Version + ":" + l.Arch }

// Lock is an image's packages.lock: every .deb that goes into it, and the
// digest of the spec's inputs it was resolved from.
type Lock struct {
	// Inputs is LockInputs of the spec when the lock was written: a build
	// refuses a lock of other packages, sources or repositories.
	Inputs   string
	Packages []Locked
}

// Find returns the locked package name of arch ("" matches any).
func (l *Lock) Find(name, arch string) (Locked, bool) {
	for _, p := range l.Packages {
		if p.Name == name && (arch == "" || p.Arch == arch || p.Arch == "all") {
			return p, true
		}
	}
	return Locked{}, false
}

// Format renders the lock: a comment header, the inputs line, then one
// line per package sorted by name and architecture.
func (l *Lock) Format(image string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# packages.lock of image %s: every .deb that goes into it, written by\n", image)
	b.WriteString("# `ingot image lock` from the apt sources in force and checked by every build\n")
	b.WriteString("# (a package not listed here, or whose sha256 differs, stops it). Do not edit.\n")
	b.WriteString("# deb NAME VERSION ARCH SHA256 SIZE ORIGIN FILENAME\n")
	fmt.Fprintf(&b, "inputs %s\n", l.Inputs)
	pk := append([]Locked(nil), l.Packages...)
	sortLocked(pk)
	for _, p := range pk {
		fmt.Fprintf(&b, "deb %s %s %s %s %d %s %s\n", p.Name, p.Version, p.Arch, p.SHA256, p.Size, p.Origin, p.Filename)
	}
	return b.Bytes()
}

func sortLocked(pk []Locked) {
	sort.Slice(pk, func(i, j int) bool {
		if pk[i].Name != pk[j].Name {
			return pk[i].Name < pk[j].Name
		}
		return pk[i].Arch < pk[j].Arch
	})
}

// ParseLock reads a packages.lock; errors name file:line and what was
// expected there.
func ParseLock(file string, b []byte) (*Lock, error) {
	l := &Lock{}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case f[0] == "inputs" && len(f) == 2 && l.Inputs == "":
			if !strings.HasPrefix(f[1], "sha256:") || !artifact.ValidSHA256(strings.TrimPrefix(f[1], "sha256:")) {
				return nil, fmt.Errorf("%s:%d: inputs %q: expected sha256:64 hex digits", file, n, f[1])
			}
			l.Inputs = f[1]
		case f[0] == "deb":
			p, err := parseLocked(f)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, n, err)
			}
			k := p.Name + ":" + p.Arch
			if prev, ok := seen[k]; ok {
				return nil, fmt.Errorf("%s:%d: %s is locked twice (first on line %d): one version per package", file, n, k, prev)
			}
			seen[k] = n
			l.Packages = append(l.Packages, p)
		default:
			return nil, fmt.Errorf("%s:%d: expected \"inputs sha256:...\" once or \"deb NAME VERSION ARCH SHA256 SIZE ORIGIN FILENAME\", found %q", file, n, truncate(line, 80))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if l.Inputs == "" {
		return nil, fmt.Errorf("%s: no inputs line: not a lock written by ingot image lock", file)
	}
	return l, nil
}

func parseLocked(f []string) (Locked, error) {
	if len(f) != 8 {
		return Locked{}, fmt.Errorf("deb line with %d fields, expected 8: deb NAME VERSION ARCH SHA256 SIZE ORIGIN FILENAME", len(f))
	}
	p := Locked{Name: f[1], Version: f[2], Arch: f[3], SHA256: f[4], Origin: f[6], Filename: f[7]}
	var errs []error
	if !pkgRE.MatchString(p.Name) {
		errs = append(errs, fmt.Errorf("package name %q is not a Debian package name", p.Name))
	}
	if !versionRE.MatchString(p.Version) {
		errs = append(errs, fmt.Errorf("%s: version %q is not a Debian version", p.Name, p.Version))
	}
	if !archRE.MatchString(p.Arch) {
		errs = append(errs, fmt.Errorf("%s: architecture %q: expected amd64, arm64, all, ...", p.Name, p.Arch))
	}
	if !artifact.ValidSHA256(p.SHA256) {
		errs = append(errs, fmt.Errorf("%s: sha256 %q: expected 64 lowercase hex digits", p.Name, p.SHA256))
	}
	size, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil || size <= 0 {
		errs = append(errs, fmt.Errorf("%s: size %q: expected a positive number of bytes", p.Name, f[5]))
	}
	p.Size = size
	if !validOrigin(p.Origin) {
		errs = append(errs, fmt.Errorf("%s: origin %q: expected debian:SUITE, repo:NAME or host", p.Name, p.Origin))
	}
	if p.Filename != "-" && (strings.HasPrefix(p.Filename, "/") || strings.Contains(p.Filename, "..") || !strings.HasSuffix(p.Filename, ".deb")) {
		errs = append(errs, fmt.Errorf("%s: filename %q: expected a relative path ending in .deb, or -", p.Name, p.Filename))
	}
	return p, errors.Join(errs...)
}

func validOrigin(o string) bool {
	if o == "host" {
		return true
	}
	kind, name, ok := strings.Cut(o, ":")
	return ok && (kind == "debian" || kind == "repo") && nameRE.MatchString(name)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// LoadLock reads the lock of the image in s.Dir. A missing lock is an error
// that says how to write one.
func LoadLock(s *Spec) (*Lock, error) {
	file := filepath.Join(s.Dir, LockFile)
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("image %s has no %s: every .deb of an image is locked; run `ingot image lock %s`: %w", s.Name, file, s.Dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the lock: %w", err)
	}
	return ParseLock(file, b)
}

// LockInputs digests what a lock is resolved from: the base (release,
// suites, components, variant, architecture), the pinned packages, the
// repositories and the packages that deb: files and sources name. Files,
// first-boot units and build steps are not part of it: changing them needs
// no new lock.
func LockInputs(s *Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ingot-lock-1\nkind %s\narch %s\nrelease %s\nsuites %q\ncomponents %q\nvariant %s\n",
		s.Base.Kind, s.DebArch(), s.Base.Release, s.Base.Suites, s.Base.Components, s.Base.Variant)
	for _, n := range sortedKeys(s.Packages) {
		fmt.Fprintf(&b, "package %s=%s\n", n, s.Packages[n])
	}
	for _, r := range s.Repositories {
		fmt.Fprintf(&b, "repository %s %s %q %q %s\n", r.Name, r.URL, r.Suites, r.Components, r.fingerprint())
	}
	for _, f := range s.Files {
		if pkg, _, ok := f.debSource(); ok {
			fmt.Fprintf(&b, "file-deb %s\n", pkg)
		}
	}
	for _, src := range s.Sources {
		if src.Deb != "" {
			fmt.Fprintf(&b, "source-deb %s=%s\n", src.Deb, src.Version)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CheckLock says why l cannot build s, naming the first package or input
// that is not locked: a pinned package absent or at another version, a
// deb: file's or source's package absent, or a lock of other inputs.
func CheckLock(s *Spec, l *Lock) error {
	file := filepath.Join(s.Dir, LockFile)
	relock := fmt.Sprintf("run `ingot image lock %s` and review the diff", s.Dir)
	var errs []error
	for _, n := range sortedKeys(s.Packages) {
		p, ok := l.Find(n, s.DebArch())
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("package %s=%s is not in %s", n, s.Packages[n], file))
		case p.Version != s.Packages[n]:
			errs = append(errs, fmt.Errorf("package %s is pinned to %s but %s locks %s", n, s.Packages[n], file, p.Version))
		}
	}
	for _, f := range s.Files {
		if pkg, _, ok := f.debSource(); ok {
			if _, ok := l.Find(pkg, s.DebArch()); !ok {
				errs = append(errs, fmt.Errorf("file %s: package %s is not in %s", f.Path, pkg, file))
			}
		}
	}
	if _, ok := l.Find(stubPackage, s.DebArch()); !ok {
		errs = append(errs, fmt.Errorf("%s:%s (the EFI stub of the image's UKI) is not in %s", stubPackage, s.DebArch(), file))
	}
	for _, src := range s.Sources {
		if src.Deb == "" {
			continue
		}
		if p, ok := l.Find(src.Deb, ""); !ok || p.Version != src.Version {
			errs = append(errs, fmt.Errorf("source %s: package %s=%s is not in %s", src.Name, src.Deb, src.Version, file))
		}
	}
	if len(errs) == 0 && l.Inputs != LockInputs(s) {
		errs = append(errs, fmt.Errorf("%s was written for other inputs (release, suites, components, variant, packages or repositories changed since)", file))
	}
	if len(errs) > 0 {
		return fmt.Errorf("image %s: %w (%s)", s.Name, errors.Join(errs...), relock)
	}
	return nil
}
