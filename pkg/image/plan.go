package image

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/uki"
)

// Command is one step of a plan: a program and its arguments, or a note for
// work done in-process.
type Command struct {
	Argv []string `json:"argv,omitempty"`
	Note string   `json:"note,omitempty"`
}

func (c Command) String() string {
	if len(c.Argv) == 0 {
		return "# " + c.Note
	}
	q := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+~@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Plan is what a build would do, printed by `ingot image build --plan`.
type Plan struct {
	Image    string            `json:"image"`
	Version  string            `json:"version"`
	Mirrors  map[string]string `json:"mirrors,omitempty"`
	Pins     []string          `json:"pins,omitempty"`
	Commands []Command         `json:"commands"`
	IDs      IDs               `json:"ids"`
}

// MakePlan lists a build's commands without running anything. For a debian
// image the mirrors come from the host's apt sources (sourcesDir, default
// /etc/apt): no registry name is written in the repository.
func MakePlan(s *Spec, o Options) (*Plan, error) {
	ids := DeriveIDs(s.Name, s.Version)
	p := &Plan{Image: s.Name, Version: s.Version, IDs: ids}
	work := filepath.Join(o.Out, "."+s.Name+".work")
	switch s.Base.Kind {
	case "debian":
		mirrors, err := HostMirrors(orDefault(o.SourcesDir, "/etc/apt"))
		if err != nil {
			return nil, err
		}
		root := filepath.Join(work, "root")
		argv, pins, err := mmdebstrapArgv(s, mirrors, root, filepath.Join(work, "pins"))
		if err != nil {
			return nil, err
		}
		p.Mirrors, p.Pins = usedMirrors(s, mirrors), pins
		p.Commands = append(p.Commands, Command{Note: "write " + filepath.Join(work, "pins") + " (apt preferences, Pin-Priority 1001 for each pin), " + filepath.Join(work, "fstab") + " (root and ESP by PARTUUID), the image's files and first-boot units"}, Command{Argv: argv})
		p.Commands = append(p.Commands, Command{Note: "UKI: objcopy systemd's EFI stub + " + root + "/boot/vmlinuz-* + initrd.img-*, cmdline " + debianCmdline(s, ids)})
	case "pieces":
		meta, ukiNote := "linux-image-amd64", "objcopy "+EFIStub
		if s.Arch == "arm64" {
			meta, ukiNote = "linux-image-arm64:arm64", "pkg/uki on "+uki.EFIStubARM64
		}
		p.Commands = append(p.Commands,
			Command{Note: "kernel: apt-get download $(apt-cache depends " + meta + ") && dpkg -x (cache " + o.Cache + ")"})
		for _, f := range s.Files {
			if pkg, path, ok := f.debSource(); ok {
				p.Commands = append(p.Commands, Command{Note: fmt.Sprintf("file %s: %s of apt-get download %s:%s && dpkg -x (cache %s)", f.Path, path, pkg, s.DebArch(), o.Cache)})
			}
		}
		p.Commands = append(p.Commands,
			Command{Note: fmt.Sprintf("initramfs: image files + modules %v with dependencies (Go newc writer, gzip)", s.Boot.Modules)},
			Command{Note: "UKI: " + ukiNote + " + vmlinuz + initramfs, cmdline " + s.Boot.Cmdline})
	}
	l, err := s.Layout()
	if err != nil {
		return nil, err
	}
	esp, rootImg, raw := filepath.Join(work, "esp.img"), filepath.Join(work, "root.img"), filepath.Join(o.Out, s.Name+".raw")
	p.Commands = append(p.Commands,
		Command{Argv: []string{"mkfs.vfat", "--invariant", "-i", ids.VFATSerial, "-n", "ESP", esp}},
		Command{Note: "mmd/mcopy -m the ESP files (EFI/BOOT/" + s.RemovableBootFile() + map[bool]string{true: ", syslinux --install, vmlinuz, initrd.img, syslinux.cfg", false: ""}[s.Boot.BIOS == "syslinux"] + ")"},
		Command{Argv: []string{"mkfs.ext4", "-q", "-F", "-L", "root", "-U", ids.RootFS, "-E", "hash_seed=" + ids.RootFS + ",root_owner=0:0,nodiscard", "-d", filepath.Join(work, "root"), rootImg}},
		Command{Note: "debugfs -w: every inode's atime, ctime, mtime, crtime set to SOURCE_DATE_EPOCH"},
		Command{Note: fmt.Sprintf("sfdisk %s: GPT label-id %s, esp %d MiB uuid %s, root %d MiB uuid %s", raw, ids.Disk, l.ESP>>20, ids.ESP, l.Root>>20, ids.Root)},
		Command{Note: "dd conv=notrunc the ESP at 1 MiB and root after it; zstd -" + fmt.Sprint(orInt(s.Build.ZstdLevel, 3)) + " single-threaded -> " + raw + ".zst"})
	return p, nil
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// debianCmdline is the installed OS's kernel command line.
func debianCmdline(s *Spec, ids IDs) string {
	return strings.TrimSpace("root=PARTUUID=" + ids.Root + " ro " + s.Boot.Cmdline)
}

// suites returns the apt suites of s: the release plus its extra suites.
func suites(s *Spec) []string { return append([]string{s.Base.Release}, s.Base.Suites...) }

func usedMirrors(s *Spec, m map[string]string) map[string]string {
	out := map[string]string{}
	for _, su := range suites(s) {
		out[su] = m[su]
	}
	return out
}

// mmdebstrapArgv returns the mmdebstrap command that builds root with every
// package at its pinned version, and the pins as "name=version".
func mmdebstrapArgv(s *Spec, mirrors map[string]string, root, pinFile string) ([]string, []string, error) {
	work := filepath.Dir(pinFile)
	comps := s.Base.Components
	if len(comps) == 0 {
		comps = []string{"main"}
	}
	var pins []string
	for _, n := range sortedKeys(s.Packages) {
		pins = append(pins, n+"="+s.Packages[n])
	}
	argv := []string{"mmdebstrap", "--mode=root", "--format=directory", "--skip=chroot/mount",
		"--variant=" + orDefault(s.Base.Variant, "important"),
		"--components=" + strings.Join(comps, ","),
		"--include=" + strings.Join(pins, ","),
		"--setup-hook=mkdir -p \"$1/etc/apt/preferences.d\"",
		"--setup-hook=upload " + pinFile + " /etc/apt/preferences.d/ingot-pins",
	}
	for i, f := range s.Files {
		argv = append(argv, fmt.Sprintf("--customize-hook=upload %s %s", filepath.Join(filepath.Dir(pinFile), fmt.Sprintf("file-%d", i)), f.Path))
	}
	for _, u := range s.FirstBoot {
		argv = append(argv, "--customize-hook=upload "+filepath.Join(filepath.Dir(pinFile), u.Name)+" /etc/systemd/system/"+u.Name,
			"--customize-hook=chroot \"$1\" systemctl enable "+u.Name)
	}
	argv = append(argv,
		// Host keys are made per machine at first boot (cloud-init); logs and
		// caches that record build times would break reproducibility.
		`--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*_key "$1"/etc/ssh/ssh_host_*_key.pub "$1"/var/log/dpkg.log "$1"/var/log/alternatives.log "$1"/var/log/apt/history.log "$1"/var/log/apt/term.log "$1"/var/cache/ldconfig/aux-cache`,
		`--customize-hook=printf '' > "$1/etc/machine-id"`,
		`--customize-hook=mkdir -p "$1/boot/efi"`,
		"--customize-hook=upload "+filepath.Join(work, "fstab")+" /etc/fstab",
		s.Base.Release, root)
	for _, su := range suites(s) {
		m, ok := mirrors[su]
		if !ok {
			return nil, nil, fmt.Errorf("base.suites: no mirror for suite %s in the host's apt sources (have %v)", su, sortedKeys(mirrors))
		}
		argv = append(argv, fmt.Sprintf("deb %s %s %s", m, su, strings.Join(comps, " ")))
	}
	return argv, pins, nil
}

// fstab mounts the image's own partitions by PARTUUID.
func fstab(ids IDs) []byte {
	return []byte(fmt.Sprintf("PARTUUID=%s / ext4 errors=remount-ro 0 1\nPARTUUID=%s /boot/efi vfat umask=0077 0 2\n", ids.Root, ids.ESP))
}

// pinPreferences renders apt preferences pinning each package.
func pinPreferences(s *Spec) []byte {
	var b bytes.Buffer
	for _, n := range sortedKeys(s.Packages) {
		fmt.Fprintf(&b, "Package: %s\nPin: version %s\nPin-Priority: 1001\n\n", n, s.Packages[n])
	}
	return b.Bytes()
}

// HostMirrors maps each suite in the host's apt sources (sources.list and
// sources.list.d/*.list and *.sources) to its URI.
func HostMirrors(aptDir string) (map[string]string, error) {
	out := map[string]string{}
	files := []string{filepath.Join(aptDir, "sources.list")}
	for _, pat := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", pat))
		sort.Strings(m)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasSuffix(f, ".sources") {
			parseDeb822(b, out)
		} else {
			parseOneLine(b, out)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("reading the host's apt sources in %s: no deb entries (the image build takes its mirror from there)", aptDir)
	}
	return out, nil
}

func parseOneLine(b []byte, out map[string]string) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "deb" {
			if strings.HasPrefix(f[1], "[") { // options
				for len(f) > 1 && !strings.HasSuffix(f[1], "]") {
					f = append(f[:1], f[2:]...)
				}
				f = append(f[:1], f[2:]...)
			}
			if len(f) >= 3 {
				if _, ok := out[f[2]]; !ok {
					out[f[2]] = f[1]
				}
			}
		}
	}
}

func parseDeb822(b []byte, out map[string]string) {
	for _, para := range strings.Split(string(b), "\n\n") {
		kv := map[string]string{}
		for _, line := range strings.Split(para, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "#") {
				kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !strings.Contains(" "+kv["types"]+" ", " deb ") || kv["enabled"] == "no" {
			continue
		}
		uris := strings.Fields(kv["uris"])
		if len(uris) == 0 {
			continue
		}
		for _, su := range strings.Fields(kv["suites"]) {
			if _, ok := out[su]; !ok {
				out[su] = uris[0]
			}
		}
	}
}

// buildDebian runs mmdebstrap (root required) and takes the kernel and
// initrd from the new root's /boot for the UKI and syslinux.
func buildDebian(ctx context.Context, r runner, s *Spec, o Options, ids IDs, work string) (*bootPieces, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("a debian image needs root (mmdebstrap --mode=root)")
	}
	mirrors, err := HostMirrors(orDefault(o.SourcesDir, "/etc/apt"))
	if err != nil {
		return nil, err
	}
	root, pinFile := filepath.Join(work, "root"), filepath.Join(work, "pins")
	if err := os.WriteFile(pinFile, pinPreferences(s), 0o644); err != nil {
		return nil, err
	}
	for i, f := range s.Files {
		b, err := f.Read(s.Dir)
		if err != nil {
			return nil, err
		}
		perm, _ := f.Perm()
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("file-%d", i)), b, perm); err != nil {
			return nil, err
		}
	}
	for _, u := range s.FirstBoot {
		if err := os.WriteFile(filepath.Join(work, u.Name), []byte(u.Content), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(work, "fstab"), fstab(ids), 0o644); err != nil {
		return nil, err
	}
	argv, _, err := mmdebstrapArgv(s, mirrors, root, pinFile)
	if err != nil {
		return nil, err
	}
	if err := r.run(ctx, nil, argv...); err != nil {
		return nil, err
	}
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
	p := &bootPieces{root: root, kver: strings.TrimPrefix(filepath.Base(k[0]), "vmlinuz-")}
	return p, p.addBoot(ctx, r, s, k[0], i[0], debianCmdline(s, ids), osrel, work)
}
