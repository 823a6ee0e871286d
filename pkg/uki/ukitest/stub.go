// Package ukitest holds test helpers for code that assembles UKIs.
package ukitest

import "encoding/binary"

// MinimalStub is a small PE32+ EFI application, standing in for systemd's
// stub where a test needs one that every machine has: one .text section,
// 0x600 bytes, headers with room for 16 more section headers. It does not
// run.
func MinimalStub() []byte {
	b := make([]byte, 0x600)
	le := binary.LittleEndian
	copy(b, "MZ")
	le.PutUint32(b[0x3c:], 0x40)
	copy(b[0x40:], "PE\x00\x00")
	coff := 0x44
	le.PutUint16(b[coff:], 0x8664)   // Machine: x86-64
	le.PutUint16(b[coff+2:], 1)      // NumberOfSections
	le.PutUint16(b[coff+16:], 240)   // SizeOfOptionalHeader
	le.PutUint16(b[coff+18:], 0x206) // Characteristics: executable
	opt := coff + 20
	le.PutUint16(b[opt:], 0x20b)     // PE32+
	le.PutUint32(b[opt+16:], 0x1000) // AddressOfEntryPoint
	le.PutUint32(b[opt+32:], 0x1000) // SectionAlignment
	le.PutUint32(b[opt+36:], 0x200)  // FileAlignment
	le.PutUint32(b[opt+56:], 0x2000) // SizeOfImage
	le.PutUint32(b[opt+60:], 0x400)  // SizeOfHeaders
	le.PutUint16(b[opt+68:], 10)     // Subsystem: EFI application
	le.PutUint32(b[opt+108:], 16)    // NumberOfRvaAndSizes
	sec := opt + 240
	copy(b[sec:], ".text")
	le.PutUint32(b[sec+8:], 0x10)
	le.PutUint32(b[sec+12:], 0x1000)
	le.PutUint32(b[sec+16:], 0x200)
	le.PutUint32(b[sec+20:], 0x400)
	le.PutUint32(b[sec+36:], 0x60000020)
	copy(b[0x400:], "\xc3text of the stub")
	return b
}
