package dhcp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingot-dev/ingot/pkg/machine"
)

var update = flag.Bool("update", os.Getenv("UPDATE_TESTDATA") != "", "rewrite testdata/*.golden")

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	macA = "52:54:00:00:00:0a"
	macB = "52:54:00:00:00:0b"
	macR = "52:54:00:00:00:ee" // enrolled, reserved 10.77.0.50
)

func baseConfig() Config {
	return Config{
		Interface: "br0",
		ServerIP:  netip.MustParseAddr("10.77.0.1"),
		Mode:      ModeFull,
		Pools: []Pool{
			{Subnet: netip.MustParsePrefix("10.77.0.0/24"), Start: netip.MustParseAddr("10.77.0.100"),
				End: netip.MustParseAddr("10.77.0.199"), Router: netip.MustParseAddr("10.77.0.1"),
				DNS: []netip.Addr{netip.MustParseAddr("10.77.0.1")}, Domain: "lab.ingot"},
			{Subnet: netip.MustParsePrefix("10.88.0.0/24"), Start: netip.MustParseAddr("10.88.0.10"),
				End: netip.MustParseAddr("10.88.0.20"), Router: netip.MustParseAddr("10.88.0.1"), LeaseTime: 10 * time.Minute},
		},
		HTTPBase:  "http://10.77.0.1:8080",
		Unknown:   UnknownDiscover,
		LeaseTime: time.Hour,
	}
}

func enrolled() []*machine.Machine {
	return []*machine.Machine{
		{ID: "m-gpu1", Name: "gpu1", MACs: []string{macA}, State: machine.StateReady},
		{ID: "m-gpu2", Name: "gpu2", MACs: []string{macB}, State: machine.StateReady},
		{ID: "m-res", Name: "res", MACs: []string{macR}, State: machine.StateReady, IPv4: "10.77.0.50"},
	}
}

// Client personalities, as captured from real clients (shared/LAB.md).
var (
	ovmf = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7})),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 3, 0})),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, []byte("0123456789abcdef")...))),
	}
	biosFirmware = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 0})),
	}
	ipxeBIOS = append(biosFirmware[:2:2],
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE"))))
	ipxeEFI = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003010")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7})),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE"))),
	}
	arm64 = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00011:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 11})),
	}
	httpX64 = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 16})),
	}
	httpARM64 = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00019:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 19})),
	}
	udhcpc = []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("udhcp 1.35.0")),
		dhcpv4.WithOption(dhcpv4.OptHostName("node")),
	}
	relayed = []dhcpv4.Modifier{
		dhcpv4.WithGatewayIP(net.IPv4(10, 88, 0, 1)),
		dhcpv4.WithOption(dhcpv4.OptRelayAgentInfo(
			dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(1), []byte("swp7")),
			dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(2), []byte("leaf3")))),
	}
)

// scn is one running exchange: the addresses handed out so far, by MAC.
type scn struct{ ip map[string]net.IP }

type step struct {
	req     func(s *scn) *dhcpv4.DHCPv4
	port    int           // 0 = 67
	advance time.Duration // clock moves before the step
	want    string        // reply type; "" = no reply
	wantIP  string        // yiaddr, when checked
}

func pkt(mac string, t dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		panic(err)
	}
	base := []dhcpv4.Modifier{dhcpv4.WithTransactionID(dhcpv4.TransactionID{0xca, 0xfe, hw[4], hw[5]}),
		dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(t), dhcpv4.WithBroadcast(true)}
	m, err := dhcpv4.New(append(base, mods...)...)
	if err != nil {
		panic(err)
	}
	return m
}

func discover(mac string, mods ...dhcpv4.Modifier) func(*scn) *dhcpv4.DHCPv4 {
	return func(*scn) *dhcpv4.DHCPv4 { return pkt(mac, dhcpv4.MessageTypeDiscover, mods...) }
}

// selecting is the REQUEST after an OFFER: server id + requested address.
func selecting(mac, server string, mods ...dhcpv4.Modifier) func(*scn) *dhcpv4.DHCPv4 {
	return func(s *scn) *dhcpv4.DHCPv4 {
		return pkt(mac, dhcpv4.MessageTypeRequest, append([]dhcpv4.Modifier{
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(server))),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(s.ip[mac]))}, mods...)...)
	}
}

// initReboot is a REQUEST naming ip without a server id.
func initReboot(mac, ip string, mods ...dhcpv4.Modifier) func(*scn) *dhcpv4.DHCPv4 {
	return func(*scn) *dhcpv4.DHCPv4 {
		return pkt(mac, dhcpv4.MessageTypeRequest, append([]dhcpv4.Modifier{
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip)))}, mods...)...)
	}
}

// renew is a RENEWING REQUEST: ciaddr set, unicast, no server id.
func renew(mac string, mods ...dhcpv4.Modifier) func(*scn) *dhcpv4.DHCPv4 {
	return func(s *scn) *dhcpv4.DHCPv4 {
		return pkt(mac, dhcpv4.MessageTypeRequest, append([]dhcpv4.Modifier{
			dhcpv4.WithClientIP(s.ip[mac]), dhcpv4.WithBroadcast(false)}, mods...)...)
	}
}

func release(mac string) func(*scn) *dhcpv4.DHCPv4 {
	return func(s *scn) *dhcpv4.DHCPv4 {
		return pkt(mac, dhcpv4.MessageTypeRelease, dhcpv4.WithClientIP(s.ip[mac]), dhcpv4.WithBroadcast(false),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))))
	}
}

func decline(mac string) func(*scn) *dhcpv4.DHCPv4 {
	return func(s *scn) *dhcpv4.DHCPv4 {
		return pkt(mac, dhcpv4.MessageTypeDecline, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(s.ip[mac])),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))))
	}
}

func inform(mac, ip string, mods ...dhcpv4.Modifier) func(*scn) *dhcpv4.DHCPv4 {
	return func(*scn) *dhcpv4.DHCPv4 {
		return pkt(mac, dhcpv4.MessageTypeInform, append([]dhcpv4.Modifier{
			dhcpv4.WithClientIP(net.ParseIP(ip)), dhcpv4.WithBroadcast(false)}, mods...)...)
	}
}

func dora(mac, ip string, mods ...dhcpv4.Modifier) []step {
	return []step{
		{req: discover(mac, mods...), want: "OFFER", wantIP: ip},
		{req: selecting(mac, "10.77.0.1", mods...), want: "ACK", wantIP: ip},
	}
}

func cat(steps ...[]step) []step {
	var out []step
	for _, s := range steps {
		out = append(out, s...)
	}
	return out
}

func TestHandleExchanges(t *testing.T) {
	tests := map[string]struct {
		cfg      func(*Config)
		machines []*machine.Machine // nil = enrolled()
		steps    []step
	}{
		"full-bios-firmware": {steps: dora(macA, "10.77.0.100", biosFirmware...)},
		"full-ovmf-uefi-x64": {steps: dora(macA, "10.77.0.100", ovmf...)},
		"full-arm64":         {steps: dora(macA, "10.77.0.100", arm64...)},
		"full-http-x64":      {steps: dora(macA, "10.77.0.100", httpX64...)},
		"full-http-arm64":    {steps: dora(macA, "10.77.0.100", httpARM64...)},
		"full-ipxe-bios":     {steps: dora(macA, "10.77.0.100", ipxeBIOS...)},
		"full-ipxe-efi":      {steps: dora(macA, "10.77.0.100", ipxeEFI...)},
		"full-plain-client":  {steps: dora(macA, "10.77.0.100", udhcpc...)},
		"full-two-clients": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), dora(macB, "10.77.0.101", udhcpc...),
			// A retransmitted DISCOVER gets the same address again.
			[]step{{req: discover(macB, udhcpc...), want: "OFFER", wantIP: "10.77.0.101"}})},
		"full-requested-address": {steps: []step{
			{req: discover(macA, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 150)))), want: "OFFER", wantIP: "10.77.0.150"},
			{req: discover(macB, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 150)))), want: "OFFER", wantIP: "10.77.0.100"},
			{req: discover(macB, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 99, 0, 1)))), want: "OFFER", wantIP: "10.77.0.100"},
		}},
		"full-relay-option82": {steps: []step{
			{req: discover(macA, append(relayed, ipxeEFI...)...), want: "OFFER", wantIP: "10.88.0.10"},
			{req: func(s *scn) *dhcpv4.DHCPv4 {
				return pkt(macA, dhcpv4.MessageTypeRequest, append(append(relayed, ipxeEFI...),
					dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))),
					dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(s.ip[macA])))...)
			}, want: "ACK", wantIP: "10.88.0.10"},
			// INIT-REBOOT through the relay naming an address of another subnet.
			{req: initReboot(macA, "10.77.0.120", relayed...), want: "NAK"},
		}},
		"full-relay-unknown-subnet": {steps: []step{
			{req: discover(macA, dhcpv4.WithGatewayIP(net.IPv4(10, 99, 0, 1))), want: ""},
		}},
		"full-reservation": {steps: cat(dora(macR, "10.77.0.50", ipxeBIOS...), []step{
			{req: initReboot(macR, "10.77.0.120"), want: "NAK"},
			{req: initReboot(macR, "10.77.0.50"), want: "ACK", wantIP: "10.77.0.50"},
		})},
		"full-init-reboot-wrong-subnet":  {steps: []step{{req: initReboot(macA, "192.168.1.7"), want: "NAK"}}},
		"full-init-reboot-outside-range": {steps: []step{{req: initReboot(macA, "10.77.0.7"), want: "NAK"}}},
		"full-init-reboot-free":          {steps: []step{{req: initReboot(macA, "10.77.0.170"), want: "ACK", wantIP: "10.77.0.170"}}},
		"full-request-taken": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), []step{
			{req: initReboot(macB, "10.77.0.100"), want: "NAK"},
		})},
		"full-request-other-server": {steps: []step{
			{req: discover(macA), want: "OFFER", wantIP: "10.77.0.100"},
			{req: selecting(macA, "10.77.0.254"), want: ""},
			// The hold is gone: the next client may have the address.
			{req: discover(macB, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 100)))), want: "OFFER", wantIP: "10.77.0.100"},
		}},
		"full-renew-rebind": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), []step{
			{req: renew(macA), advance: 30 * time.Minute, want: "ACK", wantIP: "10.77.0.100"},
			{req: func(s *scn) *dhcpv4.DHCPv4 { // REBINDING: ciaddr and broadcast
				return pkt(macA, dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(s.ip[macA]))
			}, advance: 50 * time.Minute, want: "ACK", wantIP: "10.77.0.100"},
		})},
		"full-release": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), []step{
			{req: release(macA), want: ""},
			{req: discover(macB, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 100)))), want: "OFFER", wantIP: "10.77.0.100"},
		})},
		"full-decline": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), []step{
			{req: decline(macA), want: ""},
			{req: discover(macA), want: "OFFER", wantIP: "10.77.0.101"},
			{req: discover(macB, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 100)))), want: "OFFER", wantIP: "10.77.0.102"},
			// After DeclineHold (10 min) the address is usable again.
			{req: discover("52:54:00:00:00:0c", dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 100)))), advance: 11 * time.Minute, want: "OFFER", wantIP: "10.77.0.100"},
		})},
		"full-decline-by-another-client": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), []step{
			// macB declines macA's address (and a free one): ignored, so
			// neither is kept out of use.
			{req: func(*scn) *dhcpv4.DHCPv4 {
				return pkt(macB, dhcpv4.MessageTypeDecline, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 101))),
					dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 77, 0, 1))))
			}, want: ""},
			{req: discover(macB), want: "OFFER", wantIP: "10.77.0.101"},
			{req: renew(macA), want: "ACK", wantIP: "10.77.0.100"},
		})},
		"full-expiry": {steps: cat(dora(macA, "10.77.0.100", udhcpc...), []step{
			{req: discover(macB, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 100)))), advance: 59 * time.Minute, want: "OFFER", wantIP: "10.77.0.101"},
			{req: discover("52:54:00:00:00:0c", dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(10, 77, 0, 100)))), advance: 2 * time.Minute, want: "OFFER", wantIP: "10.77.0.100"},
		})},
		"full-inform":         {steps: []step{{req: inform(macA, "10.77.0.33", ipxeBIOS...), want: "ACK", wantIP: "0.0.0.0"}}},
		"full-inform-foreign": {steps: []step{{req: inform(macA, "192.168.9.9"), want: ""}}},
		"full-unknown-ignore": {
			cfg:      func(c *Config) { c.Unknown = UnknownIgnore },
			machines: []*machine.Machine{},
			steps:    dora(macA, "10.77.0.100", ovmf...),
		},
		"full-unknown-discover": {
			machines: []*machine.Machine{},
			steps:    cat(dora(macA, "10.77.0.100", ovmf...), dora(macA, "10.77.0.100", ipxeEFI...)),
		},
		"full-exhausted": {
			cfg: func(c *Config) {
				c.Pools[0].Start, c.Pools[0].End = netip.MustParseAddr("10.77.0.100"), netip.MustParseAddr("10.77.0.101")
			},
			steps: cat(dora(macA, "10.77.0.100"), dora(macR, "10.77.0.50"), []step{
				{req: discover("52:54:00:00:00:01"), want: "OFFER", wantIP: "10.77.0.101"},
				{req: discover("52:54:00:00:00:02"), want: ""},
				// Offers expire: after OfferHold the address is free again.
				{req: discover("52:54:00:00:00:02"), advance: 2 * time.Minute, want: "OFFER", wantIP: "10.77.0.101"},
			}),
		},
		"full-not-ethernet": {steps: []step{{req: func(*scn) *dhcpv4.DHCPv4 {
			m := pkt(macA, dhcpv4.MessageTypeDiscover)
			m.ClientHWAddr = m.ClientHWAddr[:4]
			return m
		}, want: ""}}},
		// hlen 8 (an EUI-64) and 16 (the most chaddr holds): not a 6-byte
		// Ethernet MAC, so no lease, in either mode.
		"full-eui64-chaddr": {steps: []step{{req: func(*scn) *dhcpv4.DHCPv4 {
			m := pkt(macA, dhcpv4.MessageTypeDiscover)
			m.ClientHWAddr = append(m.ClientHWAddr, 0xfe, 0x80)
			return m
		}, want: ""}}},
		"full-16-byte-chaddr": {steps: []step{{req: func(*scn) *dhcpv4.DHCPv4 {
			m := pkt(macA, dhcpv4.MessageTypeDiscover)
			m.ClientHWAddr = append(m.ClientHWAddr, make([]byte, 10)...)
			return m
		}, want: ""}}},
		"proxy-eui64-chaddr": {cfg: func(c *Config) { c.Mode = ModeProxy; c.Pools = nil }, steps: []step{{req: func(*scn) *dhcpv4.DHCPv4 {
			m := pkt(macA, dhcpv4.MessageTypeDiscover, ovmf...)
			m.ClientHWAddr = append(m.ClientHWAddr, 0xfe, 0x80)
			return m
		}, want: ""}}},
		"full-port-4011-ignored": {steps: []step{{req: discover(macA, ovmf...), port: PXEPort, want: ""}}},
		"proxy-ovmf": {
			cfg: func(c *Config) { c.Mode = ModeProxy; c.Pools = nil },
			steps: []step{
				{req: discover(macA, ovmf...), want: "OFFER", wantIP: "0.0.0.0"},
				// After the site's DHCP server leased 192.168.5.20, EDK2 asks us on 4011.
				{req: func(*scn) *dhcpv4.DHCPv4 {
					return pkt(macA, dhcpv4.MessageTypeRequest, append(ovmf, dhcpv4.WithClientIP(net.IPv4(192, 168, 5, 20)),
						dhcpv4.WithBroadcast(false))...)
				}, port: PXEPort, want: "ACK", wantIP: "0.0.0.0"},
				// The REQUEST for the site server's offer is not ours.
				{req: selecting(macA, "192.168.5.1", ovmf...), want: ""},
			},
		},
		"proxy-ipxe": {
			cfg:   func(c *Config) { c.Mode = ModeProxy; c.Pools = nil },
			steps: []step{{req: discover(macA, ipxeBIOS...), want: "OFFER", wantIP: "0.0.0.0"}},
		},
		"proxy-http-boot": {
			cfg:   func(c *Config) { c.Mode = ModeProxy; c.Pools = nil },
			steps: []step{{req: discover(macA, httpX64...), want: "OFFER", wantIP: "0.0.0.0"}},
		},
		"proxy-plain-client": {
			cfg:   func(c *Config) { c.Mode = ModeProxy; c.Pools = nil },
			steps: []step{{req: discover(macA, udhcpc...), want: ""}},
		},
		"proxy-unknown-ignore": {
			cfg:      func(c *Config) { c.Mode = ModeProxy; c.Pools = nil; c.Unknown = UnknownIgnore },
			machines: []*machine.Machine{},
			steps:    []step{{req: discover(macA, ovmf...), want: ""}},
		},
		"off": {
			cfg:   func(c *Config) { c.Mode = ModeOff },
			steps: []step{{req: discover(macA, ovmf...), want: ""}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ms := tc.machines
			if ms == nil {
				ms = enrolled()
			}
			st := newFakeStore(ms...)
			now := t0
			cfg := baseConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			cfg.Store, cfg.Discover, cfg.Now = st, st, func() time.Time { return now }
			h, err := NewHandler(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := &scn{ip: map[string]net.IP{}}
			var out strings.Builder
			for i, stp := range tc.steps {
				now = now.Add(stp.advance)
				req := stp.req(s)
				in := Meta{Port: 67, Peer: netip.MustParseAddrPort("0.0.0.0:68")}
				if stp.port != 0 {
					in = Meta{Port: stp.port, Peer: netip.MustParseAddrPort("192.168.5.20:4011")}
				}
				// Round-trip through bytes as on the wire.
				req, err := dhcpv4.FromBytes(req.ToBytes())
				if err != nil {
					t.Fatal(err)
				}
				reply, err := h.Handle(context.Background(), req, in)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				fmt.Fprintf(&out, "=== step %d at +%s: %s from %s (port %d)\n", i, now.Sub(t0), req.MessageType(), req.ClientHWAddr, in.Port)
				got := ""
				if reply != nil {
					got = reply.MessageType().String()
					if _, err := dhcpv4.FromBytes(reply.ToBytes()); err != nil {
						t.Errorf("step %d: reply does not decode: %v", i, err)
					}
					fmt.Fprintf(&out, "-> %s\n%s", Destination(req, reply, in).Addr, reply.Summary())
					if yi := reply.YourIPAddr; yi != nil && !yi.IsUnspecified() {
						s.ip[req.ClientHWAddr.String()] = yi
					}
				} else {
					out.WriteString("-> no reply\n")
				}
				if got != stp.want {
					t.Errorf("step %d: reply %q, want %q", i, got, stp.want)
				}
				if stp.wantIP != "" && reply != nil && reply.YourIPAddr.String() != stp.wantIP {
					t.Errorf("step %d: yiaddr %s, want %s", i, reply.YourIPAddr, stp.wantIP)
				}
			}
			out.WriteString("=== store\n" + st.dump())
			golden(t, filepath.Join("testdata", name+".golden"), out.String())
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with UPDATE_TESTDATA=1 to create it): %v", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got; UPDATE_TESTDATA=1 rewrites it):\n%s", path, d)
	}
}

func TestHandleStoreFailure(t *testing.T) {
	st := newFakeStore(enrolled()...)
	cfg := baseConfig()
	cfg.Store, cfg.Discover = st, st
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	offer, err := h.Handle(context.Background(), pkt(macA, dhcpv4.MessageTypeDiscover), Meta{Port: 67})
	if err != nil || offer == nil {
		t.Fatalf("discover: %v, %v", offer, err)
	}
	boom := errors.New("disk on fire")
	st.fail = boom
	s := &scn{ip: map[string]net.IP{macA: offer.YourIPAddr}}
	reply, err := h.Handle(context.Background(), selecting(macA, "10.77.0.1")(s), Meta{Port: 67})
	if reply != nil || !errors.Is(err, boom) {
		t.Fatalf("request with a failing store: reply %v, err %v; want no reply and the store's error", reply, err)
	}
	for _, c := range []struct {
		typ, result string
		want        float64
	}{{"discover", "offer", 1}, {"request", "error", 1}, {"request", "ack", 0}} {
		if got := testutil.ToFloat64(h.metrics.packets.WithLabelValues(c.typ, c.result)); got != c.want {
			t.Errorf("ingot_dhcp_packets_total{type=%s,result=%s} = %v, want %v", c.typ, c.result, got, c.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := map[string]struct {
		mod  func(*Config)
		want string
	}{
		"bad mode":      {func(c *Config) { c.Mode = "relay" }, `dhcp mode "relay": expected full, proxy or off`},
		"bad unknown":   {func(c *Config) { c.Unknown = "boot" }, `dhcp unknown-machine policy "boot": expected ignore or discover`},
		"no pools":      {func(c *Config) { c.Pools = nil }, "dhcp full mode needs at least one pool (--dhcp-pool SUBNET,START-END)"},
		"no store":      {func(c *Config) { c.Store = nil }, "dhcp: no store configured"},
		"no discoverer": {func(c *Config) { c.Discover = nil }, "dhcp: --unknown discover needs a discoverer (the fleet service) to record unknown machines"},
		"no server ip":  {func(c *Config) { c.ServerIP = netip.Addr{} }, "dhcp: server IP must be set to an IPv4 address of the served interface"},
		"range outside": {func(c *Config) { c.Pools[0].End = netip.MustParseAddr("10.78.0.1") },
			"pool 10.77.0.0/24: range 10.77.0.100-10.78.0.1 is not inside the subnet"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.Store = newFakeStore()
			cfg.Discover = cfg.Store.(Discoverer)
			tc.mod(&cfg)
			_, err := NewHandler(cfg)
			if err == nil || err.Error() != tc.want {
				t.Errorf("NewHandler error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParsePool(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Pool
		wantErr string
	}{
		"full": {in: "10.77.0.0/24,10.77.0.100-10.77.0.200,router=10.77.0.1,dns=10.77.0.1+10.77.0.2,domain=lab,lease=30m",
			want: Pool{Subnet: netip.MustParsePrefix("10.77.0.0/24"), Start: netip.MustParseAddr("10.77.0.100"),
				End: netip.MustParseAddr("10.77.0.200"), Router: netip.MustParseAddr("10.77.0.1"),
				DNS: []netip.Addr{netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.2")}, Domain: "lab", LeaseTime: 30 * time.Minute}},
		"minimal": {in: "10.77.0.9/24,10.77.0.100-10.77.0.100",
			want: Pool{Subnet: netip.MustParsePrefix("10.77.0.0/24"), Start: netip.MustParseAddr("10.77.0.100"), End: netip.MustParseAddr("10.77.0.100")}},
		"no range":  {in: "10.77.0.0/24", wantErr: `pool "10.77.0.0/24": expected SUBNET,START-END[,router=IP][,dns=IP+IP][,domain=NAME][,lease=1h]`},
		"reversed":  {in: "10.77.0.0/24,10.77.0.200-10.77.0.100", wantErr: "pool 10.77.0.0/24: range end 10.77.0.100 is before start 10.77.0.200"},
		"bad key":   {in: "10.77.0.0/24,10.77.0.1-10.77.0.2,gw=1", wantErr: `pool "10.77.0.0/24,10.77.0.1-10.77.0.2,gw=1": gw=1: unknown key "gw" (want router, dns, domain or lease)`},
		"ipv6":      {in: "fd00::/64,fd00::1-fd00::2", wantErr: "pool fd00::/64: subnet must be an IPv4 CIDR"},
		"bad range": {in: "10.77.0.0/24,10.77.0.1", wantErr: `pool "10.77.0.0/24,10.77.0.1": range "10.77.0.1": expected START-END`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePool(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParsePool error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("ParsePool (-want +got):\n%s", d)
			}
		})
	}
}

// Concurrent exchanges never hand one address to two clients, and every
// ACK is in the store.
func TestHandleConcurrentUnique(t *testing.T) {
	st := newFakeStore()
	cfg := baseConfig()
	cfg.Store, cfg.Discover = st, st
	cfg.Pools[0].End = netip.MustParseAddr("10.77.0.250") // 151 addresses for 200 clients
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	acks := make(chan [2]string, n)
	errc := make(chan error, n)
	for i := range n {
		go func() {
			mac := fmt.Sprintf("02:00:00:00:%02x:%02x", i>>8, i&0xff)
			offer, err := h.Handle(context.Background(), pkt(mac, dhcpv4.MessageTypeDiscover), Meta{Port: 67})
			if err != nil || offer == nil {
				errc <- err
				return
			}
			s := &scn{ip: map[string]net.IP{mac: offer.YourIPAddr}}
			ack, err := h.Handle(context.Background(), selecting(mac, "10.77.0.1")(s), Meta{Port: 67})
			if err == nil && ack != nil && ack.MessageType() == dhcpv4.MessageTypeAck {
				acks <- [2]string{mac, ack.YourIPAddr.String()}
			}
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
	close(acks)
	owner := map[string]string{}
	for a := range acks {
		if o, dup := owner[a[1]]; dup {
			t.Errorf("%s ACKed to %s and %s", a[1], o, a[0])
		}
		owner[a[1]] = a[0]
		if l, err := st.LeaseByMAC(context.Background(), a[0]); err != nil || l.IP.String() != a[1] {
			t.Errorf("ACK %s -> %s not in the store: %+v %v", a[0], a[1], l, err)
		}
	}
	if len(owner) != 151 { // the range is exhausted: the other 49 get no offer
		t.Errorf("%d addresses handed out, want all 151 of the range", len(owner))
	}
}

// A REQUEST that follows its OFFER within machineFresh is decided on the
// machine record the OFFER read (one store read per DORA); a later one
// reads the store again. Here the reservation changes in between.
func TestRequestUsesOfferedMachine(t *testing.T) {
	for _, c := range []struct {
		name    string
		advance time.Duration
		want    dhcpv4.MessageType
	}{
		{"within machineFresh: the offered record", time.Second, dhcpv4.MessageTypeAck},
		{"after machineFresh: the store's record", machineFresh, dhcpv4.MessageTypeNak},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore(enrolled()...)
			now := t0
			cfg := baseConfig()
			cfg.Store, cfg.Discover, cfg.Now = st, st, func() time.Time { return now }
			h, err := NewHandler(cfg)
			if err != nil {
				t.Fatal(err)
			}
			offer, err := h.Handle(context.Background(), pkt(macA, dhcpv4.MessageTypeDiscover), Meta{Port: 67})
			if err != nil || offer == nil {
				t.Fatalf("discover: %v, %v", offer, err)
			}
			st.mu.Lock()
			st.machines[macA].IPv4 = "10.77.0.60" // reserved meanwhile
			st.mu.Unlock()
			now = now.Add(c.advance)
			s := &scn{ip: map[string]net.IP{macA: offer.YourIPAddr}}
			reply, err := h.Handle(context.Background(), selecting(macA, "10.77.0.1")(s), Meta{Port: 67})
			if err != nil || reply == nil || reply.MessageType() != c.want {
				t.Fatalf("request %v after the offer of %s: %v, %v; want %s", c.advance, offer.YourIPAddr, reply, err, c.want)
			}
		})
	}
}
