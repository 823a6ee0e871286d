package image

import (
	"bufio"
	"bytes"
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
		keys := map[string]string{}
		for _, r := range s.Repositories {
			keys[r.Name] = filepath.Join(work, "keys", r.Name+".gpg")
		}
		final, err := s.finalSources(mirrors, keys)
		if err != nil {
			return nil, err
		}
		d := debianRun{s: s, work: work, root: root, final: final, keys: keys, srcFiles: map[string]string{},
			sources: []string{"deb [trusted=yes] copy://" + filepath.Join(work, "repo") + " ./"}}
		for _, src := range s.Sources {
			d.srcFiles[src.Name] = filepath.Join(work, "src", src.Name)
		}
		if o.ModuleKey != "" {
			d.signKey, d.signCert = o.ModuleKey, o.ModuleCert
		}
		for _, n := range sortedKeys(s.Packages) {
			p.Pins = append(p.Pins, n+"="+s.Packages[n])
		}
		p.Mirrors = usedMirrors(s, mirrors)
		p.Commands = append(p.Commands,
			Command{Note: "check " + filepath.Join(filepath.Base(s.Dir), LockFile) + " against the spec; take every locked .deb from the pool " + orDefault(o.Pool, "(--pool)") + " (fetched when absent, refused unless its sha256 is the lock's)"},
			Command{Note: "local repository " + filepath.Join(work, "repo") + " of exactly the locked .debs: apt-ftparchive packages, release (Suite/Codename " + s.Base.Release + ")"},
			Command{Note: "write " + filepath.Join(work, "pins") + " (apt preferences, Pin-Priority 1001 for each pin), " + filepath.Join(work, "fstab") + " (root and ESP by PARTUUID), the image's files, first-boot units and build steps, the DKMS signing configuration"},
			Command{Argv: d.argv()},
			Command{Note: "check the root: every installed package in the lock, no private key, every DKMS module built for the image's kernel"})
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
