package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ingot-dev/ingot/pkg/artifact"
)

// Repository is a signed apt repository besides Debian's mirror.
type Repository struct {
	// Name identifies it in the lock (origin repo:NAME) and in messages.
	Name string `yaml:"name"`
	// URL is the repository's root (the deb line's URI).
	URL string `yaml:"url"`
	// Suites are its suites; a flat repository has one suite ending in
	// "/" (NVIDIA's CUDA repository: "/") and no components.
	Suites     []string `yaml:"suites"`
	Components []string `yaml:"components"`
	// Key is the file of its signing key (OpenPGP, binary or armored): a
	// path in the image folder or host:/ABSOLUTE (a keyring the site
	// installs, such as NVIDIA's cuda-keyring package's).
	Key string `yaml:"key"`
	// Fingerprint is the key's primary fingerprint (40 hex digits, spaces
	// allowed): a key file holding any other key is refused, and apt
	// refuses a Release file the key did not sign.
	Fingerprint string `yaml:"fingerprint"`
}

// Source is a build input of the build steps, unpacked into
// /usr/local/src/NAME: exactly one of Deb (with Version: a Debian
// package's files, locked like every package) and URL or Path (a
// tarball, with SHA256).
type Source struct {
	Name    string `yaml:"name"`
	Deb     string `yaml:"deb"`
	Version string `yaml:"version"`
	URL     string `yaml:"url"`
	Path    string `yaml:"path"`
	SHA256  string `yaml:"sha256"`
}

// Step is one build step: a shell script run with /bin/sh -eu in the
// root (chroot), from a file of the image folder (Script) or inline (Run).
type Step struct {
	Name   string `yaml:"name"`
	Script string `yaml:"script"`
	Run    string `yaml:"run"`
	// Installs are the files the step must leave in the root (absolute
	// paths): the build fails without them, and recipe lint reads them to
	// know which tools the image has.
	Installs []string `yaml:"installs"`
}

var fprRE = regexp.MustCompile(`^[0-9A-F]{40}$`)

func (r Repository) fingerprint() string {
	return strings.ToUpper(strings.ReplaceAll(r.Fingerprint, " ", ""))
}

// flat reports whether the repository is a flat one (suite "DIR/").
func (r Repository) flat() bool { return len(r.Suites) == 1 && strings.HasSuffix(r.Suites[0], "/") }

func isURL(s string) bool { return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") }

// validateInputs checks repositories, sources and build steps.
func (s *Spec) validateInputs(bad func(field, format string, a ...any)) {
	debianOnly := func(field string, n int) {
		if n > 0 && s.Base.Kind != "debian" {
			bad(field, "only a debian image has %s (a pieces image installs no packages)", field)
		}
	}
	debianOnly("repositories", len(s.Repositories))
	debianOnly("sources", len(s.Sources))
	debianOnly("build_steps", len(s.BuildSteps))
	names := map[string]bool{}
	for i, r := range s.Repositories {
		field := fmt.Sprintf("repositories[%d]", i)
		if !nameRE.MatchString(r.Name) || names[r.Name] {
			bad(field+".name", "%q: expected a unique name (lowercase letters, digits, '.', '-')", r.Name)
		}
		names[r.Name] = true
		if !isURL(r.URL) && !strings.HasPrefix(r.URL, "file:/") {
			bad(field+".url", "%q: expected an http(s):// or file:/ URL", r.URL)
		}
		switch {
		case len(r.Suites) == 0:
			bad(field+".suites", "missing: the repository's suites (\"/\" for a flat repository)")
		case r.flat() && len(r.Components) > 0:
			bad(field+".components", "a flat repository (suite %q) has no components", r.Suites[0])
		case !r.flat() && len(r.Components) == 0:
			bad(field+".components", "missing: expected the components to use, e.g. [main]")
		}
		if r.Key == "" || (!strings.HasPrefix(r.Key, "host:/") && !insideImages(r.Key)) {
			bad(field+".key", "%q: expected the signing key's file, in the image folder or host:/ABSOLUTE", r.Key)
		}
		if !fprRE.MatchString(r.fingerprint()) {
			bad(field+".fingerprint", "%q: expected the key's 40-hex-digit fingerprint", r.Fingerprint)
		}
	}
	srcs := map[string]bool{}
	for i, src := range s.Sources {
		field := fmt.Sprintf("sources[%d]", i)
		if !nameRE.MatchString(src.Name) || srcs[src.Name] {
			bad(field+".name", "%q: expected a unique name (lowercase letters, digits, '.', '-')", src.Name)
		}
		srcs[src.Name] = true
		n := 0
		for _, v := range []string{src.Deb, src.URL, src.Path} {
			if v != "" {
				n++
			}
		}
		switch {
		case n != 1:
			bad(field, "expected exactly one of deb, url and path")
		case src.Deb != "":
			if !pkgRE.MatchString(src.Deb) || !versionRE.MatchString(src.Version) || src.SHA256 != "" {
				bad(field, "deb %q version %q: expected a package and its exact version (its sha256 is in the lock)", src.Deb, src.Version)
			}
		default:
			if !artifact.ValidSHA256(src.SHA256) {
				bad(field+".sha256", "%q: a tarball is pinned by its sha256 (64 lowercase hex digits)", src.SHA256)
			}
			if src.URL != "" && !isURL(src.URL) {
				bad(field+".url", "%q: expected an http(s) URL", src.URL)
			}
			if src.Path != "" && !strings.HasPrefix(src.Path, "host:/") && !insideImages(src.Path) {
				bad(field+".path", "%q: expected a file in the image folder or host:/ABSOLUTE", src.Path)
			}
		}
	}
	for i, st := range s.BuildSteps {
		field := fmt.Sprintf("build_steps[%d]", i)
		if !nameRE.MatchString(st.Name) {
			bad(field+".name", "%q: expected lowercase letters, digits, '.', '-'", st.Name)
		}
		if (st.Script == "") == (st.Run == "") {
			bad(field, "expected exactly one of script and run")
		}
		if st.Script != "" && !insideImages(st.Script) {
			bad(field+".script", "%q: expected a file in the image folder", st.Script)
		}
		for j, p := range st.Installs {
			if !strings.HasPrefix(p, "/") || filepath.Clean(p) != p {
				bad(fmt.Sprintf("%s.installs[%d]", field, j), "%q: expected a clean absolute path", p)
			}
		}
	}
}

// hostPath resolves a path of the spec: host:/ABSOLUTE or relative to the
// image folder.
func (s *Spec) hostPath(p string) string {
	if h, ok := strings.CutPrefix(p, "host:"); ok {
		return h
	}
	return filepath.Join(s.Dir, p)
}

// checkRepositoryKeys copies each repository's key into dir (as
// NAME.gpg or NAME.asc, the names apt's signed-by accepts) after checking
// that the file holds exactly the key the spec names, and returns the
// copies' paths by repository name.
func (s *Spec) checkRepositoryKeys(ctx context.Context, dir string) (map[string]string, error) {
	out := map[string]string{}
	for i, r := range s.Repositories {
		field := fmt.Sprintf("repositories[%d] (%s)", i, r.Name)
		b, err := os.ReadFile(s.hostPath(r.Key))
		if err != nil {
			return nil, fmt.Errorf("%s: reading its signing key: %w", field, err)
		}
		fprs, err := keyFingerprints(ctx, dir, b)
		if err != nil {
			return nil, fmt.Errorf("%s: key %s: %w", field, r.Key, err)
		}
		if len(fprs) != 1 || fprs[0] != r.fingerprint() {
			return nil, fmt.Errorf("%s: key %s holds %v, expected exactly the key %s the spec names", field, r.Key, fprs, r.fingerprint())
		}
		ext := ".gpg"
		if strings.Contains(string(b), "-----BEGIN PGP PUBLIC KEY BLOCK-----") {
			ext = ".asc"
		}
		p := filepath.Join(dir, r.Name+ext)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		out[r.Name] = p
	}
	return out, nil
}

// keyFingerprints lists the primary keys' fingerprints in an OpenPGP key
// file (gpg --show-keys, with a throwaway GNUPGHOME under dir: no keyring
// of the build host is read or changed).
func keyFingerprints(ctx context.Context, dir string, key []byte) ([]string, error) {
	home, err := os.MkdirTemp(dir, "gnupg-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, "gpg", "--batch", "--no-tty", "--with-colons", "--show-keys")
	cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
	cmd.Stdin = strings.NewReader(string(key))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gpg --show-keys: %w: %s", err, lastBytes(out, 500))
	}
	return parseColonFingerprints(out), nil
}

// parseColonFingerprints reads gpg --with-colons output: the fpr record
// that follows each pub record is that primary key's fingerprint.
func parseColonFingerprints(out []byte) []string {
	var fprs []string
	primary := false
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ":")
		switch {
		case f[0] == "pub":
			primary = true
		case f[0] == "fpr" && primary && len(f) > 9:
			fprs = append(fprs, strings.ToUpper(f[9]))
			primary = false
		case f[0] == "sub":
			primary = false
		}
	}
	return fprs
}

// lastBytes is the last n bytes of b, for messages.
func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// aptLines are the deb lines of the image's apt sources: Debian's suites
// from mirrors (with the spec's components), then each repository with
// its key (keys: repository name -> key file, as signed-by names it).
func (s *Spec) aptLines(mirrors map[string]string, keys map[string]string) ([]string, error) {
	comps := s.Base.Components
	if len(comps) == 0 {
		comps = []string{"main"}
	}
	var lines []string
	for _, su := range suites(s) {
		m, ok := mirrors[su]
		if !ok {
			return nil, fmt.Errorf("base.suites: no mirror for suite %s in the host's apt sources (have %v)", su, sortedKeys(mirrors))
		}
		lines = append(lines, fmt.Sprintf("deb %s %s %s", m, su, strings.Join(comps, " ")))
	}
	for _, r := range s.Repositories {
		for _, su := range r.Suites {
			l := fmt.Sprintf("deb [signed-by=%s] %s %s", keys[r.Name], r.URL, su)
			if len(r.Components) > 0 {
				l += " " + strings.Join(r.Components, " ")
			}
			lines = append(lines, l)
		}
	}
	return lines, nil
}
