package initramfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

func testArchive(t *testing.T) *Archive {
	t.Helper()
	var a Archive
	for _, err := range []error{
		a.AddFile("/init", 0o755, []byte("#!/bin/sh\necho hi\n")),
		a.AddFile("etc/ingot/modules", 0o644, []byte("/lib/modules/x/a.ko\n")),
		a.AddFile("lib/modules/6.1.0/kernel/drivers/a.ko", 0o644, []byte("abc")),
		a.AddSymlink("bin/sh", "busybox"),
		a.AddDir("dev", 0o755),
		a.AddFile("empty", 0o600, nil),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return &a
}

func TestWriteReadRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := testArchive(t).WriteTo(&b, 1700000000); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got {
		if e.MTime != 1700000000 {
			t.Errorf("%s mtime %d, want 1700000000", e.Name, e.MTime)
		}
		lines = append(lines, e.String())
	}
	want := []string{
		"drwxr-xr-x         0 bin",
		"lrwxrwxrwx         7 bin/sh -> busybox",
		"drwxr-xr-x         0 dev",
		"-rw-------         0 empty",
		"drwxr-xr-x         0 etc",
		"drwxr-xr-x         0 etc/ingot",
		"-rw-r--r--        20 etc/ingot/modules",
		"-rwxr-xr-x        18 init",
		"drwxr-xr-x         0 lib",
		"drwxr-xr-x         0 lib/modules",
		"drwxr-xr-x         0 lib/modules/6.1.0",
		"drwxr-xr-x         0 lib/modules/6.1.0/kernel",
		"drwxr-xr-x         0 lib/modules/6.1.0/kernel/drivers",
		"-rw-r--r--         3 lib/modules/6.1.0/kernel/drivers/a.ko",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
}

func TestReproducible(t *testing.T) {
	var a, b bytes.Buffer
	if err := testArchive(t).WriteTo(&a, 0); err != nil {
		t.Fatal(err)
	}
	// Same entries added in another order give the same bytes.
	var other Archive
	other.AddFile("empty", 0o600, nil)
	other.AddDir("dev", 0o755)
	other.AddSymlink("bin/sh", "busybox")
	other.AddFile("lib/modules/6.1.0/kernel/drivers/a.ko", 0o644, []byte("abc"))
	other.AddFile("etc/ingot/modules", 0o644, []byte("/lib/modules/x/a.ko\n"))
	other.AddFile("init", 0o755, []byte("#!/bin/sh\necho hi\n"))
	if err := other.WriteTo(&b, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("same entries in another order gave different archives (%d vs %d bytes)", a.Len(), b.Len())
	}
	for _, c := range []Compression{Gzip, Zstd, None} {
		var x, y bytes.Buffer
		if err := Compress(&x, a.Bytes(), c); err != nil {
			t.Fatal(err)
		}
		if err := Compress(&y, a.Bytes(), c); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			t.Errorf("%s: two compressions differ", c)
		}
		r, err := Decompress(bytes.NewReader(x.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		entries, err := Read(r)
		if err != nil || len(entries) != 14 {
			t.Errorf("%s: read back %d entries, err %v; want 14", c, len(entries), err)
		}
	}
}

// TestRealCpioLists checks the archive with GNU cpio, the reference reader.
func TestRealCpioLists(t *testing.T) {
	netnstest.NeedPrograms(t, "cpio")
	var b bytes.Buffer
	if err := testArchive(t).WriteTo(&b, 0); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-idm", "--quiet", "--no-absolute-filenames")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(b.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, out)
	}
	list := exec.Command("cpio", "-t", "--quiet")
	list.Stdin = bytes.NewReader(b.Bytes())
	out, err := list.Output()
	if err != nil {
		t.Fatalf("cpio -t: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != 14 || got[0] != "bin" || got[len(got)-1] != "lib/modules/6.1.0/kernel/drivers/a.ko" {
		t.Errorf("cpio -t listed %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "init")); err != nil || string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("extracted init = %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || l != "busybox" {
		t.Errorf("extracted bin/sh -> %q, %v", l, err)
	}
}

func TestReadErrors(t *testing.T) {
	var good bytes.Buffer
	testArchive(t).WriteTo(&good, 0)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "header at offset 0"},
		{"bad magic", strings.Repeat("x", 120), `magic "xxxxxx"`},
		{"not hex", "070701" + strings.Repeat("g", 104), "not hexadecimal"},
		{"truncated", good.String()[:300], "malformed newc cpio"},
		{"no trailer", good.String()[:good.Len()-124], "header at offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAddRejectsRoot(t *testing.T) {
	var a Archive
	if err := a.AddFile("/", 0o644, nil); err == nil {
		t.Error("AddFile(/) succeeded, want an error")
	}
}

func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	var a Archive
	a.AddFile("init", 0o755, []byte("x"))
	a.AddSymlink("bin/sh", "busybox")
	a.WriteTo(&b, 0)
	f.Add(b.Bytes())
	f.Add([]byte("070701"))
	f.Fuzz(func(t *testing.T, in []byte) {
		entries, err := Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		// What parses must survive a rewrite and parse to the same entries.
		var re Archive
		for _, e := range entries {
			if _, err := cleanName(e.Name); err != nil {
				return
			}
		}
		for _, e := range entries {
			n, _ := cleanName(e.Name)
			re.add(n, e.Mode, e.Data)
		}
		var out bytes.Buffer
		if err := re.WriteTo(&out, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(&out); err != nil {
			t.Fatalf("rewritten archive does not parse: %v", err)
		}
	})
}

func TestParseKernelDepends(t *testing.T) {
	out := []byte("linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n")
	got, err := parseKernelDepends(out)
	if err != nil || got != "linux-image-6.1.0-57-amd64" {
		t.Errorf("parseKernelDepends = %q, %v", got, err)
	}
	if _, err := parseKernelDepends([]byte("linux-image-amd64\n")); err == nil {
		t.Error("parseKernelDepends without a Depends line succeeded")
	}
	// A foreign architecture's dependency comes back qualified.
	out = []byte("linux-image-arm64:arm64\n  Depends: linux-image-6.1.0-57-arm64:arm64\n")
	if got, err := parseKernelDepends(out); err != nil || got != "linux-image-6.1.0-57-arm64:arm64" {
		t.Errorf("parseKernelDepends(arm64) = %q, %v", got, err)
	}
}

// A package already downloaded is found by name and, when one is asked
// for, architecture (apt-get download names it NAME_VERSION_ARCH.deb,
// escaping an epoch's colon): no apt-get run.
func TestDownloadFindsCached(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"busybox-static_1%3a1.35.0-4+deb12u1_amd64.deb", "busybox-static_1%3a1.35.0-4+deb12u1+b1_arm64.deb",
		"linux-image-6.1.0-57-arm64_6.1.192-3_arm64.deb"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	for pkg, want := range map[string]string{
		"busybox-static:arm64":             "busybox-static_1%3a1.35.0-4+deb12u1+b1_arm64.deb",
		"busybox-static:amd64":             "busybox-static_1%3a1.35.0-4+deb12u1_amd64.deb",
		"linux-image-6.1.0-57-arm64:arm64": "linux-image-6.1.0-57-arm64_6.1.192-3_arm64.deb",
	} {
		got, err := download(context.Background(), dir, pkg)
		if err != nil || filepath.Base(got) != want {
			t.Errorf("download(%s) = %s, %v; want %s", pkg, got, err, want)
		}
	}
}

func TestBuildReproducible(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	os.WriteFile(agent, []byte("\x7fELF fake agent"), 0o755)
	extra := filepath.Join(dir, "extra.conf")
	os.WriteFile(extra, []byte("k=v\n"), 0o644)
	spec := Spec{Agent: agent, Extra: map[string]string{"etc/x.conf": extra}, ExtraData: map[string][]byte{"bin/hello": []byte("#!/bin/sh\n")}}
	var kernelRoot string
	// This machine's architecture: the cache may also hold the arm64 lab's.
	if m, _ := filepath.Glob("/var/cache/ingot/kernel/*/root/boot/vmlinuz-*-" + runtime.GOARCH); len(m) > 0 {
		kernelRoot = filepath.Dir(filepath.Dir(m[0]))
		// A small set keeps this fast under -race; the integration test
		// builds the full DefaultModules set.
		spec.KernelPkgDir, spec.Modules = kernelRoot, []string{"virtio_net", "e1000"}
	} else {
		t.Log("no unpacked kernel in /var/cache/ingot/kernel: building without modules")
	}
	var a, b bytes.Buffer
	ra, err := Build(context.Background(), spec, &a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), spec, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two builds of the same spec differ")
	}
	r, err := Decompress(&a)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Read(r)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]Entry{}
	for _, e := range entries {
		files[e.Name] = e
	}
	if e := files["init"]; e.Mode != 0o100755 || string(e.Data) != "\x7fELF fake agent" {
		t.Errorf("init = %o %q", e.Mode, e.Data)
	}
	if e := files["bin/hello"]; e.Mode != 0o100755 {
		t.Errorf("bin/hello mode %o, want 100755", e.Mode)
	}
	if kernelRoot != "" {
		list := strings.Fields(string(files[ModulesList].Data))
		if d := cmp.Diff(ra.Modules, list); d != "" || len(list) < 5 {
			t.Errorf("%s (-result +file), %d modules:\n%s", ModulesList, len(list), d)
		}
		for _, p := range list {
			if _, ok := files[strings.TrimPrefix(p, "/")]; !ok {
				t.Errorf("%s lists %s, not in the archive", ModulesList, p)
			}
		}
	}
}
