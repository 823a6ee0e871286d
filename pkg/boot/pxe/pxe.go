// Package pxe classifies network-boot clients from the options of their
// DHCPv4 requests: which firmware (BIOS or UEFI), which CPU architecture,
// whether they boot over TFTP (PXE) or HTTP (UEFI HTTP boot), and whether the
// request already comes from iPXE. Classify is a pure function; the DHCP
// server decides what to answer from its result.
package pxe

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Firmware is the kind of firmware that sent the request.
type Firmware string

// Firmware kinds.
const (
	BIOS Firmware = "bios"
	UEFI Firmware = "uefi"
)

// Arch names, used as keys of the boot-file table and in the iPXE script URL.
const (
	ArchBIOS          = "bios"
	ArchUEFIIA32      = "uefi-ia32"
	ArchUEFIX64       = "uefi-x64"
	ArchUEFIARM32     = "uefi-arm32"
	ArchUEFIARM64     = "uefi-arm64"
	ArchUEFIX64HTTP   = "uefi-x64-http"
	ArchUEFIARM64HTTP = "uefi-arm64-http"
)

// Client is what a DHCP request says about the machine that sent it.
type Client struct {
	Arch     string   // one of the Arch* names; "" when unknown
	ArchCode int      // RFC 4578 option 93 value; -1 when absent
	Firmware Firmware // bios or uefi; "" when unknown
	HTTPBoot bool     // UEFI HTTP boot (arch 15-19 or option 60 "HTTPClient")
	IPXE     bool     // option 77 user class is "iPXE": already running iPXE
	GUID     string   // option 97 client machine identifier, when well formed
	UNDI     string   // option 94 network interface identifier "major.minor"
	Bootable bool     // Reasons is empty
	Reasons  []string // every reason the request is not a network-boot request we can serve
}

// archs maps RFC 4578 / IANA processor architecture types to our names.
var archs = map[int]struct {
	name string
	fw   Firmware
	http bool
}{
	0:  {ArchBIOS, BIOS, false},
	6:  {ArchUEFIIA32, UEFI, false},
	7:  {ArchUEFIX64, UEFI, false},
	9:  {ArchUEFIX64, UEFI, false}, // "EFI BC": early EDK2 builds sent 9 for x86-64 (RFC 4578 errata 4624)
	10: {ArchUEFIARM32, UEFI, false},
	11: {ArchUEFIARM64, UEFI, false},
	16: {ArchUEFIX64HTTP, UEFI, true},
	19: {ArchUEFIARM64HTTP, UEFI, true},
}

// Classify reads options 60, 77, 93, 94 and 97 of m. It never fails: what it
// cannot use is listed in Reasons.
func Classify(m *dhcpv4.DHCPv4) Client {
	c := Client{ArchCode: -1}
	vendor := string(m.Options.Get(dhcpv4.OptionClassIdentifier))
	switch {
	case strings.HasPrefix(vendor, "PXEClient"):
	case strings.HasPrefix(vendor, "HTTPClient"):
		c.HTTPBoot = true
	default:
		c.Reasons = append(c.Reasons, fmt.Sprintf("option 60 %q is not PXEClient or HTTPClient", vendor))
	}
	c.IPXE = isIPXE(m)

	code, why := archCode(m, vendor)
	if why != "" {
		c.Reasons = append(c.Reasons, why)
	}
	if code >= 0 {
		c.ArchCode = code
		if a, ok := archs[code]; ok {
			c.Arch, c.Firmware = a.name, a.fw
			c.HTTPBoot = c.HTTPBoot || a.http
		} else {
			c.Reasons = append(c.Reasons, fmt.Sprintf("architecture %d is not supported (want 0, 6, 7, 9, 10, 11, 16 or 19)", code))
		}
	}
	if c.HTTPBoot && c.Arch != "" && !strings.HasSuffix(c.Arch, "-http") {
		// HTTPClient in option 60 with a PXE arch code: some firmware sends
		// the TFTP arch (7) with HTTPClient. Boot it the HTTP way.
		switch c.Arch {
		case ArchUEFIX64:
			c.Arch = ArchUEFIX64HTTP
		case ArchUEFIARM64:
			c.Arch = ArchUEFIARM64HTTP
		}
	}
	c.UNDI = undi(m.Options.Get(dhcpv4.OptionClientNetworkInterfaceIdentifier))
	c.GUID = guid(m.Options.Get(dhcpv4.OptionClientMachineIdentifier))
	c.Bootable = len(c.Reasons) == 0
	return c
}

// isIPXE reports whether option 77 says iPXE. iPXE sends the raw 4 bytes
// "iPXE", not an RFC 3004 length-prefixed list; accept both forms.
func isIPXE(m *dhcpv4.DHCPv4) bool {
	uc := m.Options.Get(dhcpv4.OptionUserClassInformation)
	if string(uc) == "iPXE" {
		return true
	}
	// RFC 3004 form: len "iPXE" ...
	for len(uc) > 0 {
		n := int(uc[0])
		if n == 0 || 1+n > len(uc) {
			return false
		}
		if string(uc[1:1+n]) == "iPXE" {
			return true
		}
		uc = uc[1+n:]
	}
	return false
}

// archCode returns the client's architecture from option 93, or from option
// 60 when 93 is missing or malformed, and -1 with a reason when neither says.
func archCode(m *dhcpv4.DHCPv4, vendor string) (int, string) {
	if b := m.Options.Get(dhcpv4.OptionClientSystemArchitectureType); len(b) >= 2 {
		// Option 93 is a list of 16-bit types; clients send one. Odd trailing
		// bytes (seen from broken ROMs) are ignored.
		return int(binary.BigEndian.Uint16(b[:2])), ""
	}
	// Quirk: some PXE ROMs (old Intel Boot Agent, some Broadcom) omit option
	// 93 but carry the arch in option 60: "PXEClient:Arch:00007:UNDI:003016".
	if _, rest, ok := strings.Cut(vendor, ":Arch:"); ok {
		digits, _, _ := strings.Cut(rest, ":")
		if n, err := strconv.Atoi(digits); err == nil && n >= 0 && n <= 0xffff {
			return n, ""
		}
		return -1, fmt.Sprintf("option 60 %q has an unreadable Arch field", vendor)
	}
	if vendor == "" {
		return -1, "no option 93 (client architecture)"
	}
	return -1, fmt.Sprintf("no option 93 and option 60 %q names no Arch", vendor)
}

// undi renders option 94 (type 1, major, minor) as "major.minor".
func undi(b []byte) string {
	if len(b) != 3 || b[0] != 1 {
		return "" // absent or malformed: not needed to boot, so not a reason
	}
	return fmt.Sprintf("%d.%d", b[1], b[2])
}

// guid renders option 97 (type 0 + 16-byte UUID) in the SMBIOS byte order.
func guid(b []byte) string {
	// Quirk: some firmware sends 97 with 16 bytes and no leading type byte;
	// others send a zeroed or short value. Take 16 bytes when that is all
	// there is; ignore anything else (the GUID is informative only).
	switch {
	case len(b) == 17 && b[0] == 0:
		b = b[1:]
	case len(b) == 16:
	default:
		return ""
	}
	allZero := true
	for _, x := range b {
		if x != 0 {
			allZero = false
		}
	}
	if allZero {
		return ""
	}
	// SMBIOS stores the first three fields little-endian.
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16])
}
