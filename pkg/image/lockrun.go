package image

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ingot-dev/ingot/pkg/initramfs"
)

// LockImage resolves every .deb that goes into s from the apt sources in
// force (the build host's mirrors, the spec's repositories), stores each
// in the pool (o.Pool) and writes s.Dir/packages.lock. A debian image is
// resolved by a real mmdebstrap run (package scripts included; DKMS
// compiles nothing there), so the lock holds exactly what a build
// installs; a pieces image locks its kernel package and its deb: files'
// packages through the host's apt.
func LockImage(ctx context.Context, s *Spec, o Options) (*Lock, error) {
	work, err := os.MkdirTemp(orDefault(o.Out, os.TempDir()), "."+s.Name+".lock-")
	if err != nil {
		return nil, err
	}
	defer removeWork(work)
	r := runner{epoch: s.Epoch(), log: o.Log}
	var l *Lock
	switch s.Base.Kind {
	case "debian":
		l, err = lockDebian(ctx, r, s, o, work)
	default:
		l, err = lockPieces(ctx, s, o, work)
	}
	if err == nil {
		err = lockStub(ctx, s, o, l, mkdir(work, "stub"))
	}
	if err != nil {
		return nil, fmt.Errorf("locking image %s: %w", s.Name, err)
	}
	l.Inputs = LockInputs(s)
	return l, os.WriteFile(filepath.Join(s.Dir, LockFile), l.Format(s.Name), 0o644)
}

// lockStub adds the host's systemd-boot-efi of the image's architecture,
// whose EFI stub the UKI is built on, unless the image installs it.
func lockStub(ctx context.Context, s *Spec, o Options, l *Lock, dir string) error {
	if _, ok := l.Find(stubPackage, s.DebArch()); ok {
		return nil
	}
	p, err := newPool(o.Pool, s, hostMirrorsOrNone(o), o.Log)
	if err != nil {
		return err
	}
	deb, origin, filename, err := p.hostDeb(ctx, dir, stubPackage+":"+s.DebArch())
	if err != nil {
		return err
	}
	e, err := lockDeb(ctx, p, deb)
	if err != nil {
		return err
	}
	e.Origin, e.Filename = origin, filename
	l.Packages = append(l.Packages, e)
	return nil
}

// lockPieces locks the kernel package that linux-image-ARCH points at and
// each deb: file's package, as the host's apt has them now.
func lockPieces(ctx context.Context, s *Spec, o Options, work string) (*Lock, error) {
	p, err := newPool(o.Pool, s, hostMirrorsOrNone(o), o.Log)
	if err != nil {
		return nil, err
	}
	kpkg, err := initramfs.KernelPackageFor(ctx, s.Arch)
	if err != nil {
		return nil, err
	}
	kname, _, _ := strings.Cut(kpkg, ":")
	pkgs := []string{kname}
	for _, f := range s.Files {
		if pkg, _, ok := f.debSource(); ok {
			pkgs = append(pkgs, pkg)
		}
	}
	l := &Lock{}
	for i, pkg := range pkgs {
		dir := filepath.Join(work, fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		deb, origin, filename, err := p.hostDeb(ctx, dir, pkg+":"+s.DebArch())
		if err != nil {
			return nil, err
		}
		e, err := lockDeb(ctx, p, deb)
		if err != nil {
			return nil, err
		}
		e.Origin, e.Filename = origin, filename
		if _, dup := l.Find(e.Name, e.Arch); !dup {
			l.Packages = append(l.Packages, e)
		}
	}
	return l, nil
}

// hostDeb returns the .deb the host's apt would download for pkg (the
// pool's copy when it has that sha256, else a download into dir) and the
// entry's origin and filename: debian:SUITE and the path below that suite's
// mirror when the host's apt fetches it from a mirror of its sources (so a
// build can fetch it from the mirror or the spec's snapshot), else host.
func (p *pool) hostDeb(ctx context.Context, dir, pkg string) (deb, origin, filename string, err error) {
	out, err := runner{}.output(ctx, dir, "apt-get", "download", "--print-uris", pkg)
	if err != nil {
		return "", "", "", err
	}
	origin, filename = "host", "-"
	f := strings.Fields(string(out))
	if len(f) >= 4 {
		origin, filename = originOf(strings.Trim(f[0], "'"), p.mirrors)
	}
	for _, w := range f {
		if sha, ok := strings.CutPrefix(w, "SHA256:"); ok {
			if _, err := p.st.Stat(sha); err == nil {
				return p.st.Path(sha), origin, filename, nil
			}
		}
	}
	deb, err = aptDownload(ctx, dir, pkg)
	return deb, origin, filename, err
}

// originOf maps a .deb's URL to the first suite (in sorted order) whose
// mirror it lies under, and its path below the mirror; host and "-" when
// none does.
func originOf(u string, mirrors map[string]string) (string, string) {
	for _, su := range sortedKeys(mirrors) {
		base := strings.TrimSuffix(mirrors[su], "/") + "/"
		if rest, ok := strings.CutPrefix(u, base); ok && strings.HasSuffix(rest, ".deb") && !strings.Contains(rest, "..") {
			if path, err := url.PathUnescape(rest); err == nil {
				return "debian:" + su, path
			}
		}
	}
	return "host", "-"
}

// lockDeb stores a .deb in the pool and describes it from its control
// fields (dpkg-deb -f).
func lockDeb(ctx context.Context, p *pool, deb string) (Locked, error) {
	out, err := runner{}.output(ctx, "", "dpkg-deb", "-f", deb, "Package", "Version", "Architecture")
	if err != nil {
		return Locked{}, err
	}
	var e Locked
	err = readStanzas(bytes.NewReader(out), func(st map[string]string) {
		e = Locked{Name: st["Package"], Version: st["Version"], Arch: st["Architecture"]}
	})
	if err != nil || e.Name == "" {
		return Locked{}, fmt.Errorf("dpkg-deb -f %s: %q: %v", deb, out, err)
	}
	ref, err := p.add(ctx, deb)
	if err != nil {
		return Locked{}, err
	}
	e.SHA256, e.Size = ref.SHA256, ref.Size
	return e, nil
}

// lockDebian runs mmdebstrap from the apt sources in force, keeping what
// apt downloaded and its package lists, then locks every installed
// package and every source package at the sha256 the signed index gives
// (the file apt downloaded must have it too).
func lockDebian(ctx context.Context, r runner, s *Spec, o Options, work string) (*Lock, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("a debian image needs root (mmdebstrap --mode=root)")
	}
	mirrors, err := HostMirrors(orDefault(o.SourcesDir, "/etc/apt"))
	if err != nil {
		return nil, err
	}
	keys, err := s.checkRepositoryKeys(ctx, mkdir(work, "keys"))
	if err != nil {
		return nil, err
	}
	lines, err := s.aptLines(mirrors, keys)
	if err != nil {
		return nil, err
	}
	p, err := newPool(o.Pool, s, mirrors, o.Log)
	if err != nil {
		return nil, err
	}
	d := debianRun{s: s, work: work, root: filepath.Join(work, "root"), sources: lines, lock: true}
	if err := d.prepare(IDs{}); err != nil {
		return nil, err
	}
	if err := r.run(ctx, nil, d.argv()...); err != nil {
		return nil, explainAptError(s, err)
	}
	return lockFromRoot(ctx, r, s, p, d.root)
}

// lockFromRoot reads what the lock run left: dpkg's status, apt's lists
// and archives.
func lockFromRoot(ctx context.Context, r runner, s *Spec, p *pool, root string) (*Lock, error) {
	st, err := os.Open(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return nil, err
	}
	want, err := installedPackages(st)
	st.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the root's dpkg status: %w", err)
	}
	index, err := readIndex(ctx, r, s, root)
	if err != nil {
		return nil, err
	}
	archives := filepath.Join(root, "var/cache/apt/archives")
	aptRoot := []string{"apt-get", "-o", "Dir=" + root, "-o", "Dir::State::status=" + filepath.Join(root, "var/lib/dpkg/status")}
	for _, src := range s.Sources {
		if src.Deb == "" {
			continue
		}
		if _, err := r.output(ctx, archives, append(aptRoot, "download", src.Deb+"="+src.Version)...); err != nil {
			return nil, fmt.Errorf("sources %s: %w", src.Name, err)
		}
		for k, e := range index {
			if e.Name == src.Deb && e.Version == src.Version {
				want[k] = e
			}
		}
	}
	l := &Lock{}
	for _, k := range sortedKeys(want) {
		e, ok := index[k]
		if !ok {
			return nil, fmt.Errorf("package %s is installed but no package list of the apt sources has it", k)
		}
		ref, err := p.add(ctx, filepath.Join(archives, debFileName(e)))
		if err != nil {
			return nil, fmt.Errorf("package %s: apt left no .deb: %w", k, err)
		}
		if ref.SHA256 != e.SHA256 {
			return nil, fmt.Errorf("package %s: the .deb apt downloaded has sha256 %s, its signed index says %s", k, ref.SHA256, e.SHA256)
		}
		l.Packages = append(l.Packages, e)
	}
	return l, nil
}

// readIndex reads every Packages list of the root's apt sources into
// name=version:arch -> Locked (filename, sha256, size, origin), the first
// source in the order of the sources winning.
func readIndex(ctx context.Context, r runner, s *Spec, root string) (map[string]Locked, error) {
	out, err := r.output(ctx, "", "apt-get", "-o", "Dir="+root, "indextargets", "--format", "$(FILENAME)|$(REPO_URI)|$(RELEASE)", "Created-By: Packages")
	if err != nil {
		return nil, err
	}
	repos := map[string]string{}
	for _, rp := range s.Repositories {
		repos[strings.TrimSuffix(rp.URL, "/")] = rp.Name
	}
	index := map[string]Locked{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			continue
		}
		origin := "debian:" + f[2]
		if n, ok := repos[strings.TrimSuffix(f[1], "/")]; ok {
			origin = "repo:" + n
		}
		list, err := r.output(ctx, "", "/usr/lib/apt/apt-helper", "cat-file", f[0])
		if err != nil {
			return nil, err
		}
		err = readStanzas(bytes.NewReader(list), func(st map[string]string) {
			e := Locked{Name: st["Package"], Version: st["Version"], Arch: st["Architecture"], SHA256: st["SHA256"], Origin: origin, Filename: st["Filename"]}
			fmt.Sscan(st["Size"], &e.Size)
			if _, seen := index[e.Key()]; !seen {
				index[e.Key()] = e
			}
		})
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f[0], err)
		}
	}
	return index, nil
}

// explainAptError names the repository whose signature apt refused.
func explainAptError(s *Spec, err error) error {
	msg := err.Error()
	for i, r := range s.Repositories {
		if strings.Contains(msg, strings.TrimSuffix(r.URL, "/")) && (strings.Contains(msg, "NO_PUBKEY") || strings.Contains(msg, "is not signed") || strings.Contains(msg, "BADSIG")) {
			return fmt.Errorf("repositories[%d] (%s): apt refused %s: its Release is not signed by the key %s the spec names: %w", i, r.Name, r.URL, r.fingerprint(), err)
		}
	}
	return err
}

// hostMirrorsOrNone is HostMirrors, or none when the host's apt sources
// name no deb line (a pieces image's packages then come from the host's
// apt alone).
func hostMirrorsOrNone(o Options) map[string]string {
	m, _ := HostMirrors(orDefault(o.SourcesDir, "/etc/apt"))
	return m
}

func mkdir(parent, name string) string {
	p := filepath.Join(parent, name)
	os.MkdirAll(p, 0o755)
	return p
}
