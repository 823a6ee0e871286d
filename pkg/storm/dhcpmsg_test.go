package storm

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/boot/pxe"
)

// TestRequestsClassified: ingot's own classifier (pkg/boot/pxe) reads what
// each simulated machine sends as the client it plays: a bootable PXE
// client of its architecture, iPXE only at the iPXE stage, with its GUID
// and UNDI version; every request asks for broadcast replies.
func TestRequestsClassified(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0x53, 0, 0, 0, 7}
	tests := map[string]struct {
		fw   Firmware
		st   stage
		want pxe.Client
	}{
		"BIOS PXE ROM":         {BIOS, stageFirmware, pxe.Client{Arch: pxe.ArchBIOS, ArchCode: 0, Firmware: pxe.BIOS, UNDI: "2.1", Bootable: true}},
		"iPXE (undionly.kpxe)": {BIOS, stageIPXE, pxe.Client{Arch: pxe.ArchBIOS, ArchCode: 0, Firmware: pxe.BIOS, IPXE: true, UNDI: "2.1", Bootable: true}},
		"EDK2 PXE":             {UEFI, stageFirmware, pxe.Client{Arch: pxe.ArchUEFIX64, ArchCode: 7, Firmware: pxe.UEFI, UNDI: "3.0", Bootable: true}},
		"iPXE (snponly.efi)":   {UEFI, stageIPXE, pxe.Client{Arch: pxe.ArchUEFIX64, ArchCode: 7, Firmware: pxe.UEFI, IPXE: true, UNDI: "3.16", Bootable: true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := discover(mac, tc.fw, tc.st, dhcpv4.TransactionID{1, 2, 3, 4})
			if err != nil {
				t.Fatal(err)
			}
			// As the server sees it: the bytes on the wire, parsed.
			m, err := dhcpv4.FromBytes(d.ToBytes())
			if err != nil {
				t.Fatal(err)
			}
			got := pxe.Classify(m)
			tc.want.GUID = got.GUID // derived from the MAC; checked below
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("classified (-want +got):\n%s", diff)
			}
			if got.GUID == "" {
				t.Errorf("option 97 %x not read as a GUID", m.Options.Get(dhcpv4.OptionClientMachineIdentifier))
			}
			if !m.IsBroadcast() {
				t.Error("the broadcast flag is not set")
			}
			offer, _ := dhcpv4.NewReplyFromRequest(m, dhcpv4.WithMessageType(dhcpv4.MessageTypeOffer),
				dhcpv4.WithYourIP(net.IPv4(10, 77, 16, 9)), dhcpv4.WithServerIP(net.IPv4(10, 77, 0, 1)),
				dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))))
			r, err := request(offer, tc.fw, tc.st)
			if err != nil {
				t.Fatal(err)
			}
			if r.MessageType() != dhcpv4.MessageTypeRequest || !r.RequestedIPAddress().Equal(net.IPv4(10, 77, 16, 9)) ||
				r.TransactionID != d.TransactionID || pxe.Classify(r).Arch != tc.want.Arch {
				t.Errorf("REQUEST: type %s, requested %v, xid %v, arch %q", r.MessageType(), r.RequestedIPAddress(), r.TransactionID, pxe.Classify(r).Arch)
			}
		})
	}
}

// TestCheckOffer: what each stage accepts as a boot offer.
func TestCheckOffer(t *testing.T) {
	offer := func(file string, yi net.IP) *dhcpv4.DHCPv4 {
		m, _ := dhcpv4.New(dhcpv4.WithMessageType(dhcpv4.MessageTypeOffer), dhcpv4.WithYourIP(yi))
		if file != "" {
			m.UpdateOption(dhcpv4.OptBootFileName(file))
		}
		return m
	}
	ip := net.IPv4(10, 77, 16, 9)
	tests := map[string]struct {
		m    *dhcpv4.DHCPv4
		st   stage
		okay bool
	}{
		"firmware, TFTP file":         {offer("undionly.kpxe", ip), stageFirmware, true},
		"firmware, no file":           {offer("", ip), stageFirmware, false},
		"firmware, a URL":             {offer("http://10.77.0.1:8080/ipxe", ip), stageFirmware, false},
		"iPXE, the script URL":        {offer("http://10.77.0.1:8080/ipxe?mac=02:53:00:00:00:07", ip), stageIPXE, true},
		"iPXE, the first stage again": {offer("undionly.kpxe", ip), stageIPXE, false},
		"no address":                  {offer("undionly.kpxe", net.IPv4zero), stageFirmware, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkOffer(tc.m, tc.st)
			if (err == nil) != tc.okay {
				t.Errorf("checkOffer = %v, want ok %v", err, tc.okay)
			}
		})
	}
}
