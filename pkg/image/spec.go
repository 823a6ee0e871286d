// Package image builds golden disk images from the definitions in images/:
// a raw GPT disk (ESP + root) and its zstd-compressed form, reproducibly and
// without loop devices or mounts, and keeps built images in the content
// store.
package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ingot-dev/ingot/pkg/artifact"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// FileName is the definition file in each image folder.
const FileName = "image.yaml"

// Spec is one image.yaml.
type Spec struct {
	Name     string            `yaml:"name"`
	Version  string            `yaml:"version"`
	Base     Base              `yaml:"base"`
	Packages map[string]string `yaml:"packages"`
	Files    []File            `yaml:"files"`
	// RootPrograms are host programs copied into the root partition with
	// every shared library they load (pieces only): the installed system's
	// own tools, such as the burn-in's stress-ng, fio and iperf3.
	RootPrograms []string     `yaml:"root_programs"`
	FirstBoot    []Unit       `yaml:"first_boot"`
	Boot         Boot         `yaml:"boot"`
	Partitions   Partitions   `yaml:"partitions"`
	Build        BuildOptions `yaml:"build"`
	// Arch is the Debian architecture the image boots on: amd64 (the
	// default) or arm64 (pieces only: its kernel and deb: files come from
	// Debian's arm64 packages, its ESP holds EFI/BOOT/BOOTAA64.EFI).
	Arch string `yaml:"arch"`
	// Repositories are signed apt repositories besides Debian's (a
	// debian image only): NVIDIA's CUDA repository, DOCA/OFED, a site
	// mirror. Their packages are locked like Debian's.
	Repositories []Repository `yaml:"repositories"`
	// Sources are build inputs unpacked into /usr/local/src/NAME of the
	// root for the build steps, and removed after them (a debian image
	// only): a locked Debian package's files (dpkg -x, not installed) or a
	// tarball named by sha256.
	Sources []Source `yaml:"sources"`
	// BuildSteps run in the root (chroot) after every package is
	// installed, in order, each a shell script: they compile the sources
	// against the image's own pinned toolchain.
	BuildSteps []Step `yaml:"build_steps"`

	// Dir is the image folder (set by Load); sources are relative to it.
	Dir string `yaml:"-"`
	// File is the path of the image.yaml (set by Load), for messages.
	File string `yaml:"-"`
}

// Base is what the root filesystem starts from.
type Base struct {
	// Kind is "debian" (mmdebstrap) or "pieces" (kernel package + files).
	Kind         string   `yaml:"kind"`
	Distribution string   `yaml:"distribution"`
	Release      string   `yaml:"release"`
	Components   []string `yaml:"components"`
	// Suites besides Release, e.g. bookworm-updates, bookworm-security.
	Suites  []string `yaml:"suites"`
	Variant string   `yaml:"variant"`
	// Snapshots maps a suite to an archive URL that keeps every version
	// ever published (snapshot.debian.org/archive/debian/TIMESTAMP, or a
	// site's copy): where a build fetches a locked .deb the pool lacks and
	// the mirror no longer carries. Optional: the pool is the first place.
	Snapshots map[string]string `yaml:"snapshots"`
}

// File is one file put into the root (or, for pieces, the initramfs).
type File struct {
	Path string `yaml:"path"`
	// Exactly one of Content and Source. Source is relative to the image
	// folder, host:/absolute/path for a file of the build host, or
	// deb:PACKAGE:/absolute/path for a file of a Debian package of the
	// image's architecture (downloaded with apt-get download, never
	// installed: busybox-static's /bin/busybox for an arm64 image).
	Content string `yaml:"content"`
	Source  string `yaml:"source"`
	Mode    string `yaml:"mode"`
	// SHA256 pins a source's bytes (required for an http(s) source, which
	// is fetched into the pool once): a file whose bytes differ stops the
	// build.
	SHA256 string `yaml:"sha256"`

	// fetched is where a deb: or http(s) source lies (see lockedInputs).
	fetched string
}

// Unit is a systemd unit enabled for first boot.
type Unit struct {
	Name    string `yaml:"name"`
	Content string `yaml:"content"`
}

// Boot is how the image boots.
type Boot struct {
	Cmdline string `yaml:"cmdline"`
	// BIOS is "syslinux" (legacy boot too) or "none" (UEFI only).
	BIOS string `yaml:"bios"`
	// Modules go into a pieces image's initramfs, with their dependencies.
	Modules []string `yaml:"modules"`
}

// Partitions is the GPT layout: ESP then root.
type Partitions struct {
	ESPSize  string `yaml:"esp_size"`
	RootSize string `yaml:"root_size"`
}

// BuildOptions tune the build.
type BuildOptions struct {
	SourceDateEpoch int64 `yaml:"source_date_epoch"`
	ZstdLevel       int   `yaml:"zstd_level"`
}

// Layout is the validated partition sizes in bytes.
type Layout struct {
	ESP, Root int64
}

// Load reads and validates dir/image.yaml.
func Load(dir string) (*Spec, error) {
	file := filepath.Join(dir, FileName)
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading image definition: %w", err)
	}
	s, err := Parse(file, b)
	if err != nil {
		return nil, err
	}
	s.Dir = dir
	return s, nil
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

// Parse decodes and validates an image.yaml; errors name file:line or
// file: field.
func Parse(file string, b []byte) (s *Spec, err error) {
	defer func() {
		if r := recover(); r != nil { // yaml.v3 has panicked on hostile input
			s, err = nil, fmt.Errorf("%s: malformed YAML: %v", file, r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	s = &Spec{File: file}
	if err := dec.Decode(s); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			var msgs []string
			for _, m := range te.Errors {
				msgs = append(msgs, file+":"+lineRE.ReplaceAllString(m, "$1: "))
			}
			return nil, errors.New(strings.Join(msgs, "\n"))
		}
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+~:-]*$`)
	pkgRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	archRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

func (s *Spec) validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, a...)...))
	}
	if !nameRE.MatchString(s.Name) {
		bad("name", "%q: expected lowercase letters, digits, '.', '-'", s.Name)
	}
	if !versionRE.MatchString(s.Version) {
		bad("version", "%q: expected a version such as \"1\" or \"2024.06\"", s.Version)
	}
	switch s.Arch {
	case "", "amd64":
	case "arm64":
		if s.Base.Kind != "pieces" {
			bad("arch", "arm64: only a pieces image is built for arm64 (a debian one would need a foreign-architecture mmdebstrap)")
		}
		if s.Boot.BIOS == "syslinux" {
			bad("boot.bios", "syslinux: an arm64 image boots through UEFI only (bios: none)")
		}
	default:
		bad("arch", "%q: expected amd64 or arm64", s.Arch)
	}
	switch s.Base.Kind {
	case "debian":
		if s.Base.Release == "" {
			bad("base.release", "missing: expected a Debian release such as bookworm")
		}
		if len(s.Packages) == 0 {
			bad("packages", "missing: a debian image pins its packages (name: exact version)")
		}
	case "pieces":
		if len(s.Packages) > 0 {
			bad("packages", "a pieces image installs no packages (kind: debian does)")
		}
	}
	if len(s.RootPrograms) > 0 && s.Base.Kind != "pieces" {
		bad("root_programs", "only a pieces image copies host programs (a debian image installs their packages)")
	}
	for i, p := range s.RootPrograms {
		if p == "" || strings.ContainsAny(p, " \t\n") || (strings.Contains(p, "/") && !filepath.IsAbs(p)) {
			bad(fmt.Sprintf("root_programs[%d]", i), "%q: expected a program name on the build host's PATH or an absolute path", p)
		}
	}
	switch s.Base.Kind {
	case "debian", "pieces":
	default:
		bad("base.kind", "%q: expected debian or pieces", s.Base.Kind)
	}
	for _, name := range sortedKeys(s.Packages) {
		if !pkgRE.MatchString(name) {
			bad("packages."+name, "not a Debian package name")
		}
		if !versionRE.MatchString(s.Packages[name]) {
			bad("packages."+name, "version %q: expected an exact Debian version (no ranges, no wildcards)", s.Packages[name])
		}
	}
	for i, f := range s.Files {
		field := fmt.Sprintf("files[%d]", i)
		if !strings.HasPrefix(f.Path, "/") || filepath.Clean(f.Path) != f.Path {
			bad(field+".path", "%q: expected a clean absolute path", f.Path)
		}
		if (f.Content == "") == (f.Source == "") {
			bad(field, "expected exactly one of content and source")
		}
		if pkg, path, ok := f.debSource(); ok {
			if !pkgRE.MatchString(pkg) || !strings.HasPrefix(path, "/") || filepath.Clean(path) != path {
				bad(field+".source", "%q: expected deb:PACKAGE:/ABSOLUTE/PATH", f.Source)
			}
			if s.Base.Kind != "pieces" {
				bad(field+".source", "%q: only a pieces image takes files from packages (a debian image installs them)", f.Source)
			}
		} else if isURL(f.Source) {
			if f.SHA256 == "" {
				bad(field+".sha256", "missing: a file fetched from %s is pinned by its sha256", f.Source)
			}
		} else if f.Source != "" && !strings.HasPrefix(f.Source, "host:/") && !insideImages(f.Source) {
			bad(field+".source", "%q: expected a path inside the image folder, in a sibling image's folder (../lab/init), host:/ABSOLUTE, deb:PACKAGE:/ABSOLUTE or an http(s) URL with sha256", f.Source)
		}
		if f.SHA256 != "" && (!artifact.ValidSHA256(f.SHA256) || f.Content != "") {
			bad(field+".sha256", "%q: expected 64 lowercase hex digits, with a source", f.SHA256)
		}
		if _, err := f.Perm(); err != nil {
			bad(field+".mode", "%v", err)
		}
	}
	for i, u := range s.FirstBoot {
		if !strings.HasSuffix(u.Name, ".service") || strings.Contains(u.Name, "/") {
			bad(fmt.Sprintf("first_boot[%d].name", i), "%q: expected a systemd unit name ending in .service", u.Name)
		}
		if u.Content == "" {
			bad(fmt.Sprintf("first_boot[%d].content", i), "missing")
		}
	}
	switch s.Boot.BIOS {
	case "", "none", "syslinux":
	default:
		bad("boot.bios", "%q: expected syslinux or none", s.Boot.BIOS)
	}
	if _, err := s.Layout(); err != nil {
		errs = append(errs, err)
	}
	if s.Build.ZstdLevel < 0 || s.Build.ZstdLevel > 22 {
		bad("build.zstd_level", "%d: expected 1..22 (0 means 3)", s.Build.ZstdLevel)
	}
	if s.Build.SourceDateEpoch < 0 {
		bad("build.source_date_epoch", "%d: expected seconds since 1970", s.Build.SourceDateEpoch)
	}
	s.validateInputs(bad)
	return errors.Join(errs...)
}

// insideImages reports whether a source path relative to an image folder
// stays inside the images/ folder that holds it: a file of the image or of
// a sibling image (images share their init this way).
func insideImages(src string) bool {
	if filepath.IsAbs(src) {
		return false
	}
	c := filepath.Clean(src)
	if rest, ok := strings.CutPrefix(c, "../"); ok {
		return rest != "" && !strings.HasPrefix(rest, "..") && strings.Contains(rest, "/")
	}
	return c != ".." && !strings.HasPrefix(c, "../")
}

// Layout returns the partition sizes, each a whole number of MiB.
func (s *Spec) Layout() (Layout, error) {
	var l Layout
	for _, p := range []struct {
		field, v string
		min      int64
		out      *int64
	}{
		{"partitions.esp_size", s.Partitions.ESPSize, 32 << 20, &l.ESP},
		{"partitions.root_size", s.Partitions.RootSize, 4 << 20, &l.Root},
	} {
		sz, err := recipe.ParseSize(p.v)
		if err != nil {
			return l, fmt.Errorf("%s: %w", p.field, err)
		}
		if sz.Bytes() < p.min || sz.Bytes()%(1<<20) != 0 {
			return l, fmt.Errorf("%s: %s: expected a whole number of MiB, at least %d MiB", p.field, p.v, p.min>>20)
		}
		*p.out = sz.Bytes()
	}
	return l, nil
}

// Perm parses Mode ("0644" by default).
func (f File) Perm() (os.FileMode, error) {
	if f.Mode == "" {
		return 0o644, nil
	}
	v, err := strconv.ParseUint(f.Mode, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, fmt.Errorf("%q: expected an octal mode such as \"0644\"", f.Mode)
	}
	return os.FileMode(v), nil
}

// debSource splits a deb:PACKAGE:/PATH source; ok false for any other.
func (f File) debSource() (pkg, path string, ok bool) {
	rest, ok := strings.CutPrefix(f.Source, "deb:")
	if !ok {
		return "", "", false
	}
	pkg, path, _ = strings.Cut(rest, ":")
	return pkg, path, true
}

// Read returns the file's content. A deb: source must have been fetched
// (Build and InputsKey do that).
func (f File) Read(dir string) ([]byte, error) {
	if f.Content != "" {
		return []byte(f.Content), nil
	}
	p := filepath.Join(dir, f.Source)
	if h, ok := strings.CutPrefix(f.Source, "host:"); ok {
		p = h
	}
	if _, _, ok := f.debSource(); ok || isURL(f.Source) {
		if f.fetched == "" {
			return nil, fmt.Errorf("file %s: %s was not fetched", f.Path, f.Source)
		}
		p = f.fetched
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", f.Path, err)
	}
	if f.SHA256 != "" {
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
			return nil, fmt.Errorf("file %s: %s has sha256 %x, the spec pins %s: refused", f.Path, f.Source, sum, f.SHA256)
		}
	}
	return b, nil
}

// DebArch is the image's Debian architecture ("amd64" when not set).
func (s *Spec) DebArch() string {
	if s.Arch == "" {
		return "amd64"
	}
	return s.Arch
}

// RemovableBootFile is the UKI's name in the ESP's EFI/BOOT: the path
// UEFI firmware boots without a boot entry (UEFI spec, "Removable Media
// Boot Behavior"), BOOTX64.EFI or BOOTAA64.EFI.
func (s *Spec) RemovableBootFile() string {
	if s.Arch == "arm64" {
		return "BOOTAA64.EFI"
	}
	return "BOOTX64.EFI"
}

// Epoch is the build's SOURCE_DATE_EPOCH.
func (s *Spec) Epoch() int64 { return s.Build.SourceDateEpoch }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
