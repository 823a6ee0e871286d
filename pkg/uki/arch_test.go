package uki

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
)

func TestArch(t *testing.T) {
	arm := minimalPE()
	binary.LittleEndian.PutUint16(arm[0x44:], 0xaa64)
	riscv := minimalPE()
	binary.LittleEndian.PutUint16(riscv[0x44:], 0x5064)
	noPE := minimalPE()
	copy(noPE[0x40:], "XX")
	for name, c := range map[string]struct {
		b    []byte
		want string // "" an error
	}{
		"x86-64":       {minimalPE(), ArchAMD64},
		"arm64":        {arm, ArchARM64},
		"riscv64":      {riscv, ""},
		"no PE header": {noPE, ""},
		"gzip":         {[]byte("\x1f\x8b\x08\x00 not a kernel, compressed" + string(make([]byte, 64))), ""},
		"short":        {[]byte("MZ"), ""},
	} {
		got, err := Arch(bytes.NewReader(c.b))
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%s: Arch = %q, %v; want %q", name, got, err, c.want)
		}
	}
	// Debian's stubs say what they are.
	for path, want := range map[string]string{EFIStub: ArchAMD64, EFIStubARM64: ArchARM64} {
		f, err := os.Open(path)
		if err != nil {
			t.Logf("skipping %s: %v", path, err)
			continue
		}
		got, err := Arch(f)
		f.Close()
		if got != want || err != nil {
			t.Errorf("Arch(%s) = %q, %v; want %q", path, got, err, want)
		}
		if StubFor(want) != path {
			t.Errorf("StubFor(%q) = %s, want %s", want, StubFor(want), path)
		}
	}
}
