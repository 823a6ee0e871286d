package storm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Firmware is what a simulated machine's network boot starts from.
type Firmware string

// The firmware kinds the harness plays.
const (
	// BIOS is a legacy PXE ROM (arch 0): it fetches undionly.kpxe by TFTP
	// with one request.
	BIOS Firmware = "bios"
	// UEFI is EDK2's own PXE (arch 7, as OVMF without a NIC ROM): it asks
	// the file's size first, aborts after the OACK, then fetches it
	// (captured in shared/LAB.md).
	UEFI Firmware = "uefi"
)

// stage is who sends a DHCP request: the firmware's PXE or iPXE.
type stage int

const (
	stageFirmware stage = iota
	stageIPXE
)

func (s stage) String() string {
	if s == stageIPXE {
		return "ipxe"
	}
	return "firmware"
}

// pxeIdentity is what one machine's requests say about it at one stage:
// options 60 (vendor class), 93 (arch) and 94 (UNDI version). The firmware
// rows follow the captures in shared/LAB.md (OVMF/EDK2 PXE: arch 7,
// "PXEClient:Arch:00007:UNDI:003000"); the legacy BIOS PXE ROM's are the
// PXE 2.1 values (UNDI 2.1), written, not captured (Debian ships no
// non-iPXE BIOS PXE ROM). iPXE's are the captured ones of undionly.kpxe and
// snponly.efi.
func pxeIdentity(fw Firmware, st stage) (vendor string, arch uint16, undi [3]byte) {
	switch {
	case fw == UEFI && st == stageIPXE:
		return "PXEClient:Arch:00007:UNDI:003010", 7, [3]byte{1, 3, 16}
	case fw == UEFI:
		return "PXEClient:Arch:00007:UNDI:003000", 7, [3]byte{1, 3, 0}
	default: // BIOS, both stages: iPXE BIOS sends what the PXE ROM did
		return "PXEClient:Arch:00000:UNDI:002001", 0, [3]byte{1, 2, 1}
	}
}

// ipxeFeatures is option 175 as iPXE sends it: its encapsulated feature
// options (bus ID, and HTTP, TFTP, DNS and bzImage support, its version).
// Written from iPXE's include/ipxe/dhcp.h feature codes, not captured.
var ipxeFeatures = []byte{
	0xb1, 0x05, 0x01, 0x1a, 0xf4, 0x10, 0x00, // 177 bus-id: PCI 1af4:1000 (virtio-net)
	0x13, 0x01, 0x01, // 19 HTTP
	0x15, 0x01, 0x01, // 21 TFTP
	0x17, 0x01, 0x01, // 23 DNS
	0x18, 0x01, 0x01, // 24 bzImage
	0x19, 0x01, 0x01, // 25 multiboot
	0xeb, 0x03, 0x01, 0x00, 0x00, // 235 version 1.0.0
}

// guid is option 97 for a machine: type 0, then a UUID derived from its
// MAC (real firmware sends its SMBIOS system UUID).
func guid(mac net.HardwareAddr) []byte {
	sum := sha256.Sum256(mac)
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return append([]byte{0}, u...)
}

// pxeOptions are the options every request of the stage carries.
func pxeOptions(mac net.HardwareAddr, fw Firmware, st stage) []dhcpv4.Modifier {
	vendor, arch, undi := pxeIdentity(fw, st)
	var a [2]byte
	binary.BigEndian.PutUint16(a[:], arch)
	mods := []dhcpv4.Modifier{
		dhcpv4.WithBroadcast(true), // see the package comment: replies reach hundreds of MACs
		dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1464)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(vendor)),
		dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, a[:]),
		dhcpv4.WithGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, undi[:]),
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, guid(mac)),
		dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer,
			dhcpv4.OptionHostName, dhcpv4.OptionDomainName, dhcpv4.OptionVendorSpecificInformation,
			dhcpv4.OptionClassIdentifier, dhcpv4.OptionTFTPServerName, dhcpv4.OptionBootfileName),
	}
	if st == stageIPXE {
		// iPXE sends its user class as the raw 4 bytes "iPXE" (not RFC
		// 3004 length-prefixed: shared/LAB.md) and its feature list.
		mods = append(mods,
			dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
			dhcpv4.WithGeneric(dhcpv4.OptionEtherboot, ipxeFeatures),
			dhcpv4.WithOption(dhcpv4.OptClientIdentifier(append([]byte{1}, mac...))))
	}
	return mods
}

// discover is a stage's DHCPDISCOVER for mac with transaction xid.
func discover(mac net.HardwareAddr, fw Firmware, st stage, xid dhcpv4.TransactionID) (*dhcpv4.DHCPv4, error) {
	mods := append([]dhcpv4.Modifier{dhcpv4.WithTransactionID(xid)}, pxeOptions(mac, fw, st)...)
	return dhcpv4.NewDiscovery(mac, mods...)
}

// request is the DHCPREQUEST (SELECTING) that takes offer.
func request(offer *dhcpv4.DHCPv4, fw Firmware, st stage) (*dhcpv4.DHCPv4, error) {
	mods := append([]dhcpv4.Modifier{dhcpv4.WithTransactionID(offer.TransactionID)}, pxeOptions(offer.ClientHWAddr, fw, st)...)
	return dhcpv4.NewRequestFromOffer(offer, mods...)
}

// bootFile is the boot file an OFFER or ACK names: option 67, else the
// file field.
func bootFile(m *dhcpv4.DHCPv4) string {
	if f := m.BootFileNameOption(); f != "" {
		return f
	}
	return strings.TrimRight(m.BootFileName, "\x00")
}

// checkOffer says why a reply is not a usable boot offer for the stage: a
// firmware's PXE ignores an offer without a boot file and a next server,
// iPXE one without the script URL.
func checkOffer(m *dhcpv4.DHCPv4, st stage) error {
	ip := m.YourIPAddr.To4()
	if ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("%s from %s: no address (yiaddr %v)", m.MessageType(), m.ServerIdentifier(), m.YourIPAddr)
	}
	f := bootFile(m)
	switch {
	case st == stageIPXE && !strings.HasPrefix(f, "http://") && !strings.HasPrefix(f, "https://"):
		return fmt.Errorf("%s to iPXE names boot file %q, expected the script's http:// URL", m.MessageType(), f)
	case st == stageFirmware && (f == "" || strings.Contains(f, "://")):
		return fmt.Errorf("%s to firmware PXE names boot file %q, expected a TFTP file name", m.MessageType(), f)
	}
	return nil
}
