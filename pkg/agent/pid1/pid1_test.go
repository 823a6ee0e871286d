package pid1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestModuleList(t *testing.T) {
	in := "# virtio first\n/lib/modules/6.1.0-40-amd64/kernel/drivers/virtio/virtio_ring.ko\n\n  /lib/modules/x/virtio.ko  \n/lib/modules/x/e1000.ko.xz\n"
	want := []string{"/lib/modules/6.1.0-40-amd64/kernel/drivers/virtio/virtio_ring.ko", "/lib/modules/x/virtio.ko", "/lib/modules/x/e1000.ko.xz"}
	if diff := cmp.Diff(want, ModuleList(strings.NewReader(in))); diff != "" {
		t.Error(diff)
	}
}

func TestLoadModulesMissingList(t *testing.T) {
	if err := LoadModules(filepath.Join(t.TempDir(), "none"), nil); err != nil {
		t.Errorf("a missing list is not an error: %v", err)
	}
}

func TestFindKernelIn(t *testing.T) {
	touch := func(root, p string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte("x"), 0o644)
	}
	// Debian's relative links at the root.
	a := t.TempDir()
	touch(a, "boot/vmlinuz-6.1.0-40-amd64")
	touch(a, "boot/initrd.img-6.1.0-40-amd64")
	os.Symlink("boot/vmlinuz-6.1.0-40-amd64", filepath.Join(a, "vmlinuz"))
	os.Symlink("boot/initrd.img-6.1.0-40-amd64", filepath.Join(a, "initrd.img"))
	k, i, ok := FindKernelIn(a)
	if !ok || k != filepath.Join(a, "boot/vmlinuz-6.1.0-40-amd64") || i != filepath.Join(a, "boot/initrd.img-6.1.0-40-amd64") {
		t.Errorf("links: %q %q %v", k, i, ok)
	}
	// Absolute links resolve inside the tree.
	c := t.TempDir()
	touch(c, "boot/vmlinuz-6.1.0-40-amd64")
	os.Symlink("/boot/vmlinuz-6.1.0-40-amd64", filepath.Join(c, "vmlinuz"))
	if k, i, ok := FindKernelIn(c); !ok || k != filepath.Join(c, "boot/vmlinuz-6.1.0-40-amd64") || i != "" {
		t.Errorf("absolute link: %q %q %v", k, i, ok)
	}
	// No links: the newest versioned kernel.
	b := t.TempDir()
	touch(b, "boot/vmlinuz-6.1.0-38-amd64")
	touch(b, "boot/vmlinuz-6.1.0-40-amd64")
	touch(b, "boot/initrd.img-6.1.0-40-amd64")
	k, i, ok = FindKernelIn(b)
	if !ok || !strings.HasSuffix(k, "vmlinuz-6.1.0-40-amd64") || !strings.HasSuffix(i, "initrd.img-6.1.0-40-amd64") {
		t.Errorf("versioned: %q %q %v", k, i, ok)
	}
	// An ESP (vfat, no links) holding the kernel and initrd as files.
	e := t.TempDir()
	touch(e, "vmlinuz")
	touch(e, "initrd.img")
	if k, i, ok := FindKernelIn(e); !ok || k != filepath.Join(e, "vmlinuz") || i != filepath.Join(e, "initrd.img") {
		t.Errorf("plain files: %q %q %v", k, i, ok)
	}
	if _, _, ok := FindKernelIn(t.TempDir()); ok {
		t.Errorf("found a kernel in an empty tree")
	}
}

func TestJitterDiffers(t *testing.T) {
	a, b := jitter(), jitter()
	if len(a) != 32 || string(a) == string(b) {
		t.Errorf("jitter gave %x and %x", a, b)
	}
	if !RandomReady() {
		t.Logf("this machine's CRNG is not initialized")
	}
}
