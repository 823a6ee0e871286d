// Package uki assembles unified kernel images (UKIs): systemd's EFI stub
// with a kernel, an initrd and a command line added as PE sections, the
// layout that objcopy and ukify make (.osrel, .cmdline, .linux, .initrd,
// each page-aligned after the stub's own sections).
//
// Nothing is copied: an Image is a list of parts (the stub with its headers
// rewritten, zero padding, and each section's bytes read from where they
// lie, such as a file of the artifact store), read through io.ReaderAt. A
// server can answer every machine with its own command line while the
// kernel and initrd are read from one file each.
package uki

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// EFIStub is systemd's x86-64 EFI stub in Debian (package systemd-boot-efi).
const EFIStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// EFIStubARM64 is systemd's aarch64 EFI stub in Debian (package
// systemd-boot-efi:arm64, which installs beside the amd64 one: Multi-Arch
// same).
const EFIStubARM64 = "/usr/lib/systemd/boot/efi/linuxaa64.efi.stub"

// Architectures of EFI images, as Debian names them.
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
)

// StubFor is the path of systemd's EFI stub for arch (ArchAMD64 for
// anything else).
func StubFor(arch string) string {
	if arch == ArchARM64 {
		return EFIStubARM64
	}
	return EFIStub
}

// PE/COFF machine types (PE Format, "Machine Types").
const (
	machineAMD64 = 0x8664
	machineARM64 = 0xaa64
)

// Arch reads the architecture of the PE image in r from its COFF header:
// ArchAMD64 or ArchARM64. A Linux kernel built with its EFI stub is such
// an image (x86 bzImage and arm64 Image alike), so the kernel of a UKI
// tells which stub it needs. An error for anything else.
func Arch(r io.ReaderAt) (string, error) {
	var b [0x40]byte
	if _, err := r.ReadAt(b[:], 0); err != nil {
		return "", fmt.Errorf("uki: reading the DOS header: %w", err)
	}
	if string(b[:2]) != "MZ" {
		return "", errors.New("uki: not a PE image (no MZ header)")
	}
	var sig [6]byte
	off := int64(binary.LittleEndian.Uint32(b[peSigOffset:]))
	if _, err := r.ReadAt(sig[:], off); err != nil || string(sig[:4]) != "PE\x00\x00" {
		return "", fmt.Errorf("uki: no PE signature at 0x%x", off)
	}
	switch m := binary.LittleEndian.Uint16(sig[4:]); m {
	case machineAMD64:
		return ArchAMD64, nil
	case machineARM64:
		return ArchARM64, nil
	default:
		return "", fmt.Errorf("uki: PE machine type 0x%x is neither x86-64 nor arm64", m)
	}
}

// Section is one section to add to the stub.
type Section struct {
	Name string      // e.g. ".cmdline"; at most 8 bytes
	Data io.ReaderAt // Size bytes from offset 0
	Size int64
}

// PE layout offsets (PE/COFF specification, "PE Format").
const (
	peSigOffset   = 0x3c // where the DOS header keeps the PE header's offset
	coffSize      = 20
	sectionSize   = 40
	magicPE32Plus = 0x20b
	// Section characteristics objcopy gives an added data section:
	// IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ.
	dataSection = 0x40000040
	// pageSize: the sections are page-aligned in memory, as objcopy and
	// ukify place them; every firmware's loader accepts that.
	pageSize = 4096
)

// Optional header (PE32+) field offsets from its start.
const (
	optSizeOfInitData = 8
	optSectionAlign   = 32
	optFileAlign      = 36
	optSizeOfImage    = 56
	optSizeOfHeaders  = 60
	optCheckSum       = 64
	optNumDirs        = 108
	optDirs           = 112
	dirSecurity       = 4 // the certificate table (Authenticode signature)
)

// Image is an assembled UKI.
type Image struct {
	parts []part // in file order, contiguous from offset 0
	size  int64
}

// part is a run of the image's bytes: from r (nil: zeroes).
type part struct {
	off, n int64
	r      io.ReaderAt
}

// Size is the image's length in bytes.
func (im *Image) Size() int64 { return im.size }

// ReadAt reads the image's bytes at off, as io.ReaderAt.
func (im *Image) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("uki: negative offset")
	}
	if off >= im.size {
		return 0, io.EOF
	}
	i := sort.Search(len(im.parts), func(i int) bool { return im.parts[i].off+im.parts[i].n > off })
	total := 0
	for ; i < len(im.parts) && len(p) > 0; i++ {
		pt := im.parts[i]
		in := off - pt.off
		n := int(min(int64(len(p)), pt.n-in))
		if pt.r == nil {
			clear(p[:n])
		} else if got, err := pt.r.ReadAt(p[:n], in); got < n {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF // a section shorter than its Size
			}
			return total + got, err
		}
		total += n
		off += int64(n)
		p = p[n:]
	}
	if len(p) > 0 {
		return total, io.EOF
	}
	return total, nil
}

// Reader returns a reader over the whole image (io.ReadSeeker, for
// http.ServeContent).
func (im *Image) Reader() *io.SectionReader { return io.NewSectionReader(im, 0, im.size) }

// Assemble adds sections to stub, a PE32+ EFI application, in the order
// given. The stub's headers must have room for the new section headers
// (systemd's stub leaves room for seven). Its PE checksum is set to 0 (not
// computed: that would read every byte, and UEFI loaders do not check it)
// and a certificate table is dropped: a signature over the stub alone does
// not cover the UKI, which must be signed as a whole where Secure Boot is
// on.
func Assemble(stub []byte, sections ...Section) (*Image, error) {
	h, err := parseHeaders(stub)
	if err != nil {
		return nil, err
	}
	if room := (h.firstRaw - h.tableEnd) / sectionSize; len(sections) > room {
		return nil, fmt.Errorf("uki: the stub's headers have room for %d more sections, not %d", room, len(sections))
	}
	head := append([]byte(nil), stub...)
	valign := max(int64(h.sectionAlign), pageSize)
	fa := int64(h.fileAlign)
	va := alignUp(h.imageEnd, valign)
	raw := alignUp(int64(len(stub)), fa)
	im := &Image{}
	im.add(int64(len(head)), bytes.NewReader(head)) // head's headers are filled in below
	im.add(raw-int64(len(head)), nil)
	initData := uint64(binary.LittleEndian.Uint32(head[h.opt+optSizeOfInitData:]))
	for i, s := range sections {
		if len(s.Name) == 0 || len(s.Name) > 8 {
			return nil, fmt.Errorf("uki: section name %q: expected 1 to 8 bytes", s.Name)
		}
		if s.Size < 0 || s.Size > math.MaxUint32 || (s.Size > 0 && s.Data == nil) {
			return nil, fmt.Errorf("uki: section %s: size %d: expected 0 to 4 GiB of data", s.Name, s.Size)
		}
		rawSize := alignUp(s.Size, fa)
		if va+alignUp(s.Size, valign) > math.MaxUint32 || raw+rawSize > math.MaxUint32 {
			return nil, fmt.Errorf("uki: section %s does not fit a PE image's 4 GiB", s.Name)
		}
		e := head[h.tableEnd+i*sectionSize:][:sectionSize]
		clear(e)
		copy(e, s.Name)
		le := binary.LittleEndian
		le.PutUint32(e[8:], uint32(s.Size))   // VirtualSize: the exact length
		le.PutUint32(e[12:], uint32(va))      // VirtualAddress
		le.PutUint32(e[16:], uint32(rawSize)) // SizeOfRawData
		le.PutUint32(e[20:], uint32(raw))     // PointerToRawData
		le.PutUint32(e[36:], dataSection)     // Characteristics
		im.add(s.Size, s.Data)
		im.add(rawSize-s.Size, nil)
		initData += uint64(rawSize)
		va += alignUp(s.Size, valign)
		raw += rawSize
	}
	le := binary.LittleEndian
	le.PutUint16(head[h.coff+2:], uint16(h.nsec+len(sections)))
	le.PutUint32(head[h.opt+optSizeOfImage:], uint32(va))
	le.PutUint32(head[h.opt+optSizeOfInitData:], uint32(min(initData, math.MaxUint32)))
	le.PutUint32(head[h.opt+optCheckSum:], 0)
	if h.numDirs > dirSecurity {
		clear(head[h.opt+optDirs+dirSecurity*8:][:8])
	}
	return im, nil
}

// add appends n bytes from r (nil: zeroes) to the image.
func (im *Image) add(n int64, r io.ReaderAt) {
	if n > 0 {
		im.parts = append(im.parts, part{im.size, n, r})
		im.size += n
	}
}

// headers is what Assemble needs from the stub's PE headers.
type headers struct {
	coff, opt          int // offsets of the COFF and optional headers
	nsec               int
	tableEnd, firstRaw int // end of the section table; first section data in the file
	sectionAlign       uint32
	fileAlign          uint32
	numDirs            int
	imageEnd           int64 // end of the last section in memory
}

// parseHeaders reads and checks a PE32+ image's headers.
func parseHeaders(b []byte) (headers, error) {
	var h headers
	le := binary.LittleEndian
	if len(b) < peSigOffset+4 || string(b[:2]) != "MZ" {
		return h, errors.New("uki: the stub is not a PE image (no MZ header)")
	}
	pe := int64(le.Uint32(b[peSigOffset:]))
	if pe+4+coffSize > int64(len(b)) || string(b[pe:pe+4]) != "PE\x00\x00" {
		return h, fmt.Errorf("uki: the stub has no PE signature at 0x%x", pe)
	}
	h.coff = int(pe) + 4
	h.nsec = int(le.Uint16(b[h.coff+2:]))
	optSize := int(le.Uint16(b[h.coff+16:]))
	h.opt = h.coff + coffSize
	if optSize < optDirs || h.opt+optSize > len(b) {
		return h, fmt.Errorf("uki: the stub's optional header (%d bytes) is too short for PE32+", optSize)
	}
	if m := le.Uint16(b[h.opt:]); m != magicPE32Plus {
		return h, fmt.Errorf("uki: the stub is not PE32+ (optional header magic 0x%x)", m)
	}
	h.sectionAlign = le.Uint32(b[h.opt+optSectionAlign:])
	h.fileAlign = le.Uint32(b[h.opt+optFileAlign:])
	if !pow2(h.fileAlign) || !pow2(h.sectionAlign) || h.fileAlign > 1<<16 || h.sectionAlign > 1<<20 {
		return h, fmt.Errorf("uki: the stub's alignments (section 0x%x, file 0x%x) are not powers of two up to 1 MiB", h.sectionAlign, h.fileAlign)
	}
	h.numDirs = min(int(le.Uint32(b[h.opt+optNumDirs:])), (optSize-optDirs)/8)
	table := h.opt + optSize
	h.tableEnd = table + h.nsec*sectionSize
	if h.tableEnd > len(b) {
		return h, fmt.Errorf("uki: the stub's section table (%d sections) runs past its end", h.nsec)
	}
	h.firstRaw = min(int(le.Uint32(b[h.opt+optSizeOfHeaders:])), len(b))
	for i := range h.nsec {
		s := b[table+i*sectionSize:]
		vsize, va := int64(le.Uint32(s[8:])), int64(le.Uint32(s[12:]))
		rawSize, rawPtr := le.Uint32(s[16:]), le.Uint32(s[20:])
		h.imageEnd = max(h.imageEnd, va+max(vsize, int64(rawSize)))
		if int64(rawPtr)+int64(rawSize) > int64(len(b)) {
			// The added sections' data goes after the stub's end: one of its
			// own reaching past it would overlap them.
			return h, fmt.Errorf("uki: the stub's section %d runs past the stub's end", i+1)
		}
		if rawSize > 0 && int(rawPtr) < h.firstRaw {
			h.firstRaw = int(rawPtr)
		}
	}
	if h.firstRaw < h.tableEnd {
		return h, fmt.Errorf("uki: the stub's section data starts at 0x%x, inside its headers (0x%x)", h.firstRaw, h.tableEnd)
	}
	return h, nil
}

func pow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

func alignUp(v, a int64) int64 { return (v + a - 1) / a * a }

// Parts are a UKI's usual contents.
type Parts struct {
	OSRelease string // os-release lines naming what the UKI boots ("" leaves .osrel out)
	Cmdline   string // the kernel command line
	Kernel    io.ReaderAt
	Initrd    io.ReaderAt
	// KernelSize and InitrdSize are the lengths of Kernel and Initrd.
	KernelSize, InitrdSize int64
}

// Sections are p's sections in the order systemd's ukify writes them.
func (p Parts) Sections() []Section {
	var out []Section
	if p.OSRelease != "" {
		out = append(out, bytesSection(".osrel", p.OSRelease))
	}
	return append(out, bytesSection(".cmdline", p.Cmdline),
		Section{Name: ".linux", Data: p.Kernel, Size: p.KernelSize},
		Section{Name: ".initrd", Data: p.Initrd, Size: p.InitrdSize})
}

func bytesSection(name, s string) Section {
	return Section{Name: name, Data: strings.NewReader(s), Size: int64(len(s))}
}
