package pxe

import (
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

func req(t *testing.T, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	t.Helper()
	mods := []dhcpv4.Modifier{dhcpv4.WithTransactionID(dhcpv4.TransactionID{1, 2, 3, 4})}
	for _, o := range opts {
		mods = append(mods, dhcpv4.WithOption(o))
	}
	m, err := dhcpv4.NewDiscovery(net.HardwareAddr{0x52, 0x54, 0, 0x77, 0, 0x10}, mods...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func gen(code dhcpv4.OptionCode, b ...byte) dhcpv4.Option { return dhcpv4.OptGeneric(code, b) }
func vendor(s string) dhcpv4.Option                       { return dhcpv4.OptClassIdentifier(s) }

var (
	arch0  = gen(dhcpv4.OptionClientSystemArchitectureType, 0, 0)
	arch7  = gen(dhcpv4.OptionClientSystemArchitectureType, 0, 7)
	undi31 = gen(dhcpv4.OptionClientNetworkInterfaceIdentifier, 1, 3, 16)
	guid97 = gen(dhcpv4.OptionClientMachineIdentifier, 0,
		0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff)
	ipxeRaw = gen(dhcpv4.OptionUserClassInformation, 'i', 'P', 'X', 'E')
)

func TestClassify(t *testing.T) {
	tests := map[string]struct {
		opts []dhcpv4.Option
		want Client
	}{
		"ovmf pxe (captured)": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:00007:UNDI:003000"), arch7, undi31, guid97},
			want: Client{Arch: ArchUEFIX64, ArchCode: 7, Firmware: UEFI, GUID: "00112233-4455-6677-8899-aabbccddeeff", UNDI: "3.16", Bootable: true},
		},
		"ipxe efi (captured)": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:00007:UNDI:003010"), arch7, ipxeRaw},
			want: Client{Arch: ArchUEFIX64, ArchCode: 7, Firmware: UEFI, IPXE: true, Bootable: true},
		},
		"ipxe bios (captured)": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:00000:UNDI:002001"), arch0, ipxeRaw},
			want: Client{Arch: ArchBIOS, ArchCode: 0, Firmware: BIOS, IPXE: true, Bootable: true},
		},
		"ipxe rfc3004 user class": {
			opts: []dhcpv4.Option{vendor("PXEClient"), arch0, gen(dhcpv4.OptionUserClassInformation, 4, 'i', 'P', 'X', 'E')},
			want: Client{Arch: ArchBIOS, ArchCode: 0, Firmware: BIOS, IPXE: true, Bootable: true},
		},
		"efi bc arch 9": {
			opts: []dhcpv4.Option{vendor("PXEClient"), gen(dhcpv4.OptionClientSystemArchitectureType, 0, 9)},
			want: Client{Arch: ArchUEFIX64, ArchCode: 9, Firmware: UEFI, Bootable: true},
		},
		"arm64 uefi": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:00011:UNDI:003000"), gen(dhcpv4.OptionClientSystemArchitectureType, 0, 11)},
			want: Client{Arch: ArchUEFIARM64, ArchCode: 11, Firmware: UEFI, Bootable: true},
		},
		"x64 http boot": {
			opts: []dhcpv4.Option{vendor("HTTPClient:Arch:00016:UNDI:003000"), gen(dhcpv4.OptionClientSystemArchitectureType, 0, 16)},
			want: Client{Arch: ArchUEFIX64HTTP, ArchCode: 16, Firmware: UEFI, HTTPBoot: true, Bootable: true},
		},
		"arm64 http boot": {
			opts: []dhcpv4.Option{vendor("HTTPClient"), gen(dhcpv4.OptionClientSystemArchitectureType, 0, 19)},
			want: Client{Arch: ArchUEFIARM64HTTP, ArchCode: 19, Firmware: UEFI, HTTPBoot: true, Bootable: true},
		},
		"httpclient with pxe arch": {
			opts: []dhcpv4.Option{vendor("HTTPClient"), arch7},
			want: Client{Arch: ArchUEFIX64HTTP, ArchCode: 7, Firmware: UEFI, HTTPBoot: true, Bootable: true},
		},
		"no option 93, arch in option 60": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:00007:UNDI:003016")},
			want: Client{Arch: ArchUEFIX64, ArchCode: 7, Firmware: UEFI, Bootable: true},
		},
		"no option 93, bad arch in option 60": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:x7:UNDI:003016")},
			want: Client{ArchCode: -1, Reasons: []string{`option 60 "PXEClient:Arch:x7:UNDI:003016" has an unreadable Arch field`}},
		},
		"no option 93, bare PXEClient": {
			opts: []dhcpv4.Option{vendor("PXEClient")},
			want: Client{ArchCode: -1, Reasons: []string{`no option 93 and option 60 "PXEClient" names no Arch`}},
		},
		"plain dhcp client": {
			opts: []dhcpv4.Option{vendor("udhcp 1.35.0")},
			want: Client{ArchCode: -1, Reasons: []string{
				`option 60 "udhcp 1.35.0" is not PXEClient or HTTPClient`,
				`no option 93 and option 60 "udhcp 1.35.0" names no Arch`}},
		},
		"nothing at all": {
			want: Client{ArchCode: -1, Reasons: []string{`option 60 "" is not PXEClient or HTTPClient`, "no option 93 (client architecture)"}},
		},
		"unsupported arch": {
			opts: []dhcpv4.Option{vendor("PXEClient"), gen(dhcpv4.OptionClientSystemArchitectureType, 0, 27)},
			want: Client{ArchCode: 27, Reasons: []string{"architecture 27 is not supported (want 0, 6, 7, 9, 10, 11, 16 or 19)"}},
		},
		"odd-length option 93": {
			opts: []dhcpv4.Option{vendor("PXEClient"), gen(dhcpv4.OptionClientSystemArchitectureType, 0, 7, 1)},
			want: Client{Arch: ArchUEFIX64, ArchCode: 7, Firmware: UEFI, Bootable: true},
		},
		"one-byte option 93 falls back to 60": {
			opts: []dhcpv4.Option{vendor("PXEClient:Arch:00000"), gen(dhcpv4.OptionClientSystemArchitectureType, 7)},
			want: Client{Arch: ArchBIOS, ArchCode: 0, Firmware: BIOS, Bootable: true},
		},
		"malformed 97 and 94 are ignored": {
			opts: []dhcpv4.Option{vendor("PXEClient"), arch0,
				gen(dhcpv4.OptionClientMachineIdentifier, 0, 1, 2),
				gen(dhcpv4.OptionClientNetworkInterfaceIdentifier, 2, 1)},
			want: Client{Arch: ArchBIOS, ArchCode: 0, Firmware: BIOS, Bootable: true},
		},
		"97 without type byte": {
			opts: []dhcpv4.Option{vendor("PXEClient"), arch0, gen(dhcpv4.OptionClientMachineIdentifier,
				0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff)},
			want: Client{Arch: ArchBIOS, ArchCode: 0, Firmware: BIOS, GUID: "00112233-4455-6677-8899-aabbccddeeff", Bootable: true},
		},
		"all-zero 97": {
			opts: []dhcpv4.Option{vendor("PXEClient"), arch0, gen(dhcpv4.OptionClientMachineIdentifier, make([]byte, 17)...)},
			want: Client{Arch: ArchBIOS, ArchCode: 0, Firmware: BIOS, Bootable: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Classify(req(t, tc.opts...))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Classify (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzClassify: any options a client sends classify without panicking, and
// Bootable agrees with Reasons.
func FuzzClassify(f *testing.F) {
	f.Add([]byte("PXEClient:Arch:00007:UNDI:003000"), []byte{0, 7}, []byte("iPXE"), []byte{1, 3, 16}, make([]byte, 17))
	f.Add([]byte("HTTPClient"), []byte{0, 16}, []byte{4, 'i', 'P', 'X', 'E'}, []byte{}, []byte{0, 1})
	f.Add([]byte("PXEClient:Arch:"), []byte{7}, []byte{255, 1}, []byte{2}, []byte{})
	f.Fuzz(func(t *testing.T, vendor, arch, uc, ndi, uuid []byte) {
		m, err := dhcpv4.New()
		if err != nil {
			t.Fatal(err)
		}
		for code, v := range map[dhcpv4.OptionCode][]byte{dhcpv4.OptionClassIdentifier: vendor,
			dhcpv4.OptionClientSystemArchitectureType: arch, dhcpv4.OptionUserClassInformation: uc,
			dhcpv4.OptionClientNetworkInterfaceIdentifier: ndi, dhcpv4.OptionClientMachineIdentifier: uuid} {
			if len(v) > 0 {
				m.UpdateOption(dhcpv4.OptGeneric(code, v))
			}
		}
		c := Classify(m)
		if c.Bootable != (len(c.Reasons) == 0) {
			t.Fatalf("Bootable %v with reasons %q", c.Bootable, c.Reasons)
		}
		if c.Bootable && (c.Arch == "" || c.Firmware == "") {
			t.Fatalf("bootable without arch/firmware: %+v", c)
		}
	})
}
