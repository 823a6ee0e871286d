package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/uki/ukitest"
)

func minimalPE() []byte { return ukitest.MinimalStub() }

func testParts(kernel, initrd []byte) Parts {
	return Parts{OSRelease: "ID=ingot-agent\n", Cmdline: "ingot.server=http://10.77.0.1:8080 console=ttyS0",
		Kernel: bytes.NewReader(kernel), KernelSize: int64(len(kernel)),
		Initrd: bytes.NewReader(initrd), InitrdSize: int64(len(initrd))}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func stubs(t *testing.T) map[string][]byte {
	out := map[string][]byte{"minimal": minimalPE()}
	if b, err := os.ReadFile(EFIStub); err == nil {
		out["systemd"] = b
	} else {
		t.Logf("no systemd stub (%v): only the synthetic one", err)
	}
	if b, err := os.ReadFile(EFIStubARM64); err == nil {
		out["systemd-aa64"] = b
	} else {
		t.Logf("no systemd aarch64 stub (%v)", err)
	}
	return out
}

func readAll(t testing.TB, im *Image) []byte {
	t.Helper()
	b, err := io.ReadAll(im.Reader())
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != im.Size() {
		t.Fatalf("read %d bytes, Size says %d", len(b), im.Size())
	}
	return b
}

// checkImage parses an assembled image with debug/pe and checks that the
// stub's sections are untouched and each added one holds its data,
// page-aligned, after the one before.
func checkImage(t testing.TB, stub, img []byte, add []Section) {
	t.Helper()
	f, err := pe.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("the UKI does not parse as PE: %v", err)
	}
	orig, err := pe.NewFile(bytes.NewReader(stub))
	if err != nil {
		t.Fatalf("the stub does not parse as PE: %v", err)
	}
	if len(f.Sections) != len(orig.Sections)+len(add) {
		t.Fatalf("%d sections, want %d", len(f.Sections), len(orig.Sections)+len(add))
	}
	for i, s := range orig.Sections {
		a, _ := s.Data()
		b, _ := f.Sections[i].Data()
		if s.SectionHeader != f.Sections[i].SectionHeader || !bytes.Equal(a, b) {
			t.Errorf("stub section %s changed", s.Name)
		}
	}
	end := uint32(0)
	for _, s := range orig.Sections {
		end = max(end, s.VirtualAddress+max(s.VirtualSize, s.Size))
	}
	for i, want := range add {
		s := f.Sections[len(orig.Sections)+i]
		if s.Name != want.Name || int64(s.VirtualSize) != want.Size {
			t.Errorf("section %d is %s of %d bytes, want %s of %d", i, s.Name, s.VirtualSize, want.Name, want.Size)
		}
		if s.VirtualAddress%pageSize != 0 || s.VirtualAddress < end {
			t.Errorf("section %s at 0x%x: want page-aligned at or after 0x%x", s.Name, s.VirtualAddress, end)
		}
		end = s.VirtualAddress + s.VirtualSize
		got, err := s.Data()
		if err != nil {
			t.Fatalf("section %s: %v", s.Name, err)
		}
		data := make([]byte, want.Size)
		if want.Size > 0 {
			want.Data.ReadAt(data, 0)
		}
		if !bytes.Equal(got[:s.VirtualSize], data) || strings.Trim(string(got[s.VirtualSize:]), "\x00") != "" {
			t.Errorf("section %s does not hold its data (then zeroes)", s.Name)
		}
	}
	oh := f.OptionalHeader.(*pe.OptionalHeader64)
	if oh.SizeOfImage < end || oh.SizeOfImage%oh.SectionAlignment != 0 {
		t.Errorf("SizeOfImage 0x%x: want a multiple of 0x%x covering 0x%x", oh.SizeOfImage, oh.SectionAlignment, end)
	}
	if oh.CheckSum != 0 || oh.DataDirectory[dirSecurity] != (pe.DataDirectory{}) {
		t.Errorf("checksum 0x%x, certificate table %+v: want both zero", oh.CheckSum, oh.DataDirectory[dirSecurity])
	}
}

func TestAssemble(t *testing.T) {
	for name, stub := range stubs(t) {
		t.Run(name, func(t *testing.T) {
			for _, sizes := range [][2]int{{1, 1}, {4096, 4095}, {100_003, 65_537}, {0, 512}} {
				p := testParts(randomBytes(sizes[0], 1), randomBytes(sizes[1], 2))
				im, err := Assemble(stub, p.Sections()...)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, stub, readAll(t, im), p.Sections())
			}
		})
	}
}

// TestReadAtAnywhere reads the image in pieces at every kind of boundary:
// each piece must equal the same bytes of the whole.
func TestReadAtAnywhere(t *testing.T) {
	p := testParts(randomBytes(10_000, 3), randomBytes(7_777, 4))
	im, err := Assemble(minimalPE(), p.Sections()...)
	if err != nil {
		t.Fatal(err)
	}
	whole := readAll(t, im)
	r := rand.New(rand.NewPCG(5, 5))
	for range 2000 {
		off := r.Int64N(im.Size() + 10)
		buf := make([]byte, r.IntN(9000))
		n, err := im.ReadAt(buf, off)
		want := whole[min(off, int64(len(whole))):]
		want = want[:min(len(want), len(buf))]
		if n != len(want) || !bytes.Equal(buf[:n], want) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d bytes, want %d", len(buf), off, n, len(want))
		}
		if (n < len(buf)) != (err == io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", len(buf), off, n, err)
		}
	}
}

// TestMatchesObjcopy: objcopy (as pkg/image makes the golden image's UKI)
// and Assemble put the same sections at the same addresses with the same
// contents.
func TestMatchesObjcopy(t *testing.T) {
	netnstest.NeedPrograms(t, "objcopy")
	stub, err := os.ReadFile(EFIStub)
	netnstest.NeedNoError(t, "systemd's EFI stub (Debian package systemd-boot-efi)", err)
	dir := t.TempDir()
	p := testParts(randomBytes(123_457, 6), randomBytes(54_321, 7))
	im, err := Assemble(stub, p.Sections()...)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := pe.NewFile(bytes.NewReader(readAll(t, im)))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{}
	for i, s := range p.Sections() {
		file := filepath.Join(dir, strconv.Itoa(i))
		data := make([]byte, s.Size)
		s.Data.ReadAt(data, 0)
		os.WriteFile(file, data, 0o644)
		va := ours.Sections[len(ours.Sections)-len(p.Sections())+i].VirtualAddress
		args = append(args, "--add-section", s.Name+"="+file, "--change-section-vma", s.Name+"=0x"+strconv.FormatUint(uint64(va), 16))
	}
	out := filepath.Join(dir, "objcopy.efi")
	if b, err := exec.Command("objcopy", append(args, EFIStub, out)...).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	ref, err := pe.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	type sec struct {
		Name        string
		VA, VSize   uint32
		Flags       uint32
		DataSHA     string
		InImageSize bool
	}
	list := func(f *pe.File) []sec {
		var out []sec
		size := f.OptionalHeader.(*pe.OptionalHeader64).SizeOfImage
		for _, s := range f.Sections {
			d, _ := s.Data()
			out = append(out, sec{s.Name, s.VirtualAddress, s.VirtualSize, s.Characteristics,
				string(d[:min(len(d), int(s.VirtualSize))]), s.VirtualAddress+s.VirtualSize <= size})
		}
		return out
	}
	if d := cmp.Diff(list(ref), list(ours)); d != "" {
		t.Errorf("sections differ from objcopy's (-objcopy +ours):\n%s", d)
	}
}

func TestAssembleRefuses(t *testing.T) {
	ok := minimalPE()
	tight := minimalPE()
	binary.LittleEndian.PutUint32(tight[0x44+20+60:], 0x170+39) // SizeOfHeaders: no room after the table
	pe32 := minimalPE()
	binary.LittleEndian.PutUint16(pe32[0x44+20:], 0x10b)
	sec := func(name string, n int) Section {
		return Section{Name: name, Data: bytes.NewReader(make([]byte, n)), Size: int64(n)}
	}
	for name, c := range map[string]struct {
		stub []byte
		add  []Section
		want string
	}{
		"not PE":            {[]byte("#!/bin/sh\necho not a stub\n" + strings.Repeat(" ", 64)), nil, "no MZ header"},
		"truncated":         {ok[:0x50], nil, "no PE signature"},
		"data past the end": {ok[:0x500], nil, "runs past the stub's end"},
		"PE32":              {pe32, nil, "not PE32+"},
		"no room":           {tight, []Section{sec(".a", 1)}, "room for 0 more"},
		"too many":          {ok, slices.Repeat([]Section{sec(".x", 1)}, 17), "room for 16 more"},
		"long name":         {ok, []Section{sec(".cmdlines", 1)}, "1 to 8 bytes"},
		"nil data":          {ok, []Section{{Name: ".x", Size: 3}}, "expected 0 to 4 GiB"},
		"over 4 GiB":        {ok, []Section{sec(".a", 1), {Name: ".b", Data: bytes.NewReader(nil), Size: 1<<32 - 1}}, "4 GiB"},
		"table runs out": {func() []byte {
			b := minimalPE()
			binary.LittleEndian.PutUint16(b[0x46:], 0xffff)
			return b
		}(), nil, "runs past its end"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Assemble(c.stub, c.add...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}

// A section whose reader ends before its Size is an error, not zeroes.
func TestShortSection(t *testing.T) {
	im, err := Assemble(minimalPE(), Section{Name: ".linux", Data: bytes.NewReader([]byte("abc")), Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(im.Reader()); err != io.ErrUnexpectedEOF {
		t.Fatalf("reading a UKI with a short section: %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzAssemble: any bytes as the stub. Assemble must not panic; what it
// accepts must parse as PE with the added sections holding their data.
func FuzzAssemble(f *testing.F) {
	f.Add(minimalPE())
	if b, err := os.ReadFile(EFIStub); err == nil {
		f.Add(b)
	}
	p := testParts([]byte("kernel bytes"), []byte("initrd"))
	f.Fuzz(func(t *testing.T, stub []byte) {
		im, err := Assemble(stub, p.Sections()...)
		if err != nil {
			return
		}
		img := readAll(t, im)
		if !bytes.Equal(img[:len(stub)][:2], []byte("MZ")) {
			t.Fatal("the image does not start with the stub")
		}
		if _, err := pe.NewFile(bytes.NewReader(stub)); err != nil {
			return // debug/pe refuses what Assemble took (e.g. odd optional headers): nothing to compare
		}
		checkImage(t, stub, img, p.Sections())
	})
}
