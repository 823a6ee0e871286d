//go:build integration

package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// siteRepo is a signed apt repository the test makes and serves on
// loopback: one suite "site", component main, signed by its own key.
type siteRepo struct {
	dir, home string
	url       string
	keys      map[string]string // key name -> fingerprint
	keyFiles  map[string]string // key name -> armored public key file
}

func (sr *siteRepo) gpg(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("gpg", append([]string{"--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", ""}, args...)...)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+sr.home)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("gpg %v: %v: %s", args, err, ee.Stderr)
		}
		t.Fatalf("gpg %v: %v", args, err)
	}
	return out
}

// newSiteRepo makes two signing keys (site, other) in a temporary
// GNUPGHOME and an empty repository served over HTTP on 127.0.0.1.
func newSiteRepo(t *testing.T) *siteRepo {
	sr := &siteRepo{dir: t.TempDir(), home: t.TempDir(), keys: map[string]string{}, keyFiles: map[string]string{}}
	os.Chmod(sr.home, 0o700)
	for _, name := range []string{"site", "other"} {
		uid := fmt.Sprintf("ingot test %s repository <%s@repo.invalid>", name, name)
		sr.gpg(t, "--quick-gen-key", uid, "ed25519", "sign", "never")
		fprs := parseColonFingerprints(sr.gpg(t, "--with-colons", "--list-keys", uid))
		if len(fprs) != 1 {
			t.Fatalf("key %s: fingerprints %v", name, fprs)
		}
		sr.keys[name] = fprs[0]
		sr.keyFiles[name] = filepath.Join(t.TempDir(), name+".asc")
		os.WriteFile(sr.keyFiles[name], sr.gpg(t, "--armor", "--export", fprs[0]), 0o644)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(sr.dir)))
	t.Cleanup(srv.Close)
	sr.url = srv.URL
	return sr
}

// publish builds package name=version holding /usr/share/NAME/hello.txt
// with content, and (re)writes the suite's index signed by key.
func (sr *siteRepo) publish(t *testing.T, name, version, content, key string) {
	t.Helper()
	pkg := t.TempDir()
	os.MkdirAll(filepath.Join(pkg, "DEBIAN"), 0o755)
	os.MkdirAll(filepath.Join(pkg, "usr/share", name), 0o755)
	os.WriteFile(filepath.Join(pkg, "DEBIAN/control"), []byte(fmt.Sprintf(
		"Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: ingot tests <t@invalid>\nDescription: a site package for ingot's image tests\n", name, version)), 0o644)
	os.WriteFile(filepath.Join(pkg, "usr/share", name, "hello.txt"), []byte(content), 0o644)
	pool := filepath.Join(sr.dir, "pool/main")
	os.MkdirAll(pool, 0o755)
	run(t, "", "dpkg-deb", "--root-owner-group", "--build", pkg, filepath.Join(pool, name+"_"+version+"_amd64.deb"))
	dists := filepath.Join(sr.dir, "dists/site")
	os.MkdirAll(filepath.Join(dists, "main/binary-amd64"), 0o755)
	os.WriteFile(filepath.Join(dists, "main/binary-amd64/Packages"), run(t, sr.dir, "apt-ftparchive", "packages", "pool"), 0o644)
	rel := run(t, sr.dir, "apt-ftparchive", "-o", "APT::FTPArchive::Release::Suite=site", "-o", "APT::FTPArchive::Release::Codename=site",
		"-o", "APT::FTPArchive::Release::Components=main", "-o", "APT::FTPArchive::Release::Architectures=amd64", "release", "dists/site")
	os.WriteFile(filepath.Join(dists, "Release"), rel, 0o644)
	os.Remove(filepath.Join(dists, "InRelease"))
	sr.gpg(t, "--local-user", sr.keys[key], "--clearsign", "-o", filepath.Join(dists, "InRelease"), filepath.Join(dists, "Release"))
}

func run(t *testing.T, dir string, argv ...string) []byte {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%v: %v: %s", argv, err, ee.Stderr)
		}
		t.Fatalf("%v: %v", argv, err)
	}
	return out
}

// siteImage writes an image folder whose root is Debian's essential
// packages (bookworm, from the host's mirror) plus ingot-hello from the
// site repository, with key and fingerprint as given.
func siteImage(t *testing.T, sr *siteRepo, keyFile, fingerprint string, extra string) *Spec {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "site-image")
	os.MkdirAll(dir, 0o755)
	b, _ := os.ReadFile(keyFile)
	os.WriteFile(filepath.Join(dir, "site.asc"), b, 0o644)
	spec := fmt.Sprintf(`name: site-image
version: "1"
base: {kind: debian, release: bookworm, variant: essential}
packages: {ingot-hello: "1.0"%s}
repositories:
  - name: site
    url: %s
    suites: [site]
    components: [main]
    key: site.asc
    fingerprint: %s
partitions: {esp_size: 48MiB, root_size: 256MiB}
build: {source_date_epoch: 1700000000}
`, extra, sr.url, fingerprint)
	os.WriteFile(filepath.Join(dir, FileName), []byte(spec), 0o644)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestIntegrationImageRepository locks and builds an image root with a
// package from a signed apt repository the test makes (dpkg-deb,
// apt-ftparchive, gpg in a temporary GNUPGHOME, served on loopback):
//   - the package is pulled in from the repository, locked with origin
//     repo:site, installed, and the image's apt sources name the repository
//     with its key in /etc/apt/keyrings;
//   - a key file that is not the fingerprint's is refused before apt runs,
//     and a repository signed by another key is refused by apt, the error
//     naming the repository;
//   - after the repository republished the same version with other bytes,
//     a build that must fetch it (the pool lost it) is refused by the lock,
//     naming the package; a package added to the spec without a new lock
//     is refused, named.
func TestIntegrationImageRepository(t *testing.T) {
	netnstest.Need(t, "mmdebstrap", "apt-ftparchive", "dpkg-deb", "gpg")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sr := newSiteRepo(t)
	sr.publish(t, "ingot-hello", "1.0", "hello from the site repository\n", "site")
	pool, cache := t.TempDir(), initramfs.CacheDir(os.Getenv)
	o := Options{Out: t.TempDir(), Cache: cache, Pool: pool}

	start := time.Now()
	s := siteImage(t, sr, sr.keyFiles["site"], sr.keys["site"], "")
	l, err := LockImage(ctx, s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lock: %d packages in %s", len(l.Packages), time.Since(start).Round(time.Second))
	hello, ok := l.Find("ingot-hello", "amd64")
	if !ok || hello.Origin != "repo:site" || hello.Version != "1.0" || hello.Filename != "pool/main/ingot-hello_1.0_amd64.deb" {
		t.Fatalf("lock entry of ingot-hello = %+v (found %v), want 1.0 from repo:site", hello, ok)
	}
	if base, ok := l.Find("base-files", "amd64"); !ok || base.Origin != "debian:bookworm" {
		t.Errorf("lock entry of base-files = %+v, want one from debian:bookworm", base)
	}

	start = time.Now()
	root := buildRoot(ctx, t, s, o)
	t.Logf("root from the lock: %s", time.Since(start).Round(time.Second))
	if b, err := os.ReadFile(filepath.Join(root, "usr/share/ingot-hello/hello.txt")); err != nil || string(b) != "hello from the site repository\n" {
		t.Errorf("the site package's file in the root: %q, %v", b, err)
	}
	src, _ := os.ReadFile(filepath.Join(root, "etc/apt/sources.list"))
	if want := "deb [signed-by=/etc/apt/keyrings/site.asc] " + sr.url + " site main"; !strings.Contains(string(src), want) {
		t.Errorf("the image's sources.list:\n%s\nwant a line %q", src, want)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/apt/keyrings/site.asc")); err != nil {
		t.Errorf("the repository's key is not in the image: %v", err)
	}

	t.Run("key file is not the fingerprint's", func(t *testing.T) {
		bad := siteImage(t, sr, sr.keyFiles["other"], sr.keys["site"], "")
		_, err := LockImage(ctx, bad, Options{Out: t.TempDir(), Cache: cache, Pool: pool})
		if err == nil || !strings.Contains(err.Error(), "repositories[0] (site): key site.asc holds ["+sr.keys["other"]+"], expected exactly the key "+sr.keys["site"]) {
			t.Errorf("lock with another key file = %v", err)
		}
	})
	t.Run("repository signed by another key", func(t *testing.T) {
		wrong := siteImage(t, sr, sr.keyFiles["other"], sr.keys["other"], "")
		_, err := LockImage(ctx, wrong, Options{Out: t.TempDir(), Cache: cache, Pool: pool})
		if err == nil || !strings.Contains(err.Error(), "repositories[0] (site): apt refused "+sr.url) {
			t.Errorf("lock of a repository its key did not sign = %v", err)
		}
	})
	t.Run("changed deb refused by the lock", func(t *testing.T) {
		sr.publish(t, "ingot-hello", "1.0", "the same version, other bytes\n", "site")
		if err := os.Remove(filepath.Join(pool, "sha256", hello.SHA256)); err != nil {
			t.Fatal(err)
		}
		_, err := buildRootErr(ctx, t, s, o)
		if err == nil || !strings.Contains(err.Error(), "package ingot-hello=1.0:amd64 from "+sr.url+"/pool/main/ingot-hello_1.0_amd64.deb is refused by its pin") ||
			!strings.Contains(err.Error(), "expected "+hello.SHA256) {
			t.Errorf("build after the repository changed the .deb = %v", err)
		}
	})
	t.Run("package not in the lock", func(t *testing.T) {
		more := siteImage(t, sr, sr.keyFiles["site"], sr.keys["site"], `, ingot-extra: "2.0"`)
		os.WriteFile(filepath.Join(more.Dir, LockFile), l.Format(more.Name), 0o644)
		_, err := buildRootErr(ctx, t, more, o)
		if err == nil || !strings.Contains(err.Error(), "package ingot-extra=2.0 is not in "+filepath.Join(more.Dir, LockFile)) {
			t.Errorf("build with an unlocked package = %v", err)
		}
	})
}

// buildRoot runs the root stage of a debian build (mmdebstrap from the
// lock's local repository, checked) without the boot pieces: the test
// image has no kernel.
func buildRoot(ctx context.Context, t *testing.T, s *Spec, o Options) string {
	t.Helper()
	root, err := buildRootErr(ctx, t, s, o)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func buildRootErr(ctx context.Context, t *testing.T, s *Spec, o Options) (string, error) {
	t.Helper()
	in, err := s.lockedInputs(ctx, o)
	if err != nil {
		return "", err
	}
	work := filepath.Join(t.TempDir(), "work")
	os.MkdirAll(work, 0o755)
	t.Cleanup(func() { removeWork(work) })
	return debianRoot(ctx, runner{epoch: s.Epoch()}, s, o, in, DeriveIDs(s.Name, s.Version), work)
}
