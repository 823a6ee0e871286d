package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/artifact"
)

// pool keeps the locked .debs in the content store (pkg/artifact), named
// by their sha256, so that a build still finds a version the mirror has
// dropped. A .deb the pool lacks is fetched, in order, from the spec's
// snapshot for its suite, the mirror in the build host's apt sources (or
// its repository's URL), or the host's apt, and stored only when its
// sha256 is the lock's.
type pool struct {
	st        *artifact.Store
	mirrors   map[string]string // Debian suite -> the host's mirror
	snapshots map[string]string // Debian suite -> the spec's snapshot URL
	repos     map[string]string // repository name -> URL
	client    *http.Client
	log       io.Writer
}

// errPoolMiss says no source had a locked .deb.
var errPoolMiss = errors.New("not in the pool and no source has it")

func newPool(dir string, s *Spec, mirrors map[string]string, log io.Writer) (*pool, error) {
	if dir == "" {
		return nil, fmt.Errorf("image %s: no pool folder for its locked .debs (Options.Pool, --pool)", s.Name)
	}
	st, err := artifact.Open(dir)
	if err != nil {
		return nil, err
	}
	p := &pool{st: st, mirrors: mirrors, snapshots: s.Base.Snapshots, repos: map[string]string{}, client: http.DefaultClient, log: log}
	for _, r := range s.Repositories {
		p.repos[r.Name] = r.URL
	}
	return p, nil
}

// get returns the pool's file of e, fetching it when absent. A file whose
// bytes are not the lock's sha256 stops the build, naming the package.
func (p *pool) get(ctx context.Context, e Locked) (string, error) {
	path := p.st.Path(e.SHA256)
	if _, err := os.Stat(path); err == nil {
		sum, _, err := hashFile(path)
		if err != nil {
			return "", err
		}
		if sum != e.SHA256 {
			return "", fmt.Errorf("package %s: the pool's file %s has sha256 %s, packages.lock says %s: the pool is damaged; remove the file to fetch it again", e.Key(), path, sum, e.SHA256)
		}
		return path, nil
	}
	if e.Origin == "host" {
		return path, p.fromHostApt(ctx, e)
	}
	var tried []string
	for _, u := range p.urls(e) {
		tried = append(tried, u)
		err := p.fromURL(ctx, "package "+e.Key(), e.SHA256, u)
		if err == nil {
			return path, nil
		}
		if !errors.Is(err, errPoolMiss) {
			return "", err
		}
		if p.log != nil {
			fmt.Fprintf(p.log, "# %s: %v\n", e.Key(), err)
		}
	}
	if strings.HasPrefix(e.Origin, "debian:") {
		// The host's apt may still have it where the lock run's mirror
		// dropped it (another mirror, a local repository).
		err := p.fromHostApt(ctx, e)
		if err == nil || !errors.Is(err, errAptMissing) {
			return path, err
		}
		tried = append(tried, "the host's apt")
	}
	return "", fmt.Errorf("package %s (sha256 %s): %w: looked in %s and %v; a mirror drops superseded versions: restore the pool, name a base.snapshots URL, or lock again", e.Key(), e.SHA256, errPoolMiss, p.st.Dir(), tried)
}

// errAptMissing says the host's apt cannot download a package version.
var errAptMissing = errors.New("the host's apt has no such version")

// urls lists where e may be fetched, best first.
func (p *pool) urls(e Locked) []string {
	kind, name, _ := strings.Cut(e.Origin, ":")
	var bases []string
	switch kind {
	case "debian":
		if u := p.snapshots[name]; u != "" {
			bases = append(bases, u)
		}
		if u := p.mirrors[name]; u != "" {
			bases = append(bases, u)
		}
	case "repo":
		if u := p.repos[name]; u != "" {
			bases = append(bases, u)
		}
	}
	var out []string
	for _, b := range bases {
		out = append(out, strings.TrimSuffix(b, "/")+"/"+strings.TrimPrefix(e.Filename, "./"))
	}
	return out
}

// fromURL stores the file at u when its sha256 is sha (what names it in
// messages).
func (p *pool) fromURL(ctx context.Context, what, sha, u string) error {
	if path, ok := strings.CutPrefix(u, "file://"); ok {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%s: %w", u, errPoolMiss)
		}
		defer f.Close()
		return p.put(ctx, what, sha, u, f)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if p.log != nil {
		fmt.Fprintf(p.log, "+ GET %s\n", u)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v: %w", u, err, errPoolMiss)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %w", u, resp.Status, errPoolMiss)
	}
	return p.put(ctx, what, sha, u, resp.Body)
}

func (p *pool) put(ctx context.Context, what, sha, from string, r io.Reader) error {
	if _, err := p.st.PutVerified(ctx, r, sha); err != nil {
		if errors.Is(err, artifact.ErrMismatch) {
			return fmt.Errorf("%s from %s is refused by its pin: %w", what, from, err)
		}
		return fmt.Errorf("%s from %s: %w", what, from, err)
	}
	return nil
}

// fromHostApt downloads e with the build host's apt (apt-get download
// NAME:ARCH=VERSION) and stores it when its sha256 is e's.
func (p *pool) fromHostApt(ctx context.Context, e Locked) error {
	tmp, err := os.MkdirTemp(filepath.Join(p.st.Dir(), "tmp"), "apt-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	deb, err := aptDownload(ctx, tmp, e.Name+":"+e.Arch+"="+e.Version)
	if err != nil {
		return fmt.Errorf("package %s (sha256 %s) is not in the pool %s: %w (%w)", e.Key(), e.SHA256, p.st.Dir(), errAptMissing, err)
	}
	f, err := os.Open(deb)
	if err != nil {
		return err
	}
	defer f.Close()
	return p.put(ctx, "package "+e.Key(), e.SHA256, "apt-get download", f)
}

// aptDownload runs apt-get download pkg in dir and returns the .deb.
func aptDownload(ctx context.Context, dir, pkg string) (string, error) {
	cmd := exec.CommandContext(ctx, "apt-get", "download", pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download %s: %w: %s", pkg, err, lastBytes(out, 500))
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(m) != 1 {
		return "", fmt.Errorf("apt-get download %s: found %d .deb files in %s, expected 1", pkg, len(m), dir)
	}
	return m[0], nil
}

// add stores a .deb file in the pool and returns its digest and size.
func (p *pool) add(ctx context.Context, file string) (artifact.Ref, error) {
	return p.st.PutFile(ctx, file)
}
