package iso_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/iso"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// needTools skips (fails in CI) where the build tools are missing.
func needTools(t *testing.T) {
	t.Helper()
	netnstest.NeedNoError(t, "building CDs", iso.Check())
}

// fakeBoot writes a kernel and an initrd: any bytes do for the layout
// (objcopy adds them to the UKI as sections; nothing here boots them).
func fakeBoot(t *testing.T, dir string) (string, string) {
	t.Helper()
	k, i := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
	if err := os.WriteFile(k, bytes.Repeat([]byte("kernel "), 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(i, bytes.Repeat([]byte("initrd "), 90000), 0o644); err != nil {
		t.Fatal(err)
	}
	return k, i
}

func xorriso(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("xorriso", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// The CD holds isolinux and its configuration (the command line, the
// banner), the kernel and initrd, and a FAT EFI image with the UKI; xorriso
// reads back two El Torito entries, BIOS and UEFI.
func TestBuildLayout(t *testing.T) {
	needTools(t)
	dir := t.TempDir()
	k, i := fakeBoot(t, dir)
	out := filepath.Join(dir, "agent.iso")
	cmdline := "ingot.server=http://10.77.0.1:8080 ingot.mac=52:54:00:77:00:10 console=ttyS0,115200"
	if err := iso.Build(context.Background(), iso.Spec{Kernel: k, Initrd: i, Cmdline: cmdline, Banner: "ingot: agent CD"}, out); err != nil {
		t.Fatal(err)
	}
	ls := xorriso(t, "-indev", out, "-find", "/", "-type", "f")
	for _, f := range []string{"/isolinux/isolinux.bin", "/isolinux/ldlinux.c32", "/isolinux/isolinux.cfg",
		"/boot/vmlinuz", "/boot/initrd.img", "/boot/efi.img"} {
		if !strings.Contains(ls, "'"+f+"'") {
			t.Errorf("the CD lacks %s:\n%s", f, ls)
		}
	}
	et := xorriso(t, "-indev", out, "-report_el_torito", "plain")
	if !strings.Contains(et, "BIOS") || !strings.Contains(et, "UEFI") {
		t.Errorf("El Torito entries: want a BIOS and a UEFI one:\n%s", et)
	}
	x := t.TempDir()
	xorriso(t, "-osirrox", "on", "-indev", out, "-extract", "/isolinux/isolinux.cfg", filepath.Join(x, "isolinux.cfg"),
		"-extract", "/boot/efi.img", filepath.Join(x, "efi.img"), "-extract", "/boot/vmlinuz", filepath.Join(x, "vmlinuz"))
	cfg, _ := os.ReadFile(filepath.Join(x, "isolinux.cfg"))
	if strings.Contains(string(cfg), "SERIAL") {
		t.Errorf("isolinux.cfg writes to the serial port itself (the BIOS mirrors the screen there):\n%s", cfg)
	}
	for _, want := range []string{"SAY ingot: agent CD", "APPEND " + cmdline, "LINUX /boot/vmlinuz", "INITRD /boot/initrd.img"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("isolinux.cfg lacks %q:\n%s", want, cfg)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(x, "vmlinuz")); !bytes.Equal(got, mustRead(t, k)) {
		t.Error("/boot/vmlinuz is not the kernel given")
	}
	mdir, err := exec.Command("mdir", "-b", "-i", filepath.Join(x, "efi.img"), "::/EFI/BOOT").CombinedOutput()
	if err != nil || !strings.Contains(string(mdir), "BOOTX64.EFI") {
		t.Errorf("the EFI image has no EFI/BOOT/BOOTX64.EFI: %v\n%s", err, mdir)
	}
	uki := filepath.Join(x, "BOOTX64.EFI")
	if out, err := exec.Command("mcopy", "-i", filepath.Join(x, "efi.img"), "::/EFI/BOOT/BOOTX64.EFI", uki).CombinedOutput(); err != nil {
		t.Fatalf("mcopy: %v\n%s", err, out)
	}
	sec, err := exec.Command("objdump", "-h", uki).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump: %v\n%s", err, sec)
	}
	for _, s := range []string{".cmdline", ".linux", ".initrd", ".osrel"} {
		if !strings.Contains(string(sec), s) {
			t.Errorf("the UKI has no %s section:\n%s", s, sec)
		}
	}
	got, err := exec.Command("objcopy", "-O", "binary", "--only-section=.cmdline", uki, filepath.Join(x, "cmdline")).CombinedOutput()
	if err != nil {
		t.Fatalf("objcopy: %v\n%s", err, got)
	}
	if c := strings.TrimRight(string(mustRead(t, filepath.Join(x, "cmdline"))), "\x00"); c != cmdline {
		t.Errorf("UKI .cmdline = %q, want %q", c, cmdline)
	}
}

// Two builds of the same inputs, from files with different times into
// different folders, give the same bytes.
func TestBuildReproducible(t *testing.T) {
	needTools(t)
	var sums [2][]byte
	for n := range sums {
		dir := t.TempDir()
		k, i := fakeBoot(t, dir)
		when := time.Now().Add(time.Duration(n) * time.Hour)
		_ = os.Chtimes(k, when, when)
		out := filepath.Join(dir, "cd.iso")
		if err := iso.Build(context.Background(), iso.Spec{Kernel: k, Initrd: i, Cmdline: "console=ttyS0"}, out); err != nil {
			t.Fatal(err)
		}
		sums[n] = mustRead(t, out)
		if n == 1 {
			time.Sleep(1100 * time.Millisecond) // a clock that leaked in would show
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Error("two builds of the same inputs differ")
	}
}

func TestSpecRefused(t *testing.T) {
	dir := t.TempDir()
	k, i := fakeBoot(t, dir)
	for name, s := range map[string]iso.Spec{
		"no kernel":          {Initrd: i},
		"no initrd":          {Kernel: k},
		"lowercase volume":   {Kernel: k, Initrd: i, Volume: "agent"},
		"long volume":        {Kernel: k, Initrd: i, Volume: strings.Repeat("A", 33)},
		"two-line cmdline":   {Kernel: k, Initrd: i, Cmdline: "a\nSAY b"},
		"two-line banner":    {Kernel: k, Initrd: i, Banner: "a\nLABEL x"},
		"too long a cmdline": {Kernel: k, Initrd: i, Cmdline: strings.Repeat("x", 2000)},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "x.iso")
			if err := iso.Build(context.Background(), s, out); err == nil {
				t.Fatal("built")
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a refused build left an image")
			}
		})
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
