//go:build integration

package deb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/image"
	"github.com/ingot-dev/ingot/pkg/journal"
)

// repoRoot is the folder holding go.mod above the test.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if dir == "/" {
			t.Fatal("go.mod not found above the test")
		}
		dir = filepath.Dir(dir)
	}
}

var (
	debsOnce sync.Once
	debs     map[string]string // arch -> .deb
	debsErr  error
	debsDir  string
)

// makeDeb runs `make deb` in dir with the packages written to out, and
// returns them by architecture.
func makeDeb(ctx context.Context, dir, out string, env ...string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "make", "-s", "deb", "DEB_OUT="+out)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make deb in %s: %w\n%s", dir, err, b)
	}
	found := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		m, _ := filepath.Glob(filepath.Join(out, "ingot_*_"+arch+".deb"))
		if len(m) != 1 {
			return nil, fmt.Errorf("make deb wrote %v for %s, want one package", m, arch)
		}
		found[arch] = m[0]
	}
	return found, nil
}

// builtDebs builds the packages once for every test of this run.
func builtDebs(t *testing.T) map[string]string {
	t.Helper()
	debsOnce.Do(func() {
		debsDir, debsErr = os.MkdirTemp("", "ingot-debs-")
		if debsErr == nil {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			debs, debsErr = makeDeb(ctx, repoRoot(t), debsDir)
			t.Logf("make deb: %v", time.Since(start).Round(time.Second))
		}
	})
	if debsErr != nil {
		t.Fatal(debsErr)
	}
	return debs
}

func TestMain(m *testing.M) {
	code := m.Run()
	if debsDir != "" {
		os.RemoveAll(debsDir)
	}
	os.Exit(code)
}

// rootPackages are ingot's dependencies, installed in the test's Debian
// root so that dpkg -i needs no network, and man-db, with which
// systemd-analyze verify checks the unit's Documentation=man:ingot(1).
var rootPackages = []string{"systemd", "ipxe", "init-system-helpers", "procps", "man-db"}

// cachedRoot returns a minimal Debian 12 root made by mmdebstrap from the
// host's apt sources (as pkg/image builds images), kept under the user's
// cache so only the first run pays for it (~75 s).
func cachedRoot(t *testing.T) string {
	t.Helper()
	mirrors, err := image.HostMirrors("/etc/apt")
	if err != nil {
		t.Fatal(err)
	}
	mirror, ok := mirrors["bookworm"]
	if !ok {
		t.Fatalf("no bookworm mirror in the host's apt sources (have %v)", mirrors)
	}
	args := []string{"--mode=root", "--format=directory", "--variant=minbase", "--include=" + strings.Join(rootPackages, ","), "bookworm"}
	sum := sha256.Sum256([]byte(strings.Join(append(args, mirror), "\n")))
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "ingot", "deb-test-root", hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/systemd-analyze")); err == nil {
		return dir
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mmdebstrap", append(args, tmp, "deb "+mirror+" bookworm main")...).CombinedOutput()
	if err != nil {
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("made the Debian root %s in %v (cached for the next runs)", dir, time.Since(start).Round(time.Second))
	return dir
}

// freshRoot is a writable copy of the cached root for one test: an overlay
// whose upper layer is in the test's temp dir, with /proc and /dev mounted.
func freshRoot(t *testing.T) string {
	t.Helper()
	lower := cachedRoot(t)
	tmp := t.TempDir()
	upper, work, merged := filepath.Join(tmp, "upper"), filepath.Join(tmp, "work"), filepath.Join(tmp, "root")
	for _, d := range []string{upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mounts := [][]string{
		{"-t", "overlay", "overlay", "-o", "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work, merged},
		{"-t", "proc", "proc", filepath.Join(merged, "proc")},
		{"--bind", "/dev", filepath.Join(merged, "dev")},
	}
	for i, m := range mounts {
		if out, err := exec.Command("mount", m...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v\n%s", m, err, out)
		}
		target := m[len(m)-1]
		t.Cleanup(func() {
			if out, err := exec.Command("umount", "-l", target).CombinedOutput(); err != nil {
				t.Logf("umount %s (mount %d): %v %s", target, i, err, out)
			}
		})
	}
	return merged
}

// inRoot runs a command chrooted into root.
func inRoot(ctx context.Context, root string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, "chroot", append([]string{root}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("chroot %s %s: %w\n%s", root, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// fakeJournald listens where journald's native socket is in root, writable
// by the ingot user, and keeps every entry it receives.
type fakeJournald struct {
	mu      sync.Mutex
	entries []map[string][]string
}

func listenJournald(t *testing.T, root string) *fakeJournald {
	t.Helper()
	dir := filepath.Join(root, "run/systemd/journal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "socket"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "socket"), 0o666)
	t.Cleanup(func() { c.Close() })
	j := &fakeJournald{}
	go func() {
		buf := make([]byte, 1<<20)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if e, err := journal.Decode(buf[:n]); err == nil {
				j.mu.Lock()
				j.entries = append(j.entries, e)
				j.mu.Unlock()
			}
		}
	}()
	return j
}

// find returns the first entry whose fields include all of want.
func (j *fakeJournald) find(want map[string]string) map[string][]string {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.entries {
		ok := true
		for k, v := range want {
			ok = ok && len(e[k]) > 0 && e[k][0] == v
		}
		if ok {
			return e
		}
	}
	return nil
}

func (j *fakeJournald) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.entries)
}
