//go:build integration

package image

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationLabImageReproducible builds the lab image from its lock
// twice into two folders and checks both give the same bytes, then
// inspects the disk with the real tools: sfdisk for the GPT, mtools for the
// ESP, zstd for the compressed form. The locked .debs (kernel,
// busybox-static, systemd-boot-efi) come from the pool in the cache
// (INGOT_CACHE/pool, default /var/cache/ingot), fetched once from the
// mirror of the host's apt sources. Then the lock refuses: a .deb whose
// bytes are not the lock's (the lock names other bytes, the mirror has the
// real ones), and a deb: file whose package is not in the lock.
func TestIntegrationLabImageReproducible(t *testing.T) {
	netnstest.Need(t, "apt-get", "dpkg", "mkfs.vfat", "mcopy", "mkfs.ext4", "debugfs", "sfdisk", "objcopy", "syslinux", "zstd")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := Load(filepath.Join(repoRoot(t), "images", "lab"))
	if err != nil {
		t.Fatal(err)
	}
	cache := initramfs.CacheDir(os.Getenv)
	pool := filepath.Join(cache, "pool")
	var res [2]*Result
	for i := range res {
		start := time.Now()
		if res[i], err = Build(ctx, s, Options{Out: t.TempDir(), Cache: cache, Pool: pool}); err != nil {
			t.Fatal(err)
		}
		t.Logf("build %d: %s, raw %s (%d bytes), raw.zst %s (%d bytes)", i+1, time.Since(start).Round(time.Millisecond), res[i].RawSHA256, res[i].RawSize, res[i].ZstSHA256, res[i].ZstSize)
	}
	if res[0].RawSHA256 != res[1].RawSHA256 || res[0].ZstSHA256 != res[1].ZstSHA256 {
		t.Fatalf("two builds differ: raw %s vs %s, zst %s vs %s", res[0].RawSHA256, res[1].RawSHA256, res[0].ZstSHA256, res[1].ZstSHA256)
	}
	raw := res[0].Raw

	out, err := exec.Command("sfdisk", "--json", raw).Output()
	if err != nil {
		t.Fatalf("sfdisk --json: %v", err)
	}
	var pt struct {
		PartitionTable struct {
			Label      string `json:"label"`
			ID         string `json:"id"`
			Partitions []struct {
				Start, Size int64
				Type, UUID  string
				Name, Attrs string
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &pt); err != nil {
		t.Fatalf("sfdisk --json: %v: %s", err, out)
	}
	ids := DeriveIDs(s.Name, s.Version)
	p := pt.PartitionTable
	if p.Label != "gpt" || !strings.EqualFold(p.ID, ids.Disk) || len(p.Partitions) != 2 {
		t.Fatalf("partition table %+v, want GPT %s with 2 partitions", p, ids.Disk)
	}
	if e := p.Partitions[0]; !strings.EqualFold(e.Type, typeESP) || !strings.EqualFold(e.UUID, ids.ESP) || e.Start != 2048 || e.Size != 48<<11 || !strings.Contains(e.Attrs, "LegacyBIOSBootable") {
		t.Errorf("ESP entry %+v", e)
	}
	if e := p.Partitions[1]; !strings.EqualFold(e.Type, typeRootX86_64) || !strings.EqualFold(e.UUID, ids.Root) {
		t.Errorf("root entry %+v", e)
	}

	ls, err := exec.Command("mdir", "-i", raw+"@@1M", "-a", "-b", "-/", "::/").CombinedOutput()
	if err != nil {
		t.Fatalf("mdir: %v: %s", err, ls)
	}
	for _, want := range []string{"::/EFI/BOOT/BOOTX64.EFI", "::/vmlinuz", "::/initrd.img", "::/syslinux.cfg", "::/ldlinux.sys"} {
		if !strings.Contains(string(ls), want) {
			t.Errorf("ESP lacks %s; mdir lists:\n%s", want, ls)
		}
	}

	dec, err := exec.Command("sh", "-c", "zstd -dc < "+res[0].Zst+" | sha256sum").Output()
	if err != nil || !strings.HasPrefix(string(dec), res[0].RawSHA256) {
		t.Errorf("zstd -d of raw.zst hashes to %q (%v), want the raw's %s", dec, err, res[0].RawSHA256)
	}
	root := filepath.Join(t.TempDir(), "root.img")
	if out, err := exec.Command("dd", "if="+raw, "of="+root, "bs=1M", "skip=49", "count=8").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	idj, err := exec.Command("debugfs", "-R", "cat /etc/ingot/image.json", root).Output()
	if err != nil || !strings.Contains(string(idj), `"name":"lab"`) {
		t.Errorf("root /etc/ingot/image.json = %q, %v", idj, err)
	}

	t.Run("changed deb", func(t *testing.T) {
		dir := copyImage(t, s.Dir)
		lock, _ := os.ReadFile(filepath.Join(dir, LockFile))
		l, err := ParseLock("lock", lock)
		if err != nil {
			t.Fatal(err)
		}
		bb, _ := l.Find("busybox-static", "amd64")
		forged := strings.Repeat("0", 63) + "1" // bytes no pool has: fetched again and compared
		os.WriteFile(filepath.Join(dir, LockFile), []byte(strings.Replace(string(lock), bb.SHA256, forged, 1)), 0o644)
		c, _ := Load(dir)
		_, err = Build(ctx, c, Options{Out: t.TempDir(), Cache: cache, Pool: pool})
		if err == nil || !strings.Contains(err.Error(), "package busybox-static="+bb.Version+":amd64 from http://") || !strings.Contains(err.Error(), "is refused by its pin") ||
			!strings.Contains(err.Error(), "expected "+forged) {
			t.Errorf("build with a .deb whose bytes are not the lock's = %v", err)
		}
	})
	t.Run("unlocked package", func(t *testing.T) {
		dir := copyImage(t, s.Dir)
		def, _ := os.ReadFile(filepath.Join(dir, FileName))
		def = []byte(strings.Replace(string(def), "files:\n", "files:\n  - path: /bin/hello\n    source: deb:hello:/usr/bin/hello\n", 1))
		os.WriteFile(filepath.Join(dir, FileName), def, 0o644)
		c, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Build(ctx, c, Options{Out: t.TempDir(), Cache: cache, Pool: pool})
		if err == nil || !strings.Contains(err.Error(), "file /bin/hello: package hello is not in "+filepath.Join(dir, LockFile)) {
			t.Errorf("build with a package the lock lacks = %v", err)
		}
	})
}

// copyImage copies an image folder's files (not its subfolders) into a
// temporary folder.
func copyImage(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	os.MkdirAll(out, 0o755)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			os.WriteFile(filepath.Join(out, e.Name()), b, 0o755)
		}
	}
	return out
}
