package debpkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var epoch = time.Unix(1700000000, 0)

func samplePackage() *Package {
	return &Package{
		Control: Control{Package: "ingot", Version: "1.2.0+git20261202.5.abc1234", Architecture: "amd64",
			Maintainer: "ingot maintainers <m@example.org>", Section: "net", Priority: "optional",
			Depends: []string{"ipxe", "systemd"}, Recommends: []string{"xorriso"},
			Description: "provisioning server\nBoots machines.\n\nSecond paragraph."},
		Files: []File{
			{Path: "/usr/bin/ingot", Mode: 0o755, Body: []byte("binary")},
			{Path: "/etc/ingot/ingot.yaml", Mode: 0o644, Body: []byte("dhcp: off\n"), Conffile: true},
			{Path: "/usr/share/doc/ingot/copyright", Mode: 0o644, Body: []byte("c")},
			{Path: "/etc/ingot/recipes", Mode: fs.ModeDir | 0o755},
			{Path: "/usr/sbin/ingotd", Mode: fs.ModeSymlink | 0o777, Link: "../bin/ingot"},
		},
		Scripts: map[string][]byte{"postinst": []byte("#!/bin/sh\nset -e\n"), "prerm": []byte("#!/bin/sh\nset -e\n")},
		MTime:   epoch,
	}
}

func build(t *testing.T, p *Package) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAr splits an ar archive into its members, checking each header.
func readAr(t *testing.T, b []byte) (names []string, bodies map[string][]byte) {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		t.Fatal("no ar magic")
	}
	b, bodies = b[8:], map[string][]byte{}
	for len(b) > 0 {
		h := string(b[:60])
		name := strings.TrimSpace(h[:16])
		if mtime := strings.TrimSpace(h[16:28]); mtime != "1700000000" || strings.TrimSpace(h[28:34]) != "0" ||
			strings.TrimSpace(h[34:40]) != "0" || strings.TrimSpace(h[40:48]) != "100644" || h[58:60] != "`\n" {
			t.Errorf("ar header %q", h)
		}
		size, _ := strconv.Atoi(strings.TrimSpace(h[48:58]))
		names, bodies[name] = append(names, name), b[60:60+size]
		b = b[60+size+size%2:]
	}
	return names, bodies
}

// listTar lists a tar.gz as "mode owner mtime name[ -> link]" lines and
// returns the regular files' contents.
func listTar(t *testing.T, b []byte) ([]string, map[string]string) {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header carries name %q, time %v", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var lines []string
	bodies := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return lines, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		l := fmt.Sprintf("%v %s/%s %d:%d %d %s", h.FileInfo().Mode(), h.Uname, h.Gname, h.Uid, h.Gid, h.ModTime.Unix(), h.Name)
		if h.Linkname != "" {
			l += " -> " + h.Linkname
		}
		lines = append(lines, l)
		body, _ := io.ReadAll(tr)
		bodies[h.Name] = string(body)
	}
}

func TestWrite(t *testing.T) {
	deb := build(t, samplePackage())
	names, members := readAr(t, deb)
	if d := cmp.Diff([]string{"debian-binary", "control.tar.gz", "data.tar.gz"}, names); d != "" {
		t.Errorf("members (-want +got):\n%s", d)
	}
	if string(members["debian-binary"]) != "2.0\n" {
		t.Errorf("debian-binary %q", members["debian-binary"])
	}
	data, _ := listTar(t, members["data.tar.gz"])
	want := []string{
		"drwxr-xr-x root/root 0:0 1700000000 ./",
		"drwxr-xr-x root/root 0:0 1700000000 ./etc/",
		"drwxr-xr-x root/root 0:0 1700000000 ./etc/ingot/",
		"-rw-r--r-- root/root 0:0 1700000000 ./etc/ingot/ingot.yaml",
		"drwxr-xr-x root/root 0:0 1700000000 ./etc/ingot/recipes/",
		"drwxr-xr-x root/root 0:0 1700000000 ./usr/",
		"drwxr-xr-x root/root 0:0 1700000000 ./usr/bin/",
		"-rwxr-xr-x root/root 0:0 1700000000 ./usr/bin/ingot",
		"drwxr-xr-x root/root 0:0 1700000000 ./usr/sbin/",
		"Lrwxrwxrwx root/root 0:0 1700000000 ./usr/sbin/ingotd -> ../bin/ingot",
		"drwxr-xr-x root/root 0:0 1700000000 ./usr/share/",
		"drwxr-xr-x root/root 0:0 1700000000 ./usr/share/doc/",
		"drwxr-xr-x root/root 0:0 1700000000 ./usr/share/doc/ingot/",
		"-rw-r--r-- root/root 0:0 1700000000 ./usr/share/doc/ingot/copyright",
	}
	if d := cmp.Diff(want, data); d != "" {
		t.Errorf("data.tar.gz (-want +got):\n%s", d)
	}
	control, bodies := listTar(t, members["control.tar.gz"])
	if d := cmp.Diff([]string{
		"drwxr-xr-x root/root 0:0 1700000000 ./", "-rw-r--r-- root/root 0:0 1700000000 ./conffiles",
		"-rw-r--r-- root/root 0:0 1700000000 ./control", "-rw-r--r-- root/root 0:0 1700000000 ./md5sums",
		"-rwxr-xr-x root/root 0:0 1700000000 ./postinst", "-rwxr-xr-x root/root 0:0 1700000000 ./prerm",
	}, control); d != "" {
		t.Errorf("control.tar.gz (-want +got):\n%s", d)
	}
	wantControl := `Package: ingot
Version: 1.2.0+git20261202.5.abc1234
Architecture: amd64
Maintainer: ingot maintainers <m@example.org>
Installed-Size: 13
Depends: ipxe, systemd
Recommends: xorriso
Section: net
Priority: optional
Description: provisioning server
 Boots machines.
 .
 Second paragraph.
`
	if d := cmp.Diff(wantControl, bodies["./control"]); d != "" {
		t.Errorf("control (-want +got):\n%s", d)
	}
	// md5sums: every regular file but conffiles (md5 of "binary" and "c").
	if d := cmp.Diff("9d7183f16acce70658f686ae7f1a4d20  usr/bin/ingot\n4a8a08f09d37b73795649038408b5f33  usr/share/doc/ingot/copyright\n", bodies["./md5sums"]); d != "" {
		t.Errorf("md5sums (-want +got):\n%s", d)
	}
	if bodies["./conffiles"] != "/etc/ingot/ingot.yaml\n" {
		t.Errorf("conffiles %q", bodies["./conffiles"])
	}
}

// The same package gives the same bytes, in whatever order its files come.
func TestReproducible(t *testing.T) {
	a := build(t, samplePackage())
	p := samplePackage()
	for i, j := 0, len(p.Files)-1; i < j; i, j = i+1, j-1 {
		p.Files[i], p.Files[j] = p.Files[j], p.Files[i]
	}
	if !bytes.Equal(a, build(t, p)) {
		t.Error("reordered files give other bytes")
	}
	p.MTime = epoch.Add(time.Second)
	if bytes.Equal(a, build(t, p)) {
		t.Error("another SOURCE_DATE_EPOCH gives the same bytes: the time is not in the package")
	}
	if got := samplePackage().FileName(); got != "ingot_1.2.0+git20261202.5.abc1234_amd64.deb" {
		t.Errorf("FileName() = %q", got)
	}
}

func TestRefusals(t *testing.T) {
	tests := map[string]func(*Package){
		"relative path":     func(p *Package) { p.Files[0].Path = "usr/bin/ingot" },
		"unclean path":      func(p *Package) { p.Files[0].Path = "/usr/bin/../bin/ingot" },
		"twice":             func(p *Package) { p.Files = append(p.Files, p.Files[0]) },
		"conffile not /etc": func(p *Package) { p.Files[0].Conffile = true },
		"file in a file":    func(p *Package) { p.Files = append(p.Files, File{Path: "/usr/bin/ingot/x", Mode: 0o644}) },
		"version":           func(p *Package) { p.Control.Version = "abc1234" },
		"name":              func(p *Package) { p.Control.Package = "Ingot" },
		"no description":    func(p *Package) { p.Control.Description = " " },
		"unknown script":    func(p *Package) { p.Scripts["config"] = []byte("#!/bin/sh\n") },
		"device":            func(p *Package) { p.Files = append(p.Files, File{Path: "/dev/x", Mode: fs.ModeDevice | 0o600}) },
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			p := samplePackage()
			mod(p)
			if err := p.Write(io.Discard); err == nil {
				t.Error("Write accepted it")
			}
		})
	}
}

func TestVersion(t *testing.T) {
	commit := time.Date(2026, 12, 2, 9, 11, 10, 0, time.UTC)
	tests := map[string]string{
		"v1.2.0":                  "1.2.0",
		"v1.2.0-5-gabc1234":       "1.2.0+git20261202.5.abc1234",
		"v1.2.0-5-gabc1234-dirty": "1.2.0+git20261202.5.abc1234+dirty",
		"ea9cf9d":                 "0.0~git20261202.ea9cf9d",
		"1234abc":                 "0.0~git20261202.1234abc",
		"ea9cf9d-dirty":           "0.0~git20261202.ea9cf9d+dirty",
		"0.3":                     "0.3",
	}
	for in, want := range tests {
		if got, err := Version(in, commit); err != nil || got != want {
			t.Errorf("Version(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "release-one", "v1.2.0-rc1"} {
		if got, err := Version(bad, commit); err == nil {
			t.Errorf("Version(%q) = %q, want an error", bad, got)
		}
	}
	// Untagged builds sort before the first release, later commits after earlier ones.
	if !(strings.Compare("0.0~git20261202.ea9cf9d", "1.0.0") < 0) {
		t.Error("order")
	}
}
