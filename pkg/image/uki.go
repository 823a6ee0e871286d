package image

import (
	"context"
	"debug/pe"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ingot-dev/ingot/pkg/uki"
)

// EFIStub is systemd's EFI stub (package systemd-boot-efi).
const EFIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// UKI is what goes into a unified kernel image.
type UKI struct {
	Kernel, Initrd string // files
	Cmdline        string
	OSRelease      []byte
	// Arch is the kernel's Debian architecture: "" or amd64 (objcopy on
	// systemd's x86-64 stub), arm64 (Debian's amd64 objcopy has no
	// pei-aarch64 target: pkg/uki assembles it on the aarch64 stub).
	Arch string
	// Stub is the EFI stub file; "" is the build host's (uki.StubFor
	// Arch). An image build takes it from its lock's systemd-boot-efi.
	Stub string
}

func (u UKI) stub() string {
	if u.Stub != "" {
		return u.Stub
	}
	return uki.StubFor(u.Arch)
}

// makeUKI writes a unified kernel image to out: systemd's EFI stub with
// .osrel, .cmdline, .linux and .initrd sections added by objcopy, each
// placed after the stub's own sections. The PE timestamp objcopy stamps is
// set to the epoch and the checksum recomputed, so rebuilds are identical.
func (r runner) makeUKI(ctx context.Context, u UKI, out string) error {
	if u.Arch == uki.ArchARM64 {
		return r.assembleUKI(u, u.stub(), out)
	}
	f, err := pe.Open(u.stub())
	if err != nil {
		return fmt.Errorf("reading the EFI stub (apt-get install systemd-boot-efi): %w", err)
	}
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		f.Close()
		return fmt.Errorf("EFI stub %s: not a PE32+ image", u.stub())
	}
	var end uint64
	for _, s := range f.Sections {
		if e := uint64(s.VirtualAddress) + uint64(s.VirtualSize); e > end {
			end = e
		}
	}
	f.Close()
	align := uint64(oh.SectionAlignment)
	if align < 4096 { // page-aligned sections satisfy every firmware's loader
		align = 4096
	}
	dir := filepath.Dir(out)
	osrel := filepath.Join(dir, "uki-osrel")
	cmdline := filepath.Join(dir, "uki-cmdline")
	if err := os.WriteFile(osrel, u.OSRelease, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(cmdline, []byte(u.Cmdline), 0o644); err != nil {
		return err
	}
	defer os.Remove(osrel)
	defer os.Remove(cmdline)
	argv := []string{"objcopy"}
	next := (end + align - 1) / align * align
	for _, s := range []struct{ name, file string }{{".osrel", osrel}, {".cmdline", cmdline}, {".linux", u.Kernel}, {".initrd", u.Initrd}} {
		st, err := os.Stat(s.file)
		if err != nil {
			return fmt.Errorf("UKI section %s: %w", s.name, err)
		}
		argv = append(argv, "--add-section", s.name+"="+s.file,
			"--change-section-vma", s.name+"=0x"+strconv.FormatUint(oh.ImageBase+next, 16))
		next += (uint64(st.Size()) + align - 1) / align * align
	}
	argv = append(argv, u.stub(), out)
	if err := r.run(ctx, nil, argv...); err != nil {
		return err
	}
	return fixPE(out, uint32(r.epoch))
}

// fixPE sets a PE file's COFF TimeDateStamp and recomputes its checksum.
func fixPE(path string, stamp uint32) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) < 0x40 {
		return fmt.Errorf("%s: too short for a PE image", path)
	}
	peOff := int(binary.LittleEndian.Uint32(b[0x3c:]))
	if peOff+24+68 > len(b) || string(b[peOff:peOff+4]) != "PE\x00\x00" {
		return fmt.Errorf("%s: no PE signature at 0x%x", path, peOff)
	}
	binary.LittleEndian.PutUint32(b[peOff+8:], stamp)
	sumOff := peOff + 24 + 64 // CheckSum in the optional header
	binary.LittleEndian.PutUint32(b[sumOff:], 0)
	binary.LittleEndian.PutUint32(b[sumOff:], peChecksum(b, sumOff))
	return os.WriteFile(path, b, 0o644)
}

// peChecksum is the PE image checksum: a 16-bit one's-complement-style sum
// of the file (the checksum field counted as zero) plus the file length.
func peChecksum(b []byte, sumOff int) uint32 {
	var sum uint64
	for i := 0; i+1 < len(b); i += 2 {
		if i == sumOff || i == sumOff+2 {
			continue
		}
		sum += uint64(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1])
		sum = (sum & 0xffff) + (sum >> 16)
	}
	sum = (sum & 0xffff) + (sum >> 16)
	return uint32(sum) + uint32(len(b))
}

// assembleUKI writes a UKI of stub (same sections, same layout as makeUKI's
// objcopy, see pkg/uki's TestMatchesObjcopy) with the stamp and checksum
// fixed as makeUKI does.
func (r runner) assembleUKI(u UKI, stubPath, out string) error {
	stub, err := os.ReadFile(stubPath)
	if err != nil {
		return fmt.Errorf("reading the EFI stub (apt-get install systemd-boot-efi:%s): %w", u.Arch, err)
	}
	kernel, err := os.Open(u.Kernel)
	if err != nil {
		return fmt.Errorf("UKI section .linux: %w", err)
	}
	defer kernel.Close()
	initrd, err := os.Open(u.Initrd)
	if err != nil {
		return fmt.Errorf("UKI section .initrd: %w", err)
	}
	defer initrd.Close()
	ks, kerr := kernel.Stat()
	is, ierr := initrd.Stat()
	if err := errors.Join(kerr, ierr); err != nil {
		return err
	}
	if arch, err := uki.Arch(kernel); err != nil || arch != u.Arch {
		return fmt.Errorf("UKI section .linux: %s is not an %s EFI kernel (%s, %v)", u.Kernel, u.Arch, arch, err)
	}
	img, err := uki.Assemble(stub, uki.Parts{OSRelease: string(u.OSRelease), Cmdline: u.Cmdline,
		Kernel: kernel, KernelSize: ks.Size(), Initrd: initrd, InitrdSize: is.Size()}.Sections()...)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, img.Reader())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return fixPE(out, uint32(r.epoch))
}
