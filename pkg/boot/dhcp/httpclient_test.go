package dhcp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/boot/pxe"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// httpAnswer is what an HTTP-boot offer says about booting.
type httpAnswer struct {
	File, Opt67, Class string
	NextServer         string
	YourIP             string
}

// TestHTTPClientAnswer: UEFI HTTP boot clients, in full and proxy mode,
// get the URL of their agent UKI (x86-64) or of an HTTP boot file, and
// "HTTPClient" in option 60, without which EDK2's HttpBootDxe ignores the
// offer (UEFI 2.x §24.7.2). The machine's state does not matter here: the
// HTTP side decides what the URL boots (agent, discovery, or 404 for the
// local disk).
func TestHTTPClientAnswer(t *testing.T) {
	// EDK2 HttpBootDxe's DISCOVER (arch 16), and firmware that sends
	// HTTPClient with the PXE arch (7).
	httpPXEArch := []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7})),
	}
	uki := httpAnswer{File: "http://10.77.0.1:8080/uki/52-54-00-00-00-0a.efi", Opt67: "http://10.77.0.1:8080/uki/52-54-00-00-00-0a.efi",
		Class: "HTTPClient", NextServer: "10.77.0.1"}
	tests := map[string]struct {
		req   []dhcpv4.Modifier
		cfg   func(*Config)
		state machine.State
		want  httpAnswer
	}{
		"x64 agent UKI":      {req: httpX64, state: machine.StateProvisioning, want: uki},
		"x64 ready machine":  {req: httpX64, state: machine.StateReady, want: uki},
		"HTTPClient, arch 7": {req: httpPXEArch, state: machine.StateReimaging, want: uki},
		"arm64 agent UKI":    {req: httpARM64, state: machine.StateProvisioning, want: uki},
		"arm64 iPXE chosen": {req: httpARM64, cfg: func(c *Config) { c.BootFiles = BootFiles{pxe.ArchUEFIARM64HTTP: "snponly-arm64.efi"} },
			want: httpAnswer{File: "http://10.77.0.1:8080/boot/snponly-arm64.efi", Opt67: "http://10.77.0.1:8080/boot/snponly-arm64.efi", Class: "HTTPClient", NextServer: "10.77.0.1"}},
		"iPXE over HTTP chosen": {req: httpX64, cfg: func(c *Config) { c.BootFiles = BootFiles{pxe.ArchUEFIX64HTTP: "ipxe.efi"} }, want: httpAnswer{File: "http://10.77.0.1:8080/boot/ipxe.efi", Opt67: "http://10.77.0.1:8080/boot/ipxe.efi", Class: "HTTPClient", NextServer: "10.77.0.1"}},
		"a URL as is": {req: httpX64, cfg: func(c *Config) { c.BootFiles = BootFiles{pxe.ArchUEFIX64HTTP: "https://boot.example/x.efi"} },
			want: httpAnswer{File: "https://boot.example/x.efi", Opt67: "https://boot.example/x.efi", Class: "HTTPClient", NextServer: "10.77.0.1"}},
		"no HTTP base":              {req: httpX64, cfg: func(c *Config) { c.HTTPBase = "" }, want: httpAnswer{NextServer: "10.77.0.1"}},
		"no boot file for the arch": {req: httpX64, cfg: func(c *Config) { c.BootFiles = BootFiles{} }, want: httpAnswer{NextServer: "10.77.0.1"}},
	}
	for name, tc := range tests {
		for _, mode := range []string{ModeFull, ModeProxy} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				state := tc.state
				if state == "" {
					state = machine.StateReady
				}
				st := newFakeStore(&machine.Machine{ID: "m-gpu1", Name: "gpu1", MACs: []string{macA}, State: state})
				cfg := baseConfig()
				if mode == ModeProxy {
					cfg.Mode, cfg.Pools = ModeProxy, nil
				}
				if tc.cfg != nil {
					tc.cfg(&cfg)
				}
				cfg.Store, cfg.Discover, cfg.Now = st, st, func() time.Time { return t0 }
				h, err := NewHandler(cfg)
				if err != nil {
					t.Fatal(err)
				}
				req, err := dhcpv4.FromBytes(pkt(macA, dhcpv4.MessageTypeDiscover, tc.req...).ToBytes())
				if err != nil {
					t.Fatal(err)
				}
				r, err := h.Handle(context.Background(), req, Meta{Port: 67, Peer: netip.MustParseAddrPort("0.0.0.0:68")})
				if err != nil {
					t.Fatal(err)
				}
				if mode == ModeProxy && tc.want.File == "" {
					// Nothing to boot: a proxy has nothing else to say.
					if r != nil {
						t.Errorf("proxy offer without a boot file:\n%s", r.Summary())
					}
					return
				}
				if r == nil {
					t.Fatal("no offer")
				}
				got := httpAnswer{File: r.BootFileName, Opt67: string(r.Options.Get(dhcpv4.OptionBootfileName)),
					Class: string(r.Options.Get(dhcpv4.OptionClassIdentifier)), NextServer: r.ServerIPAddr.String()}
				want := tc.want
				if mode == ModeFull {
					got.YourIP, want.YourIP = r.YourIPAddr.String(), "10.77.0.100"
				} else if !r.YourIPAddr.IsUnspecified() {
					t.Errorf("proxy offer with yiaddr %s", r.YourIPAddr)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("offer (-want +got):\n%s", d)
				}
				if r.Options.Has(dhcpv4.OptionTFTPServerName) || r.Options.Has(dhcpv4.OptionVendorSpecificInformation) {
					t.Errorf("an HTTP-boot offer carries PXE options (66 or 43):\n%s", r.Summary())
				}
			})
		}
	}
}

// TestUKIURL: the URL's shape is what httpboot's /uki/{file} route parses.
func TestUKIURL(t *testing.T) {
	h, err := NewHandler(Config{Mode: ModeOff, HTTPBase: "http://10.77.0.1:8080/"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.UKIURL("52:54:00:77:00:10"), "http://10.77.0.1:8080/uki/52-54-00-77-00-10.efi"; got != want {
		t.Errorf("UKIURL = %s, want %s", got, want)
	}
}
