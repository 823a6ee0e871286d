package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// debianRun is one mmdebstrap run of a debian image: a lock run installs
// from the apt sources in force and keeps what apt downloaded; a build
// installs from the local repository of the locked .debs and customises
// the root.
type debianRun struct {
	s          *Spec
	work, root string
	sources    []string // the deb lines it installs from
	lock       bool
	// Build only: the image's own apt sources, repository keys (name ->
	// file), source files (name -> .deb or tarball) and the module signing
	// key and certificate (empty: modules stay unsigned).
	final             []string
	keys              map[string]string
	srcFiles          map[string]string
	signKey, signCert string
}

// Paths in the root that the build writes and removes.
const (
	dkmsConf    = "/etc/dkms/framework.conf.d/ingot.conf"
	signDir     = "/run/ingot-module-signing"
	srcDir      = "/usr/local/src"
	stepDirRoot = "/tmp"
)

// noSigningConf keeps DKMS from generating /var/lib/dkms/mok.key: with no
// sign-file it builds unsigned modules (Secure Boot must then be off, or
// the modules signed by the site's key at build time).
const noSigningConf = "# ingot: DKMS signs nothing and generates no key in this image.\nsign_file=/nonexistent/ingot-no-module-signing\n"

func signingConf() string {
	return "# ingot: the site's module signing key, present only while the image is built.\n" +
		"mok_signing_key=" + signDir + "/signing.key\nmok_certificate=" + signDir + "/signing.crt\n"
}

// argv is the mmdebstrap command line.
func (d debianRun) argv() []string {
	s, w := d.s, d.work
	var pins []string
	for _, n := range sortedKeys(s.Packages) {
		pins = append(pins, n+"="+s.Packages[n])
	}
	comps := s.Base.Components
	if len(comps) == 0 {
		comps = []string{"main"}
	}
	// Root mode mounts /proc, /sys and /dev into the root while it builds:
	// DKMS and nvcc need them (removeWork detaches what a killed build left).
	argv := []string{"mmdebstrap", "--mode=root", "--format=directory",
		"--variant=" + orDefault(s.Base.Variant, "important"),
		"--components=" + strings.Join(comps, ","),
		"--include=" + strings.Join(pins, ","),
		// No fsync per file: the root is thrown away if the build fails
		// (mmdebstrap removes the option from the root when it is done).
		"--dpkgopt=force-unsafe-io",
		`--setup-hook=mkdir -p "$1/etc/apt/preferences.d" "$1/etc/dkms/framework.conf.d"`,
		"--setup-hook=upload " + filepath.Join(w, "pins") + " /etc/apt/preferences.d/ingot-pins",
		"--setup-hook=upload " + filepath.Join(w, "dkms.conf") + " " + dkmsConf,
	}
	if d.lock {
		// Keep every .deb apt fetched and the package lists: the lock is
		// read from them. DKMS builds nothing here (a stand-in, diverted
		// into place before any package script runs): what it would build
		// changes no package, and the lock's root is thrown away.
		argv = append(argv, "--skip=essential/unlink", "--skip=download/empty", "--skip=cleanup/apt",
			`--essential-hook=chroot "$1" dpkg-divert --quiet --local --rename --divert /usr/sbin/dkms.ingot-lock --add /usr/sbin/dkms`,
			`--essential-hook=printf '#!/bin/sh\nexit 0\n' > "$1/usr/sbin/dkms" && chmod 0755 "$1/usr/sbin/dkms"`)
	} else {
		argv = append(argv, d.customize()...)
	}
	return append(append(argv, s.Base.Release, d.root), d.sources...)
}

// customize lists a build's hooks: the signing key in and out, the
// sources and build steps, the image's files and units, and the cleanup
// that keeps the bytes reproducible.
func (d debianRun) customize() []string {
	s, w := d.s, d.work
	var h []string
	if d.signKey != "" {
		h = append(h, `--setup-hook=mkdir -p "$1`+signDir+`"`,
			"--setup-hook=upload "+d.signKey+" "+signDir+"/signing.key",
			"--setup-hook=upload "+d.signCert+" "+signDir+"/signing.crt")
	}
	for i, f := range s.Files {
		// upload writes the content, not the mode: set it (0755 scripts).
		perm, _ := f.Perm()
		h = append(h, fmt.Sprintf("--customize-hook=upload %s %s", filepath.Join(w, fmt.Sprintf("file-%d", i)), f.Path),
			fmt.Sprintf(`--customize-hook=chmod %04o "$1%s"`, perm, f.Path))
	}
	for _, u := range s.FirstBoot {
		h = append(h, "--customize-hook=upload "+filepath.Join(w, u.Name)+" /etc/systemd/system/"+u.Name,
			"--customize-hook=chroot \"$1\" systemctl enable "+u.Name)
	}
	for _, src := range s.Sources {
		dst := `"$1` + srcDir + "/" + src.Name + `"`
		f := d.srcFiles[src.Name]
		if src.Deb != "" {
			h = append(h, "--customize-hook=dpkg-deb -x "+f+" "+dst)
		} else {
			h = append(h, "--customize-hook=mkdir -p "+dst+" && tar -xf "+f+" -C "+dst)
		}
	}
	for i, st := range s.BuildSteps {
		in := fmt.Sprintf("%s/ingot-step-%d", stepDirRoot, i)
		h = append(h, "--customize-hook=upload "+filepath.Join(w, fmt.Sprintf("step-%d", i))+" "+in,
			// A PID namespace of its own: tools that name files after their
			// PID (nvcc's tmpxft_PID_..., which ends up in the binary) see
			// the same PIDs in every build of the same step.
			fmt.Sprintf(`--customize-hook=unshare --pid --fork chroot "$1" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C TZ=UTC SOURCE_DATE_EPOCH=%d INGOT_STEP=%s /bin/sh -eu %s`, s.Epoch(), st.Name, in),
			`--customize-hook=rm -f "$1`+in+`"`)
	}
	for _, src := range s.Sources {
		h = append(h, `--customize-hook=rm -rf "$1`+srcDir+"/"+src.Name+`"`)
	}
	for _, name := range sortedKeys(d.keys) {
		h = append(h, `--customize-hook=mkdir -p "$1/etc/apt/keyrings"`,
			"--customize-hook=upload "+d.keys[name]+" /etc/apt/keyrings/"+filepath.Base(d.keys[name]))
	}
	return append(h,
		// What DKMS built, while /proc is mounted (dkms needs it): checkRoot
		// reads it.
		`--customize-hook=if [ -x "$1/usr/sbin/dkms" ]; then chroot "$1" dkms status > "`+filepath.Join(w, "dkms-status")+`"; fi`,
		// Host keys are made per machine at first boot (cloud-init); logs and
		// caches that record build times would break reproducibility.
		`--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*_key "$1"/etc/ssh/ssh_host_*_key.pub "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log "$1"/var/log/apt/history.log "$1"/var/log/apt/term.log "$1"/var/cache/ldconfig/aux-cache`,
		// DKMS: the signing key leaves before the root becomes a file
		// system; build trees and make logs (dated) go too, the built
		// modules stay in /var/lib/dkms and /lib/modules.
		`--customize-hook=rm -rf "$1`+signDir+`" "$1"/var/lib/dkms/*/*/build "$1"/var/lib/dkms/*/*/*/*/log`,
		"--customize-hook=upload "+filepath.Join(w, "dkms.final")+" "+dkmsConf,
		`--customize-hook=printf '' > "$1/etc/machine-id"`,
		`--customize-hook=mkdir -p "$1/boot/efi"`,
		"--customize-hook=upload "+filepath.Join(w, "fstab")+" /etc/fstab",
		"--customize-hook=upload "+filepath.Join(w, "sources.list")+" /etc/apt/sources.list")
}

// prepare writes the files the hooks upload into the work folder.
func (d debianRun) prepare(ids IDs) error {
	s, w := d.s, d.work
	conf := noSigningConf
	if d.signKey != "" {
		conf = signingConf()
	}
	files := map[string][]byte{"pins": pinPreferences(s), "dkms.conf": []byte(conf), "dkms.final": []byte(noSigningConf),
		"fstab": fstab(ids), "sources.list": []byte(strings.Join(d.final, "\n") + "\n")}
	for i, f := range s.Files {
		b, err := f.Read(s.Dir)
		if err != nil {
			return err
		}
		files[fmt.Sprintf("file-%d", i)] = b
	}
	for _, u := range s.FirstBoot {
		files[u.Name] = []byte(u.Content)
	}
	for i, st := range s.BuildSteps {
		b := []byte(st.Run)
		if st.Script != "" {
			var err error
			if b, err = os.ReadFile(filepath.Join(s.Dir, st.Script)); err != nil {
				return fmt.Errorf("build_steps[%d] (%s): %w", i, st.Name, err)
			}
		}
		files[fmt.Sprintf("step-%d", i)] = b
	}
	for name, b := range files {
		perm := os.FileMode(0o644)
		if strings.HasPrefix(name, "file-") {
			i := 0
			fmt.Sscanf(name, "file-%d", &i)
			perm, _ = s.Files[i].Perm()
		}
		if err := os.WriteFile(filepath.Join(w, name), b, perm); err != nil {
			return err
		}
	}
	return nil
}

// finalSources are the image's own apt sources: Debian's suites from the
// build host's mirrors, each repository with its key in /etc/apt/keyrings.
func (s *Spec) finalSources(mirrors, keys map[string]string) ([]string, error) {
	inImage := map[string]string{}
	for n, k := range keys {
		inImage[n] = "/etc/apt/keyrings/" + filepath.Base(k)
	}
	return s.aptLines(mirrors, inImage)
}

// checkRoot compares what a build installed with the lock and looks for
// what must not be in an image: a package outside the lock, a generated
// DKMS key, a DKMS module not built for the image's kernel.
func checkRoot(s *Spec, l *Lock, root string) error {
	st, err := os.Open(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return fmt.Errorf("reading the root's dpkg status: %w", err)
	}
	inst, err := installedPackages(st)
	st.Close()
	if err != nil {
		return fmt.Errorf("reading the root's dpkg status: %w", err)
	}
	for _, st := range s.BuildSteps {
		for _, p := range st.Installs {
			if fi, err := os.Stat(filepath.Join(root, p)); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("build step %s did not install %s", st.Name, p)
			}
		}
	}
	locked := map[string]bool{}
	for _, p := range l.Packages {
		locked[p.Key()] = true
	}
	var unlocked []string
	for k := range inst {
		if !locked[k] {
			unlocked = append(unlocked, k)
		}
	}
	if len(unlocked) > 0 {
		sort.Strings(unlocked)
		return fmt.Errorf("installed packages not in packages.lock: %s", strings.Join(unlocked, ", "))
	}
	keys, _ := filepath.Glob(filepath.Join(root, "var/lib/dkms/*.key"))
	if k, _ := filepath.Glob(filepath.Join(root, signDir, "*")); len(k) > 0 {
		keys = append(keys, k...)
	}
	if len(keys) > 0 {
		return fmt.Errorf("a private key is in the image: %v (DKMS generates /var/lib/dkms/mok.key when it has none: the image's %s must keep it from signing)", keys, dkmsConf)
	}
	return checkDKMS(root, filepath.Join(filepath.Dir(root), "dkms-status"))
}

// checkDKMS fails unless every DKMS module is installed for every kernel
// of the root (what `dkms status` said during the build, in statusFile).
func checkDKMS(root, statusFile string) error {
	if _, err := os.Stat(filepath.Join(root, "usr/sbin/dkms")); err != nil {
		return nil
	}
	kernels, _ := filepath.Glob(filepath.Join(root, "lib/modules/*"))
	out, err := os.ReadFile(statusFile)
	if err != nil {
		return fmt.Errorf("DKMS is installed but its status was not recorded: %w", err)
	}
	for _, k := range kernels {
		kver := filepath.Base(k)
		if bad := dkmsMissing(out, kver); bad != "" {
			return fmt.Errorf("DKMS did not build for kernel %s: %s (dkms status:\n%s)", kver, bad, bytes.TrimSpace(out))
		}
	}
	return nil
}

// dkmsMissing reads `dkms status` ("nvidia-current/535.309.01, 6.1.0-57-amd64,
// x86_64: installed") and names a module that is added but not installed
// for kver ("" when every module is).
func dkmsMissing(status []byte, kver string) string {
	mods := map[string]bool{}
	for _, line := range strings.Split(string(status), "\n") {
		head, state, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		f := strings.Split(head, ", ")
		mod := f[0]
		if _, seen := mods[mod]; !seen {
			mods[mod] = false
		}
		if len(f) >= 2 && f[1] == kver && strings.HasPrefix(strings.TrimSpace(state), "installed") {
			mods[mod] = true
		}
	}
	for _, m := range sortedKeys(mods) {
		if !mods[m] {
			return m + " is not installed"
		}
	}
	return ""
}

// buildDebian builds and checks the root (debianRoot), then takes the
// kernel and initrd from its /boot for the UKI and syslinux.
func buildDebian(ctx context.Context, r runner, s *Spec, o Options, in *inputs, ids IDs, work string) (*bootPieces, error) {
	root, err := debianRoot(ctx, r, s, o, in, ids, work)
	if err != nil {
		return nil, err
	}
	stub, err := in.stub(ctx, s, o.Cache)
	if err != nil {
		return nil, err
	}
	return debianBoot(ctx, r, s, ids, root, work, stub)
}

// debianRoot builds work/root with mmdebstrap (root required) from the
// local repository of the locked .debs, runs the build steps, and checks
// the result against the lock.
func debianRoot(ctx context.Context, r runner, s *Spec, o Options, in *inputs, ids IDs, work string) (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("a debian image needs root (mmdebstrap --mode=root)")
	}
	if (o.ModuleKey == "") != (o.ModuleCert == "") {
		return "", fmt.Errorf("module signing: give both the key and the certificate, or neither")
	}
	keys, err := s.checkRepositoryKeys(ctx, mkdir(work, "keys"))
	if err != nil {
		return "", err
	}
	final, err := s.finalSources(in.mirrors, keys)
	if err != nil {
		return "", err
	}
	srcs, err := in.sourceFiles(ctx, s)
	if err != nil {
		return "", err
	}
	repo, err := localRepo(ctx, r, in.pool, in.lock, filepath.Join(work, "repo"), s.Base.Release)
	if err != nil {
		return "", err
	}
	d := debianRun{s: s, work: work, root: filepath.Join(work, "root"), sources: []string{repo},
		final: final, keys: keys, srcFiles: srcs, signKey: o.ModuleKey, signCert: o.ModuleCert}
	if err := d.prepare(ids); err != nil {
		return "", err
	}
	if err := r.run(ctx, nil, d.argv()...); err != nil {
		return "", explainUnlocked(err)
	}
	return d.root, checkRoot(s, in.lock, d.root)
}

// debianBoot writes the image's identity into root and makes the boot
// pieces from the kernel and initrd in its /boot.
func debianBoot(ctx context.Context, r runner, s *Spec, ids IDs, root, work, stub string) (*bootPieces, error) {
	k, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	i, _ := filepath.Glob(filepath.Join(root, "boot", "initrd.img-*"))
	if len(k) != 1 || len(i) != 1 {
		return nil, fmt.Errorf("root %s/boot: found %d kernels and %d initrds, expected one each (is linux-image-amd64 pinned?)", root, len(k), len(i))
	}
	if err := writeIdentity(filepath.Join(work, "ident"), s, r.epoch); err != nil {
		return nil, err
	}
	id, _ := os.ReadFile(filepath.Join(work, "ident", "etc", "ingot", "image.json"))
	if err := writeStamped(filepath.Join(root, "etc", "ingot", "image.json"), id, 0o644, r.epoch); err != nil {
		return nil, err
	}
	osrel, _ := os.ReadFile(filepath.Join(root, "etc", "os-release"))
	p := &bootPieces{root: root, kver: strings.TrimPrefix(filepath.Base(k[0]), "vmlinuz-"), stub: stub}
	return p, p.addBoot(ctx, r, s, k[0], i[0], debianCmdline(s, ids), osrel, work)
}

// explainUnlocked says what apt's "not installable" means in a locked
// build: a package the lock lacks.
func explainUnlocked(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "not installable") || strings.Contains(msg, "Unable to locate package") || strings.Contains(msg, "has no installation candidate") {
		return fmt.Errorf("a package is not in packages.lock (apt names it below; lock the image again): %w", err)
	}
	return err
}
