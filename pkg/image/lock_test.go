package image

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sumA = "3d3fdbe91d4660c873e14b092c213fe81c1da6362daa236eb25d0171eb108744"
const sumB = "14d219d01e1283261817d961dbb3895cb5b4288d0de10e0ba0632a0d993e15bf"

func TestLockRoundTrip(t *testing.T) {
	l := &Lock{Inputs: "sha256:" + sumA, Packages: []Locked{
		{Name: "zlib1g", Version: "1:1.2.13.dfsg-1", Arch: "amd64", SHA256: sumB, Size: 87000, Origin: "debian:bookworm", Filename: "pool/main/z/zlib/zlib1g_1.2.13.dfsg-1_amd64.deb"},
		{Name: "busybox-static", Version: "1:1.35.0-4+deb12u1+b1", Arch: "amd64", SHA256: sumA, Size: 928188, Origin: "host", Filename: "-"},
		{Name: "libnccl2", Version: "2.18.5-1+cuda12.2", Arch: "amd64", SHA256: sumA, Size: 1, Origin: "repo:cuda", Filename: "./libnccl2_2.18.5-1+cuda12.2_amd64.deb"},
	}}
	b := l.Format("t")
	got, err := ParseLock("packages.lock", b)
	if err != nil {
		t.Fatalf("ParseLock(Format) = %v\n%s", err, b)
	}
	sortLocked(l.Packages)
	if d := cmp.Diff(l, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if !bytes.Equal(got.Format("t"), b) {
		t.Error("Format is not stable")
	}
	if first := strings.Split(string(b), "\n")[5]; !strings.HasPrefix(first, "deb busybox-static ") {
		t.Errorf("packages not sorted by name: first is %q", first)
	}
}

func TestParseLockErrors(t *testing.T) {
	good := "inputs sha256:" + sumA + "\ndeb fio 3.33-3 amd64 " + sumB + " 500 debian:bookworm pool/main/f/fio/fio_3.33-3_amd64.deb\n"
	for _, tc := range []struct{ name, in, want string }{
		{"no inputs", "deb fio 3.33-3 amd64 " + sumB + " 500 host -\n", "lock: no inputs line"},
		{"short sha", strings.Replace(good, sumB, "abc", 1), `lock:2: fio: sha256 "abc": expected 64 lowercase hex digits`},
		{"missing field", strings.Replace(good, " 500 ", " ", 1), "lock:2: deb line with 7 fields, expected 8"},
		{"bad size", strings.Replace(good, " 500 ", " -1 ", 1), `lock:2: fio: size "-1"`},
		{"bad origin", strings.Replace(good, "debian:bookworm", "mirror", 1), `lock:2: fio: origin "mirror"`},
		{"absolute filename", strings.Replace(good, "pool/main", "/pool/main", 1), `lock:2: fio: filename "/pool/main`},
		{"twice", good + "deb fio 3.33-4 amd64 " + sumB + " 500 host -\n", "lock:3: fio:amd64 is locked twice (first on line 2)"},
		{"unknown line", good + "pin fio\n", `lock:3: expected "inputs sha256:..." once`},
		{"bad inputs", "inputs md5:x\n", `lock:1: inputs "md5:x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLock("lock", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseLock = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseLock("lock", []byte("# comment\n\n"+good)); err != nil {
		t.Errorf("ParseLock(good) = %v", err)
	}
}

// TestCheckLock: a build is refused, naming the package, when a pinned
// package is missing from the lock or locked at another version, when a
// deb: file's package is missing, and when the lock's inputs are not the
// spec's.
func TestCheckLock(t *testing.T) {
	s, err := Parse("image.yaml", []byte(strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1)+"packages: {fio: 3.33-3, iperf3: 3.12-1+deb12u1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.Dir = "images/t"
	fio := Locked{Name: "fio", Version: "3.33-3", Arch: "amd64", SHA256: sumA, Size: 1, Origin: "debian:bookworm", Filename: "pool/f.deb"}
	iperf := Locked{Name: "iperf3", Version: "3.12-1+deb12u1", Arch: "amd64", SHA256: sumB, Size: 1, Origin: "debian:bookworm-security", Filename: "pool/i.deb"}
	stub := Locked{Name: "systemd-boot-efi", Version: "252.39-1~deb12u2", Arch: "amd64", SHA256: sumA, Size: 1, Origin: "host", Filename: "-"}
	ok := &Lock{Inputs: LockInputs(s), Packages: []Locked{fio, iperf, stub}}
	if err := CheckLock(s, ok); err != nil {
		t.Fatalf("CheckLock(matching lock) = %v", err)
	}
	old := iperf
	old.Version = "3.12-1"
	for _, tc := range []struct {
		name string
		l    *Lock
		want string
	}{
		{"package not locked", &Lock{Inputs: ok.Inputs, Packages: []Locked{fio, stub}}, "package iperf3=3.12-1+deb12u1 is not in images/t/packages.lock"},
		{"other version", &Lock{Inputs: ok.Inputs, Packages: []Locked{fio, old, stub}}, "package iperf3 is pinned to 3.12-1+deb12u1 but images/t/packages.lock locks 3.12-1"},
		{"no EFI stub", &Lock{Inputs: ok.Inputs, Packages: []Locked{fio, iperf}}, "systemd-boot-efi:amd64 (the EFI stub of the image's UKI) is not in images/t/packages.lock"},
		{"other inputs", &Lock{Inputs: "sha256:" + sumA, Packages: []Locked{fio, iperf, stub}}, "was written for other inputs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckLock(s, tc.l)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ingot image lock images/t") {
				t.Errorf("CheckLock = %v, want an error containing %q and how to lock", err, tc.want)
			}
		})
	}
	s.Base.Components = []string{"main", "non-free"}
	if LockInputs(s) == ok.Inputs {
		t.Error("LockInputs ignores the components")
	}
}

// TestShippedLocks: every shipped image has a lock that parses and fits
// its spec (a build would start), except an image whose repositories this
// project cannot reach (debian-12-nvidia-cuda: NVIDIA's), which a site
// locks once it configured them.
func TestShippedLocks(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(repoRoot(t), "images", "*", FileName))
	for _, f := range dirs {
		s, err := Load(filepath.Dir(f))
		if err != nil {
			t.Fatal(err)
		}
		l, err := LoadLock(s)
		if err != nil && len(s.Repositories) > 0 && errors.Is(err, os.ErrNotExist) {
			t.Logf("%s: not locked: its repositories are the site's to configure", s.Name)
			continue
		}
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if err := CheckLock(s, l); err != nil {
			t.Errorf("%v", err)
		}
	}
}

func TestLoadLockMissing(t *testing.T) {
	s := &Spec{Name: "x", Dir: t.TempDir()}
	if _, err := LoadLock(s); err == nil || !strings.Contains(err.Error(), "run `ingot image lock "+s.Dir+"`") {
		t.Errorf("LoadLock without a lock = %v, want how to write one", err)
	}
	os.WriteFile(filepath.Join(s.Dir, LockFile), []byte("deb\n"), 0o644)
	if _, err := LoadLock(s); err == nil || !strings.Contains(err.Error(), "packages.lock:1:") {
		t.Errorf("LoadLock of a bad lock = %v, want file:line", err)
	}
}

func TestInstalledPackages(t *testing.T) {
	status := "Package: fio\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.33-3\nDescription: flexible I/O tester\n continued line: with a colon\n\n" +
		"Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n\n" +
		"Package: tzdata\nStatus: install ok installed\nArchitecture: all\nVersion: 2025b-0+deb12u1\n"
	got, err := installedPackages(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Locked{
		"fio=3.33-3:amd64":           {Name: "fio", Version: "3.33-3", Arch: "amd64"},
		"tzdata=2025b-0+deb12u1:all": {Name: "tzdata", Version: "2025b-0+deb12u1", Arch: "all"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("installedPackages (-want +got):\n%s", d)
	}
	if _, err := installedPackages(strings.NewReader("Package fio\n")); err == nil {
		t.Error("a line without a colon was accepted")
	}
}

func TestDKMSMissing(t *testing.T) {
	for _, tc := range []struct{ name, status, want string }{
		{"installed", "nvidia-current/535.309.01, 6.1.0-57-amd64, x86_64: installed\n", ""},
		{"only added", "nvidia-current/535.309.01: added\n", "nvidia-current/535.309.01 is not installed"},
		{"other kernel", "nvidia-current/535.309.01, 6.1.0-58-amd64, x86_64: installed\n", "nvidia-current/535.309.01 is not installed"},
		{"built not installed", "nvidia-current/535.309.01, 6.1.0-57-amd64, x86_64: built\n", "nvidia-current/535.309.01 is not installed"},
		{"none", "", ""},
	} {
		if got := dkmsMissing([]byte(tc.status), "6.1.0-57-amd64"); got != tc.want {
			t.Errorf("%s: dkmsMissing = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestParseColonFingerprints(t *testing.T) {
	// gpg --with-colons --show-keys of a key with a signing subkey
	// (record layout from gpg's doc/DETAILS).
	out := "pub:-:3072:1:A4B469963BF863CC:1650000000:::-:::scSC::::::23::0:\n" +
		"fpr:::::::::EB693B3035CD5710E231E123A4B469963BF863CC:\n" +
		"uid:-::::1650000000::ABCDEF::cudatools <cudatools@nvidia.com>::::::::::0:\n" +
		"sub:-:3072:1:1111111111111111:1650000000::::::s::::::23:\n" +
		"fpr:::::::::0000000000000000000000001111111111111111:\n"
	if d := cmp.Diff([]string{"EB693B3035CD5710E231E123A4B469963BF863CC"}, parseColonFingerprints([]byte(out))); d != "" {
		t.Errorf("fingerprints (-want +got):\n%s", d)
	}
}

func FuzzParseLock(f *testing.F) {
	f.Add([]byte("inputs sha256:" + sumA + "\ndeb fio 3.33-3 amd64 " + sumB + " 500 debian:bookworm pool/main/f/fio.deb\n"))
	if b, err := os.ReadFile("../../images/lab/packages.lock"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := ParseLock("fuzz", in)
		if err != nil {
			return
		}
		again, err := ParseLock("fuzz", l.Format("fuzz"))
		if err != nil {
			t.Fatalf("a parsed lock does not parse again: %v", err)
		}
		if !bytes.Equal(again.Format("fuzz"), l.Format("fuzz")) {
			t.Fatal("Format(Parse(Format(l))) differs")
		}
	})
}

func FuzzReadStanzas(f *testing.F) {
	f.Add([]byte("Package: fio\nVersion: 3.33-3\nSHA256: " + sumA + "\n\nPackage: x\n continuation\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		readStanzas(bytes.NewReader(in), func(st map[string]string) {
			if len(st) == 0 {
				t.Fatal("an empty stanza was delivered")
			}
		})
	})
}

func TestMountsUnder(t *testing.T) {
	info := "22 1 0:21 / /proc rw - proc proc rw\n" +
		"90 60 0:5 / /build/.img.work/root/proc rw - proc proc rw\n" +
		"91 60 0:6 /null /build/.img.work/root/dev/null rw - devtmpfs udev rw\n" +
		"92 60 0:7 / /build/.img.work/root/with\\040space rw - tmpfs tmpfs rw\n" +
		"93 60 0:8 / /build/.img.work-other/root/proc rw - proc proc rw\n"
	got := mountsUnder(info, "/build/.img.work")
	want := []string{"/build/.img.work/root/proc", "/build/.img.work/root/dev/null", "/build/.img.work/root/with space"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("mountsUnder (-want +got):\n%s", d)
	}
}

func TestOriginOf(t *testing.T) {
	mirrors := map[string]string{"bookworm": "http://deb.debian.org/debian", "bookworm-updates": "http://deb.debian.org/debian",
		"bookworm-security": "http://deb.debian.org/debian-security/"}
	for _, tc := range []struct{ url, origin, file string }{
		{"http://deb.debian.org/debian/pool/main/b/busybox/busybox-static_1.35.0-4%2bdeb12u1%2bb1_amd64.deb", "debian:bookworm", "pool/main/b/busybox/busybox-static_1.35.0-4+deb12u1+b1_amd64.deb"},
		{"http://deb.debian.org/debian-security/pool/updates/main/l/linux-signed-amd64/linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb", "debian:bookworm-security", "pool/updates/main/l/linux-signed-amd64/linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"},
		{"http://other.invalid/debian/pool/main/f/fio/fio_3.33-3_amd64.deb", "host", "-"},
		{"http://deb.debian.org/debian/../etc/x.deb", "host", "-"},
	} {
		if o, f := originOf(tc.url, mirrors); o != tc.origin || f != tc.file {
			t.Errorf("originOf(%s) = %s %s, want %s %s", tc.url, o, f, tc.origin, tc.file)
		}
	}
}
