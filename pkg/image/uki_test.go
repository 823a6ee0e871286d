package image

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/uki"
	"github.com/ingot-dev/ingot/pkg/uki/ukitest"
)

// An arm64 image's UKI is assembled on systemd's aarch64 stub (Debian's
// amd64 objcopy cannot write pei-aarch64): an aarch64 PE with the four
// sections, stamped with SOURCE_DATE_EPOCH, the same bytes every build; a
// kernel of another architecture is refused.
func TestUKIARM64(t *testing.T) {
	netnstest.NeedFiles(t, "the aarch64 stub: apt-get install systemd-boot-efi:arm64", uki.EFIStubARM64)
	dir := t.TempDir()
	kernel := func(machineType uint16) string {
		b := ukitest.MinimalStub()
		binary.LittleEndian.PutUint16(b[0x44:], machineType)
		p := filepath.Join(dir, fmt.Sprintf("vmlinuz-%x", machineType))
		os.WriteFile(p, b, 0o644)
		return p
	}
	initrd := filepath.Join(dir, "initrd.img")
	os.WriteFile(initrd, []byte("initrd"), 0o644)
	r := runner{epoch: 1700000000}
	u := UKI{Kernel: kernel(0xaa64), Initrd: initrd, Cmdline: "console=ttyAMA0", OSRelease: []byte("ID=t\n"), Arch: "arm64"}
	var builds [][]byte
	for i := range 2 {
		out := filepath.Join(dir, "BOOTAA64.EFI-"+string(rune('a'+i)))
		if err := r.makeUKI(context.Background(), u, out); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		builds = append(builds, b)
	}
	if !bytes.Equal(builds[0], builds[1]) {
		t.Error("two builds of one arm64 UKI differ")
	}
	f, err := pe.NewFile(bytes.NewReader(builds[0]))
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != pe.IMAGE_FILE_MACHINE_ARM64 || f.TimeDateStamp != 1700000000 {
		t.Errorf("machine 0x%x, stamp %d: want arm64, 1700000000", f.Machine, f.TimeDateStamp)
	}
	var names []string
	for _, s := range f.Sections {
		names = append(names, s.Name)
	}
	if got := strings.Join(names[len(names)-4:], " "); got != ".osrel .cmdline .linux .initrd" {
		t.Errorf("sections %v", names)
	}
	u.Kernel = kernel(0x8664)
	if err := r.makeUKI(context.Background(), u, filepath.Join(dir, "wrong.efi")); err == nil || !strings.Contains(err.Error(), "not an arm64 EFI kernel") {
		t.Errorf("an x86-64 kernel on the aarch64 stub: %v", err)
	}
}
