package image

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleSigningArgv: with the site's key, DKMS signs with it during
// the build and the key leaves the root before it becomes a file system;
// the image always keeps the configuration that signs nothing and makes no
// key.
func TestModuleSigningArgv(t *testing.T) {
	s, err := Parse("image.yaml", []byte(strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1)+"packages: {nvidia-kernel-dkms: 535.309.01-0+deb12u1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := t.TempDir()
	d := debianRun{s: s, work: w, root: filepath.Join(w, "root"), sources: []string{"deb [trusted=yes] copy:///r ./"},
		signKey: "/site/module.key", signCert: "/site/module.crt"}
	argv := strings.Join(d.argv(), "\n")
	for _, want := range []string{
		"--setup-hook=upload /site/module.key /run/ingot-module-signing/signing.key",
		"--setup-hook=upload /site/module.crt /run/ingot-module-signing/signing.crt",
		`--customize-hook=rm -rf "$1/run/ingot-module-signing"`,
		"--customize-hook=upload " + filepath.Join(w, "dkms.final") + " /etc/dkms/framework.conf.d/ingot.conf",
	} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv lacks %q:\n%s", want, argv)
		}
	}
	if err := d.prepare(IDs{}); err != nil {
		t.Fatal(err)
	}
	conf, _ := os.ReadFile(filepath.Join(w, "dkms.conf"))
	final, _ := os.ReadFile(filepath.Join(w, "dkms.final"))
	if !strings.Contains(string(conf), "mok_signing_key=/run/ingot-module-signing/signing.key") || !strings.Contains(string(final), "sign_file=/nonexistent/") {
		t.Errorf("build-time DKMS configuration:\n%s\nimage's:\n%s", conf, final)
	}
	d.signKey, d.signCert = "", ""
	if argv := strings.Join(d.argv(), "\n"); strings.Contains(argv, "signing.key") {
		t.Errorf("no site key, yet a key is uploaded:\n%s", argv)
	}
}

// TestCheckRootRefuses: a root with a package outside the lock, a DKMS
// key, a build step's missing output, or a DKMS module not built for its
// kernel is refused, naming it.
func TestCheckRootRefuses(t *testing.T) {
	s, err := Parse("image.yaml", []byte(strings.Replace(goodYAML, "kind: pieces", "kind: debian, release: bookworm", 1)+
		"packages: {fio: 3.33-3}\nbuild_steps: [{name: tools, run: 'true', installs: [/usr/local/bin/tool]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := &Lock{Packages: []Locked{{Name: "fio", Version: "3.33-3", Arch: "amd64"}}}
	root := func(status string, files ...string) string {
		r := t.TempDir()
		os.MkdirAll(filepath.Join(r, "var/lib/dpkg"), 0o755)
		os.WriteFile(filepath.Join(r, "var/lib/dpkg/status"), []byte(status), 0o644)
		for _, f := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(r, f)), 0o755)
			os.WriteFile(filepath.Join(r, f), []byte("x"), 0o600)
		}
		return r
	}
	fio := "Package: fio\nStatus: install ok installed\nVersion: 3.33-3\nArchitecture: amd64\n\n"
	extra := fio + "Package: curl\nStatus: install ok installed\nVersion: 7.88.1-10+deb12u12\nArchitecture: amd64\n"
	for name, tc := range map[string]struct{ root, want string }{
		"clean":            {root(fio, "/usr/local/bin/tool"), ""},
		"unlocked":         {root(extra, "/usr/local/bin/tool"), "installed packages not in packages.lock: curl=7.88.1-10+deb12u12:amd64"},
		"dkms key":         {root(fio, "/usr/local/bin/tool", "/var/lib/dkms/mok.key"), "a private key is in the image"},
		"step output":      {root(fio), "build step tools did not install /usr/local/bin/tool"},
		"signing key left": {root(fio, "/usr/local/bin/tool", "/run/ingot-module-signing/signing.key"), "a private key is in the image"},
		"dkms built":       {dkmsRoot(t, root(fio, "/usr/local/bin/tool", "/usr/sbin/dkms", "/lib/modules/6.1.0-57-amd64/modules.dep"), "nvidia-current/535.309.01, 6.1.0-57-amd64, x86_64: installed\n"), ""},
		"dkms not built":   {dkmsRoot(t, root(fio, "/usr/local/bin/tool", "/usr/sbin/dkms", "/lib/modules/6.1.0-57-amd64/modules.dep"), "nvidia-current/535.309.01: added\n"), "DKMS did not build for kernel 6.1.0-57-amd64: nvidia-current/535.309.01 is not installed"},
		"dkms no status":   {root(fio, "/usr/local/bin/tool", "/usr/sbin/dkms"), "DKMS is installed but its status was not recorded"},
	} {
		err := checkRoot(s, l, tc.root)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: checkRoot = %v, want %q", name, err, tc.want)
		}
	}
}

// dkmsRoot moves root to work/root and writes what dkms status said
// beside it, as a build leaves them; it returns the new root.
func dkmsRoot(t *testing.T, root, status string) string {
	work := t.TempDir()
	if err := os.Rename(root, filepath.Join(work, "root")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(work, "dkms-status"), []byte(status), 0o644)
	return filepath.Join(work, "root")
}
