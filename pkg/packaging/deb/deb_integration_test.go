//go:build integration

package deb

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// gitOut runs git in the repository.
func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// The same commit gives the same bytes: a second `make deb` from a copy of
// the sources elsewhere (no .git: as from a source tarball), under another
// umask, time zone and locale, writes identical packages.
func TestIntegrationDebReproducible(t *testing.T) {
	netnstest.Need(t, "make", "git", "dpkg-deb")
	first := builtDebs(t)
	root := repoRoot(t)
	copyDir := filepath.Join(t.TempDir(), "src")
	for _, f := range strings.Split(gitOut(t, "ls-files", "-z", "-co", "--exclude-standard"), "\x00") {
		if f == "" {
			continue
		}
		if err := copyFile(filepath.Join(root, f), filepath.Join(copyDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.CommandContext(ctx, "sh", "-c", `umask 077; exec make -s deb DEB_OUT="$1" VERSION="$2" COMMIT="$3" SOURCE_DATE_EPOCH="$4"`, "sh",
		out, gitOut(t, "describe", "--tags", "--always", "--dirty"), gitOut(t, "rev-parse", "HEAD"), gitOut(t, "log", "-1", "--format=%ct"))
	cmd.Dir, cmd.Env = copyDir, append(os.Environ(), "TZ=Pacific/Auckland", "LC_ALL=C")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make deb in the copy: %v\n%s", err, b)
	}
	t.Logf("second make deb, in %s: %v", copyDir, time.Since(start).Round(time.Second))
	for arch, a := range first {
		m, _ := filepath.Glob(filepath.Join(out, "ingot_*_"+arch+".deb"))
		if len(m) != 1 {
			t.Fatalf("second build wrote %v for %s", m, arch)
		}
		ab, _ := os.ReadFile(a)
		bb, _ := os.ReadFile(m[0])
		if filepath.Base(a) != filepath.Base(m[0]) || !bytes.Equal(ab, bb) {
			t.Errorf("%s: %s (%d bytes) and %s (%d bytes) differ", arch, a, len(ab), m[0], len(bb))
		}
	}
}

// copyFile copies a file or symlink, making its folder; a file deleted in
// the working tree is skipped.
func copyFile(src, dst string) error {
	st, err := os.Lstat(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}

// dpkg-deb lists every file with its owner, mode and the commit's time.
func TestIntegrationDebContents(t *testing.T) {
	netnstest.Need(t, "dpkg-deb", "git")
	epoch, _ := strconv.ParseInt(gitOut(t, "log", "-1", "--format=%ct"), 10, 64)
	when := time.Unix(epoch, 0).UTC().Format("2006-01-02 15:04")
	const dir, file, exe = "drwxr-xr-x root/root", "-rw-r--r-- root/root", "-rwxr-xr-x root/root"
	want := map[string]string{"./": dir, "./etc/": dir, "./etc/ingot/": dir, "./etc/ingot/ingot.yaml": file, "./etc/ingot/recipes/": dir,
		"./lib/": dir, "./lib/systemd/": dir, "./lib/systemd/system/": dir, "./lib/systemd/system/ingot.service": file,
		"./usr/": dir, "./usr/bin/": dir, "./usr/bin/ingot": exe, "./usr/lib/": dir, "./usr/lib/ingot/": dir, "./usr/lib/ingot/ingot-agent": exe,
		"./usr/lib/sysusers.d/": dir, "./usr/lib/sysusers.d/ingot.conf": file, "./usr/lib/tmpfiles.d/": dir, "./usr/lib/tmpfiles.d/ingot.conf": file,
		"./usr/share/": dir, "./usr/share/bash-completion/": dir, "./usr/share/bash-completion/completions/": dir,
		"./usr/share/bash-completion/completions/ingot": file, "./usr/share/doc/": dir, "./usr/share/doc/ingot/": dir,
		"./usr/share/doc/ingot/changelog.gz": file, "./usr/share/doc/ingot/copyright": file, "./usr/share/lintian/": dir,
		"./usr/share/lintian/overrides/": dir, "./usr/share/lintian/overrides/ingot": file,
		"./usr/share/man/": dir, "./usr/share/man/man1/": dir, "./usr/share/man/man1/ingot.1.gz": file}
	for arch, deb := range builtDebs(t) {
		cmd := exec.Command("dpkg-deb", "--contents", deb)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dpkg-deb --contents %s: %v", deb, err)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l) // mode owner size date time path
			if len(f) != 6 || f[3]+" "+f[4] != when {
				t.Errorf("%s: line %q: want 6 fields dated %s", arch, l, when)
				continue
			}
			got[f[5]] = f[0] + " " + f[1]
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: contents (-want +got):\n%s", arch, d)
		}
		fields, _ := exec.Command("dpkg-deb", "--field", deb, "Architecture", "Depends").Output()
		if !strings.Contains(string(fields), "Architecture: "+arch) || !strings.Contains(string(fields), "ipxe") {
			t.Errorf("%s: fields %q", arch, fields)
		}
		conf, _ := exec.Command("sh", "-c", `dpkg-deb --ctrl-tarfile "$1" | tar -xOf - ./conffiles`, "sh", deb).Output()
		if string(conf) != "/etc/ingot/ingot.yaml\n" {
			t.Errorf("%s: conffiles %q", arch, conf)
		}
	}
}

// lintian, Debian's package checker, finds no error and no warning in
// either package (one run: its start-up is most of its time).
func TestIntegrationDebLintian(t *testing.T) {
	netnstest.Need(t, "lintian")
	args := []string{"--fail-on", "error,warning"}
	for _, deb := range builtDebs(t) {
		args = append(args, deb)
	}
	start := time.Now()
	out, err := exec.Command("lintian", args...).CombinedOutput()
	t.Logf("lintian (%v):\n%s", time.Since(start).Round(time.Second), out)
	if err != nil || regexp.MustCompile(`(?m)^[EW]: `).Match(out) {
		t.Errorf("lintian: %v", err)
	}
}
