//go:build integration

package initramfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationKernelInitramfs fetches the current Debian kernel package
// (apt-get download, cached in INGOT_CACHE or /var/cache/ingot), builds the
// agent initramfs twice into two folders, checks the bytes are identical and
// lists the archive with GNU cpio.
func TestIntegrationKernelInitramfs(t *testing.T) {
	netnstest.Need(t, "apt-get", "apt-cache", "dpkg", "cpio")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k, err := FetchKernel(ctx, CacheDir(os.Getenv), "auto")
	if err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(t.TempDir(), "ingot-agent")
	os.WriteFile(agent, []byte("#!/bin/sh\nexec sleep 1000\n"), 0o755)
	spec := Spec{Agent: agent, Modules: DefaultModules, MTime: 1700000000}
	a, err := BuildKernelAndInitrd(ctx, k, spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildKernelAndInitrd(ctx, k, spec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a.InitrdSHA256 != b.InitrdSHA256 || a.VmlinuzSHA256 != b.VmlinuzSHA256 {
		t.Fatalf("two builds differ: initrd %s vs %s", a.InitrdSHA256, b.InitrdSHA256)
	}
	t.Logf("kernel %s vmlinuz %s initrd %s (%d modules)", k.Version, a.VmlinuzSHA256, a.InitrdSHA256, len(a.Result.Modules))
	raw, err := exec.Command("sh", "-c", "zcat "+a.Initrd+" | cpio -t --quiet").Output()
	if err != nil {
		t.Fatalf("zcat | cpio -t: %v", err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Fields(string(raw)) {
		listed[l] = true
	}
	want := []string{"init", ModulesList, "dev", "proc", "sys"}
	for _, m := range a.Result.Modules {
		want = append(want, strings.TrimPrefix(m, "/"))
	}
	for _, w := range want {
		if !listed[w] {
			t.Errorf("cpio -t does not list %s", w)
		}
	}
	for _, m := range []string{"virtio_net.ko", "e1000.ko", "nvme.ko", "ahci.ko", "ext4.ko"} {
		if !bytes.Contains(raw, []byte("/"+m+"\n")) {
			t.Errorf("initramfs lacks %s", m)
		}
	}
	// A second call with the same inputs reuses the folder.
	c, err := BuildKernelAndInitrd(ctx, k, spec, a.Dir)
	if err != nil || c.InitrdSHA256 != a.InitrdSHA256 || c.Result == nil || len(c.Result.Modules) != len(a.Result.Modules) {
		t.Errorf("cached rebuild = %+v, %v", c, err)
	}
	// The server set: every named driver of real servers' NICs, HBAs and
	// virtual media is in the kernel package and goes in with its
	// dependencies.
	srv, err := BuildKernelAndInitrd(ctx, k, Spec{Agent: agent, Modules: ServerModules, MTime: 1700000000}, t.TempDir())
	if err != nil {
		t.Fatalf("server modules: %v", err)
	}
	have := map[string]bool{}
	for _, m := range srv.Result.Modules {
		have[strings.ReplaceAll(strings.TrimSuffix(filepath.Base(m), ".ko"), "-", "_")] = true
	}
	for _, m := range ServerModules {
		if !have[m] {
			t.Errorf("the server initramfs lacks %s (has %d modules)", m, len(srv.Result.Modules))
		}
	}
}
