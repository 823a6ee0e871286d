package image

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot walks up from the package folder to go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test folder")
		}
		dir = parent
	}
}

const goodYAML = `name: t
version: "1"
base: {kind: pieces}
files:
  - {path: /init, content: "x", mode: "0755"}
partitions: {esp_size: 48MiB, root_size: 8MiB}
`

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unknown field names line", goodYAML + "colour: red\n", "img.yaml:7: field colour not found"},
		{"bad kind", strings.Replace(goodYAML, "kind: pieces", "kind: arch", 1), `img.yaml: base.kind: "arch": expected debian or pieces`},
		{"bad esp size", strings.Replace(goodYAML, "48MiB", "lots", 1), `img.yaml: partitions.esp_size: size "lots"`},
		{"esp too small", strings.Replace(goodYAML, "48MiB", "1MiB", 1), "partitions.esp_size: 1MiB: expected a whole number of MiB, at least 32 MiB"},
		{"root not MiB", strings.Replace(goodYAML, "root_size: 8MiB", "root_size: 8.5MiB", 1), "partitions.root_size: 8.5MiB"},
		{"bad mode", strings.Replace(goodYAML, `"0755"`, `"rwx"`, 1), `files[0].mode: "rwx": expected an octal mode`},
		{"relative path", strings.Replace(goodYAML, "path: /init", "path: init", 1), `files[0].path: "init": expected a clean absolute path`},
		{"both content and source", strings.Replace(goodYAML, `content: "x"`, `content: "x", source: y`, 1), "files[0]: expected exactly one of content and source"},
		{"source escapes", strings.Replace(goodYAML, `content: "x"`, `source: ../../etc/shadow`, 1), `files[0].source: "../../etc/shadow"`},
		{"source is a file of images/", strings.Replace(goodYAML, `content: "x"`, `source: ../README.md`, 1), `files[0].source: "../README.md"`},
		{"source leaves images/ through a sibling", strings.Replace(goodYAML, `content: "x"`, `source: ../lab/../../go.mod`, 1), `files[0].source: "../lab/../../go.mod"`},
		{"root programs on a debian image", strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1) + "packages: {fio: 3.33-3}\nroot_programs: [fio]\n", "root_programs: only a pieces image"},
		{"root program relative path", goodYAML + "root_programs: [bin/fio]\n", `root_programs[0]: "bin/fio"`},
		{"bad name", strings.Replace(goodYAML, "name: t", "name: T!", 1), `name: "T!"`},
		{"missing version", strings.Replace(goodYAML, `version: "1"`, "", 1), `version: ""`},
		{"pieces with packages", goodYAML + "packages: {curl: 7.88.1-10}\n", "packages: a pieces image installs no packages"},
		{"debian needs pins", strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1), "packages: missing"},
		{"range instead of pin", strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1) + "packages: {nvidia-driver: \">= 535\"}\n", `packages.nvidia-driver: version ">= 535": expected an exact Debian version`},
		{"bad unit", goodYAML + "first_boot: [{name: x.timer, content: a}]\n", `first_boot[0].name: "x.timer"`},
		{"bad bios", goodYAML + "boot: {bios: grub}\n", `boot.bios: "grub": expected syslinux or none`},
		{"bad level", goodYAML + "build: {zstd_level: 40}\n", "build.zstd_level: 40"},
		{"bad arch", goodYAML + "arch: riscv64\n", `arch: "riscv64": expected amd64 or arm64`},
		{"arm64 debian image", strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1) + "packages: {fio: 3.33-3}\narch: arm64\n", "arch: arm64: only a pieces image"},
		{"arm64 with syslinux", goodYAML + "arch: arm64\nboot: {bios: syslinux}\n", "boot.bios: syslinux: an arm64 image boots through UEFI only"},
		{"deb source without a path", strings.Replace(goodYAML, `content: "x"`, `source: "deb:busybox-static"`, 1), `files[0].source: "deb:busybox-static": expected deb:PACKAGE:/ABSOLUTE/PATH`},
		{"deb source relative path", strings.Replace(goodYAML, `content: "x"`, `source: "deb:busybox-static:bin/busybox"`, 1), `expected deb:PACKAGE:/ABSOLUTE/PATH`},
		{"deb source on a debian image", strings.Replace(strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1), `content: "x"`, `source: "deb:fio:/usr/bin/fio"`, 1) + "packages: {fio: 3.33-3}\n", "only a pieces image takes files from packages"},
		{"not yaml", "name: [", "img.yaml: "},
		{"wrong type", goodYAML + "packages: [a, b]\n", "img.yaml:7: cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("img.yaml", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error = %v\nwant one containing %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{goodYAML, strings.Replace(goodYAML, `content: "x"`, `source: ../lab/init`, 1) + "root_programs: [fio, /usr/bin/iperf3]\n",
		strings.Replace(goodYAML, `content: "x"`, `source: "deb:busybox-static:/bin/busybox"`, 1) + "arch: arm64\nboot: {bios: none}\n"} {
		if _, err := Parse("img.yaml", []byte(ok)); err != nil {
			t.Errorf("Parse(%q) = %v", ok, err)
		}
	}
}

func TestShippedImagesLoad(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(repoRoot(t), "images", "*", FileName))
	if len(dirs) < 2 {
		t.Fatalf("found %d image definitions, want lab and debian-12-nvidia at least", len(dirs))
	}
	for _, f := range dirs {
		s, err := Load(filepath.Dir(f))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if s.Name != filepath.Base(filepath.Dir(f)) {
			t.Errorf("%s: name %q, want the folder name", f, s.Name)
		}
		for _, file := range s.Files {
			if strings.HasPrefix(file.Source, "host:") || strings.HasPrefix(file.Source, "deb:") {
				continue
			}
			if _, err := file.Read(s.Dir); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

func TestDeriveIDs(t *testing.T) {
	a, b := DeriveIDs("lab", "1"), DeriveIDs("lab", "1")
	if d := cmp.Diff(a, b); d != "" {
		t.Fatalf("DeriveIDs is not deterministic: %s", d)
	}
	c := DeriveIDs("lab", "2")
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for _, id := range []string{a.Disk, a.ESP, a.Root, a.RootFS, c.Disk, c.ESP, c.Root, c.RootFS} {
		if !uuid.MatchString(id) {
			t.Errorf("%q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Errorf("UUID %s used twice", id)
		}
		seen[id] = true
	}
	if !regexp.MustCompile(`^[0-9A-F]{8}$`).MatchString(a.VFATSerial) || a.VFATSerial == c.VFATSerial {
		t.Errorf("VFAT serials %q, %q: want 8 hex digits, distinct per version", a.VFATSerial, c.VFATSerial)
	}
}

func TestHostMirrors(t *testing.T) {
	got, err := HostMirrors("testdata/apt")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"bookworm":          "http://mirror.invalid/other", // sources.list is read first, as apt does
		"bookworm-updates":  "http://mirror.invalid/debian",
		"bookworm-security": "http://security.invalid/debian-security",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("HostMirrors (-want +got):\n%s", d)
	}
	if _, err := HostMirrors(t.TempDir()); err == nil {
		t.Error("HostMirrors of an empty folder succeeded")
	}
}

// TestPlanDebianNvidia checks the GPU image's plan: every NVIDIA package at
// the one driver version, pins passed to mmdebstrap, mirrors from the host.
// The whole plan is a golden file (UPDATE_TESTDATA=1 refreshes it).
func TestPlanDebianNvidia(t *testing.T) {
	s, err := Load(filepath.Join(repoRoot(t), "images", "debian-12-nvidia"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := MakePlan(s, Options{Out: "/out", Cache: "/cache", SourcesDir: "testdata/apt"})
	if err != nil {
		t.Fatal(err)
	}
	const driver = "535.309.01-0+deb12u1"
	if v := s.Packages["nvidia-driver"]; v != driver {
		t.Errorf("nvidia-driver pinned to %q, want %s", v, driver)
	}
	helpers := map[string]bool{"nvidia-support": true, "nvidia-kernel-common": true, "nvidia-installer-cleanup": true, "nvidia-persistenced": true,
		"nvidia-cuda-toolkit": true} // versioned apart from the driver (CUDA 11.8)
	for name, v := range s.Packages {
		if (strings.Contains(name, "nvidia") || strings.Contains(name, "cuda") || strings.Contains(name, "nvcuvid")) && !helpers[name] && v != driver {
			t.Errorf("%s pinned to %s: every NVIDIA package must be at %s", name, v, driver)
		}
	}
	var mm []string
	for _, c := range p.Commands {
		if len(c.Argv) > 0 && c.Argv[0] == "mmdebstrap" {
			mm = c.Argv
		}
	}
	if mm == nil {
		t.Fatal("plan has no mmdebstrap command")
	}
	joined := strings.Join(mm, "\n")
	for _, want := range []string{
		"--include=cloud-init=22.4.2-1+deb12u4,",
		",nvidia-driver=" + driver + ",",
		"--components=main,contrib,non-free,non-free-firmware",
		// It installs from the local repository of the locked .debs only.
		"\ndeb [trusted=yes] copy:///out/.debian-12-nvidia.work/repo ./",
		"systemctl enable ingot-firstboot.service",
		// DKMS signs nothing and makes no key; the image keeps that setting.
		"--setup-hook=upload /out/.debian-12-nvidia.work/dkms.conf /etc/dkms/framework.conf.d/ingot.conf",
		"--customize-hook=upload /out/.debian-12-nvidia.work/dkms.final /etc/dkms/framework.conf.d/ingot.conf",
		// The CUDA samples: Debian's package unpacked, built, removed.
		`--customize-hook=dpkg-deb -x /out/.debian-12-nvidia.work/src/cuda-samples "$1/usr/local/src/cuda-samples"`,
		`--customize-hook=unshare --pid --fork chroot "$1" env -i`,
		`--customize-hook=rm -rf "$1/usr/local/src/cuda-samples"`,
		"--customize-hook=upload /out/.debian-12-nvidia.work/sources.list /etc/apt/sources.list",
		// upload does not carry the mode: the reporter must be executable.
		`--customize-hook=chmod 0755 "$1/usr/local/sbin/ingot-firstboot"`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("mmdebstrap command lacks %q:\n%s", want, joined)
		}
	}
	final, err := s.finalSources(map[string]string{"bookworm": "http://mirror.invalid/other", "bookworm-updates": "http://mirror.invalid/debian",
		"bookworm-security": "http://security.invalid/debian-security"}, nil)
	if err != nil || !slices.Contains(final, "deb http://security.invalid/debian-security bookworm-security main contrib non-free non-free-firmware") {
		t.Errorf("the image's own apt sources: %q, %v", final, err)
	}
	if strings.Contains(string(pinPreferences(s)), "Package: nvidia-driver\nPin: version "+driver+"\nPin-Priority: 1001\n") == false {
		t.Errorf("apt preferences do not pin nvidia-driver:\n%s", pinPreferences(s))
	}
	var text strings.Builder
	for _, c := range p.Commands {
		text.WriteString(c.String() + "\n")
	}
	golden := filepath.Join("testdata", "plan-debian-12-nvidia.txt")
	if os.Getenv("UPDATE_TESTDATA") != "" {
		os.WriteFile(golden, []byte(text.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if d := cmp.Diff(string(want), text.String()); d != "" {
		t.Errorf("plan differs from %s (-want +got; UPDATE_TESTDATA=1 refreshes):\n%s", golden, d)
	}
}

func TestMakePlanNeedsMirror(t *testing.T) {
	s, err := Load(filepath.Join(repoRoot(t), "images", "debian-12-nvidia"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "sources.list"), []byte("deb http://mirror.invalid/debian bookworm main\n"), 0o644)
	if _, err := MakePlan(s, Options{Out: "/out", SourcesDir: dir}); err == nil || !strings.Contains(err.Error(), "no mirror for suite bookworm-updates") {
		t.Errorf("MakePlan without bookworm-updates = %v, want an error naming the suite", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(goodYAML))
	if b, err := os.ReadFile("../../images/debian-12-nvidia/image.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse("fuzz.yaml", in)
		if err == nil {
			if _, err := s.Layout(); err != nil {
				t.Fatalf("valid spec has an invalid layout: %v", err)
			}
		}
	})
}
