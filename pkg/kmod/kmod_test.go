package kmod

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// fakeKO returns a minimal relocatable x86-64 ELF whose only content is a
// .modinfo section with the given key=value strings, which is all Resolve
// reads of a real module.
func fakeKO(t *testing.T, modinfo ...string) []byte {
	t.Helper()
	info := []byte(strings.Join(modinfo, "\x00") + "\x00")
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	infoOff := uint64(64)
	strOff := infoOff + uint64(len(info))
	shOff := (strOff + uint64(len(shstr)) + 7) &^ 7
	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(elf.ET_REL), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: shOff, Ehsize: 64, Shentsize: 64, Shnum: 3, Shstrndx: 2,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	must(t, binary.Write(&b, binary.LittleEndian, h))
	b.Write(info)
	b.Write(shstr)
	b.Write(make([]byte, shOff-uint64(b.Len())))
	secs := []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: infoOff, Size: uint64(len(info)), Addralign: 1},
		{Name: 10, Type: uint32(elf.SHT_STRTAB), Off: strOff, Size: uint64(len(shstr)), Addralign: 1},
	}
	for _, s := range secs {
		must(t, binary.Write(&b, binary.LittleEndian, s))
	}
	return b.Bytes()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeKernel writes modules (file name -> depends=) under root/lib/modules/V.
func fakeKernel(t *testing.T, mods map[string]string, builtin ...string) string {
	root := t.TempDir()
	dir := filepath.Join(root, "lib", "modules", "6.1.0-test", "kernel")
	for file, deps := range mods {
		p := filepath.Join(dir, file)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, fakeKO(t, "license=GPL", "depends="+deps, "vermagic=6.1.0-test"), 0o644))
	}
	var bl []string
	for _, n := range builtin {
		bl = append(bl, "kernel/"+n+".ko")
	}
	must(t, os.WriteFile(filepath.Join(root, "lib", "modules", "6.1.0-test", "modules.builtin"), []byte(strings.Join(bl, "\n")), 0o644))
	return root
}

func TestResolve(t *testing.T) {
	mods := map[string]string{
		"drivers/virtio/virtio_ring.ko":           "",
		"drivers/virtio/virtio.ko":                "virtio_ring",
		"drivers/virtio/virtio_pci_modern_dev.ko": "",
		"drivers/virtio/virtio_pci_legacy_dev.ko": "",
		"drivers/virtio/virtio_pci.ko":            "virtio_pci_modern_dev,virtio,virtio_ring,virtio_pci_legacy_dev",
		"drivers/net/failover.ko":                 "",
		"drivers/net/net_failover.ko":             "failover",
		"drivers/net/virtio_net.ko":               "net_failover,virtio,virtio_ring",
		"lib/crc-t10dif.ko":                       "crct10dif_common",
		"lib/crct10dif_common.ko":                 "",
		"drivers/nvme/host/nvme-core.ko":          "crc-t10dif",
		"drivers/nvme/host/nvme.ko":               "nvme-core",
		"drivers/cycle/a.ko":                      "b",
		"drivers/cycle/b.ko":                      "a",
		"drivers/missing/needs_ghost.ko":          "ghost",
		"drivers/builtin/uses_builtin.ko":         "crc32c_generic",
	}
	root := fakeKernel(t, mods, "crc32c_generic")
	ix, err := Open(root, "")
	must(t, err)
	names := func(ms []Module) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "single", in: []string{"virtio_ring"}, want: []string{"virtio_ring"}},
		{name: "dependencies first", in: []string{"virtio_net"},
			want: []string{"failover", "net_failover", "virtio_ring", "virtio", "virtio_net"}},
		{name: "shared dependency once", in: []string{"virtio_pci", "virtio_net"},
			want: []string{"virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci", "failover", "net_failover", "virtio_net"}},
		{name: "dash and underscore", in: []string{"nvme", "nvme_core", "crc_t10dif"},
			want: []string{"crct10dif_common", "crc_t10dif", "nvme_core", "nvme"}},
		{name: "builtin skipped", in: []string{"uses-builtin", "crc32c_generic"}, want: []string{"uses_builtin"}},
		{name: "empty names ignored", in: []string{"", " "}, want: nil},
		{name: "unknown", in: []string{"nosuch"}, wantErr: "resolving module nosuch: kernel module not found"},
		{name: "missing dependency names chain", in: []string{"needs_ghost"}, wantErr: "resolving module ghost (needed by needs_ghost): kernel module not found"},
		{name: "cycle", in: []string{"a"}, wantErr: "dependency cycle a -> b -> a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ix.Resolve(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			must(t, err)
			if d := cmp.Diff(tc.want, names(got)); d != "" {
				t.Errorf("Resolve(%q) order (-want +got):\n%s", tc.in, d)
			}
		})
	}
	// Same input, same output, every time.
	a, _ := ix.Resolve([]string{"virtio_net", "nvme", "virtio_pci"})
	b, _ := ix.Resolve([]string{"virtio_net", "nvme", "virtio_pci"})
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("Resolve is not deterministic:\n%s", d)
	}
	if _, err := ix.Resolve([]string{"nosuch"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve(nosuch) = %v, want ErrNotFound", err)
	}
}

func TestReadModinfoErrors(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "x.ko")
	must(t, os.WriteFile(notELF, []byte("not an elf"), 0o644))
	if _, err := ReadModinfo(notELF); err == nil || !strings.Contains(err.Error(), "x.ko") {
		t.Errorf("ReadModinfo(not ELF) = %v, want an error naming the file", err)
	}
}

func TestParseModinfo(t *testing.T) {
	got := ParseModinfo([]byte("alias=pci:v1\x00alias=pci:v2\x00depends=a-b,c\x00\x00junk\x00intree=Y\x00"))
	want := map[string][]string{"alias": {"pci:v1", "pci:v2"}, "depends": {"a-b,c"}, "intree": {"Y"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseModinfo (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"a_b", "c"}, Depends(got)); d != "" {
		t.Errorf("Depends (-want +got):\n%s", d)
	}
}

// LabModules is the set LAB.md lists for QEMU virtio, e1000, AHCI and NVMe.
var labModules = []string{"virtio_pci", "virtio_blk", "virtio_net", "e1000", "e1000e", "ahci", "sd_mod", "nvme"}

// TestResolveRealKernel resolves the lab set in a real Debian kernel package
// when one is unpacked (INGOT_KERNEL_DIR, or the cache `ingot initramfs
// build` fills).
func TestResolveRealKernel(t *testing.T) {
	root := os.Getenv("INGOT_KERNEL_DIR")
	if root == "" {
		// The cache may hold kernels of other architectures (the arm64
		// lab's): take this one's, whose vmlinuz ends in -amd64 here.
		m, _ := filepath.Glob("/var/cache/ingot/kernel/*/root/boot/vmlinuz-*-" + runtime.GOARCH)
		if len(m) == 0 {
			netnstest.Optional(t, "INGOT_KERNEL_DIR", "an unpacked kernel package (or run `ingot initramfs build --kernel-deb auto` first, which leaves one in /var/cache/ingot/kernel)")
		}
		root = filepath.Dir(filepath.Dir(m[len(m)-1]))
	}
	ix, err := Open(root, "")
	must(t, err)
	got, err := ix.Resolve(labModules)
	must(t, err)
	pos := map[string]int{}
	for i, m := range got {
		pos[m.Name] = i
	}
	for _, m := range got {
		for _, d := range m.Depends {
			if ix.Builtin(d) {
				continue
			}
			if pos[d] >= pos[m.Name] {
				t.Errorf("%s (at %d) comes before its dependency %s (at %d)", m.Name, pos[m.Name], d, pos[d])
			}
		}
	}
	for _, want := range []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "failover", "net_failover", "scsi_mod", "libata", "libahci", "nvme_core", "t10_pi"} {
		if _, ok := pos[want]; !ok {
			t.Errorf("resolved set lacks %s; got %d modules", want, len(got))
		}
	}
	t.Logf("%d modules for %v", len(got), labModules)
}
