package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/uki"
)

// inputs are a build's locked inputs: the image's lock, checked against
// its spec, and the pool every locked byte comes from.
type inputs struct {
	lock    *Lock
	pool    *pool
	mirrors map[string]string
}

// lockedInputs loads and checks the lock, opens the pool, and fetches
// (checking every sha256) the deb: files' packages and the http(s) files.
func (s *Spec) lockedInputs(ctx context.Context, o Options) (*inputs, error) {
	l, err := LoadLock(s)
	if err != nil {
		return nil, err
	}
	if err := CheckLock(s, l); err != nil {
		return nil, err
	}
	in := &inputs{lock: l, mirrors: hostMirrorsOrNone(o)}
	if s.Base.Kind == "debian" && in.mirrors == nil {
		if _, err := HostMirrors(orDefault(o.SourcesDir, "/etc/apt")); err != nil {
			return nil, err
		}
	}
	if in.pool, err = newPool(o.Pool, s, in.mirrors, o.Log); err != nil {
		return nil, err
	}
	for i, f := range s.Files {
		switch pkg, path, ok := f.debSource(); {
		case ok:
			e, _ := l.Find(pkg, s.DebArch())
			deb, err := in.pool.get(ctx, e)
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Path, err)
			}
			root, err := initramfs.UnpackPackage(ctx, o.Cache, deb)
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Path, err)
			}
			s.Files[i].fetched = filepath.Join(root, path)
		case isURL(f.Source):
			p, err := in.pool.getPinned(ctx, "file "+f.Path, f.SHA256, f.Source)
			if err != nil {
				return nil, err
			}
			s.Files[i].fetched = p
		}
	}
	return in, nil
}

// kernel unpacks the lock's kernel package (linux-image-VERSION-ARCH, the
// package the linux-image-ARCH of the lock run pointed at).
func (in *inputs) kernel(ctx context.Context, s *Spec, cache string) (*initramfs.Kernel, error) {
	var found []Locked
	for _, e := range in.lock.Packages {
		if strings.HasPrefix(e.Name, "linux-image-") && e.Name != "linux-image-"+s.DebArch() && e.Arch == s.DebArch() {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("packages.lock holds %d kernel packages (linux-image-*-%s), expected 1", len(found), s.DebArch())
	}
	deb, err := in.pool.get(ctx, found[0])
	if err != nil {
		return nil, err
	}
	return initramfs.FetchKernelFor(ctx, cache, deb, s.Arch)
}

// stubPackage is the package of systemd's EFI stub, which every image's
// UKI is built on: locked like the image's own packages.
const stubPackage = "systemd-boot-efi"

// stub unpacks the lock's systemd-boot-efi and returns its EFI stub.
func (in *inputs) stub(ctx context.Context, s *Spec, cache string) (string, error) {
	e, ok := in.lock.Find(stubPackage, s.DebArch())
	if !ok {
		return "", fmt.Errorf("packages.lock has no %s:%s (the EFI stub of the image's UKI)", stubPackage, s.DebArch())
	}
	deb, err := in.pool.get(ctx, e)
	if err != nil {
		return "", err
	}
	root, err := initramfs.UnpackPackage(ctx, cache, deb)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, uki.StubFor(s.DebArch())), nil
}

// sourceFiles fetches each source of the build steps: a locked package's
// .deb from the pool, a tarball from the pool, its URL or its path, its
// sha256 checked.
func (in *inputs) sourceFiles(ctx context.Context, s *Spec) (map[string]string, error) {
	out := map[string]string{}
	for _, src := range s.Sources {
		var p string
		var err error
		switch {
		case src.Deb != "":
			e, ok := in.lock.Find(src.Deb, "")
			if !ok {
				return nil, fmt.Errorf("sources %s: package %s is not in packages.lock", src.Name, src.Deb)
			}
			p, err = in.pool.get(ctx, e)
		case src.URL != "":
			p, err = in.pool.getPinned(ctx, "sources "+src.Name, src.SHA256, src.URL)
		default:
			p = s.hostPath(src.Path)
			err = checkSHA256(p, src.SHA256, "sources "+src.Name)
		}
		if err != nil {
			return nil, err
		}
		out[src.Name] = p
	}
	return out, nil
}

// checkSHA256 fails unless the file at p has the pinned digest.
func checkSHA256(p, want, what string) error {
	sum, _, err := hashFile(p)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if sum != want {
		return fmt.Errorf("%s: %s has sha256 %s, the spec pins %s: refused", what, p, sum, want)
	}
	return nil
}

// getPinned returns the pool's file of sha, fetching it from url when
// absent (stored only when its sha256 is sha).
func (p *pool) getPinned(ctx context.Context, what, sha, url string) (string, error) {
	path := p.st.Path(sha)
	if err := checkSHA256(path, sha, what); err == nil {
		return path, nil
	} else if _, serr := os.Stat(path); serr == nil {
		return "", err
	}
	if err := p.fromURL(ctx, what, sha, url); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return path, nil
}

// digestFile is the hex sha256 of a file's bytes, "" when it cannot be read.
func digestFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
