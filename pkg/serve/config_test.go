package serve

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ingot.yaml")
	os.WriteFile(file, []byte(`
interface: br-file
data: /srv/file
http_addr: ":9000"
dhcp: proxy
pool: ["10.1.0.0/24,10.1.0.10-10.1.0.20"]
lease_time: 2h
tftp: true
log_level: debug
`), 0o644)
	jsonFile := filepath.Join(dir, "ingot.json")
	os.WriteFile(jsonFile, []byte(`{"interface": "br-json", "tftp": false}`), 0o644)

	base := func(mod func(*Config)) Config {
		c := Defaults()
		mod(&c)
		if c.DB == "" {
			c.DB = filepath.Join(c.Data, "ingot.db")
		}
		if c.SecretKeyFile == "" {
			c.SecretKeyFile = filepath.Join(c.Data, "secrets.key")
		}
		if c.BootDir == "" {
			c.BootDir = filepath.Join(c.Data, "boot")
		}
		return c
	}
	tests := map[string]struct {
		args []string
		env  map[string]string
		want Config
	}{
		"defaults": {
			want: base(func(c *Config) {}),
		},
		"file over defaults": {
			args: []string{"--config", file},
			want: base(func(c *Config) {
				c.Config, c.Interface, c.Data, c.HTTPAddr, c.DHCP = file, "br-file", "/srv/file", ":9000", "proxy"
				c.Pools, c.LeaseTime, c.LogLevel = []string{"10.1.0.0/24,10.1.0.10-10.1.0.20"}, 2*time.Hour, "debug"
			}),
		},
		"json file": {
			args: []string{"--config", jsonFile},
			want: base(func(c *Config) { c.Config, c.Interface, c.TFTP = jsonFile, "br-json", false }),
		},
		"env over file, config path from env": {
			env: map[string]string{"INGOT_CONFIG": file, "INGOT_INTERFACE": "br-env", "INGOT_POOL": "10.2.0.0/24,10.2.0.5-10.2.0.6;10.3.0.0/24,10.3.0.5-10.3.0.6", "INGOT_TFTP": "false"},
			want: base(func(c *Config) {
				c.Config, c.Interface, c.Data, c.HTTPAddr, c.DHCP = file, "br-env", "/srv/file", ":9000", "proxy"
				c.Pools = []string{"10.2.0.0/24,10.2.0.5-10.2.0.6", "10.3.0.0/24,10.3.0.5-10.3.0.6"}
				c.LeaseTime, c.LogLevel, c.TFTP = 2*time.Hour, "debug", false
			}),
		},
		"flags over env over file": {
			args: []string{"--config", file, "--interface", "br-flag", "--pool", "10.4.0.0/24,10.4.0.5-10.4.0.6", "--tftp=true", "--db", "/x.db"},
			env:  map[string]string{"INGOT_INTERFACE": "br-env", "INGOT_POOL": "10.2.0.0/24,10.2.0.5-10.2.0.6", "INGOT_TFTP": "false", "INGOT_HTTP_ADDR": ":7000"},
			want: base(func(c *Config) {
				c.Config, c.Interface, c.Data, c.HTTPAddr, c.DHCP = file, "br-flag", "/srv/file", ":7000", "proxy"
				c.Pools, c.DB = []string{"10.4.0.0/24,10.4.0.5-10.4.0.6"}, "/x.db"
				c.LeaseTime, c.LogLevel, c.TFTP = 2*time.Hour, "debug", true
			}),
		},
		"repeated pool flags append": {
			args: []string{"--pool", "a", "--pool", "b"},
			want: base(func(c *Config) { c.Pools = []string{"a", "b"} }),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Load(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("intreface: br0\n"), 0o644)
	none := func(string) string { return "" }
	if _, err := Load([]string{"--config", typo}, none, io.Discard); err == nil || !strings.Contains(err.Error(), "intreface") {
		t.Errorf("unknown file key: %v, want an error naming it", err)
	}
	if _, err := Load([]string{"--config", filepath.Join(dir, "missing.yaml")}, none, io.Discard); err == nil {
		t.Error("missing config file accepted")
	}
	if _, err := Load(nil, func(k string) string { return map[string]string{"INGOT_LEASE_TIME": "soon"}[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "INGOT_LEASE_TIME") {
		t.Errorf("bad env value: %v, want an error naming INGOT_LEASE_TIME", err)
	}
	if _, err := Load([]string{"-h"}, none, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if _, err := Load([]string{"stray"}, none, io.Discard); err == nil {
		t.Error("stray argument accepted")
	}
}

func TestValidate(t *testing.T) {
	ok := Defaults()
	ok.Interface, ok.Pools = "br0", []string{"10.0.0.0/24,10.0.0.10-10.0.0.20"}
	tests := map[string]struct {
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		"valid":                   {mod: func(c *Config) {}},
		"dhcp without interface":  {mod: func(c *Config) { c.Interface = "" }, want: "DHCP (--dhcp full) needs --interface"},
		"proxy without interface": {mod: func(c *Config) { c.Interface, c.DHCP = "", "proxy" }, want: "needs --interface"},
		"tftp without interface":  {mod: func(c *Config) { c.Interface, c.DHCP = "", "off" }, want: "TFTP needs --interface"},
		"http only":               {mod: func(c *Config) { c.Interface, c.DHCP, c.TFTP = "", "off", false }},
		"bad mode":                {mod: func(c *Config) { c.DHCP = "maybe" }, want: "expected full, proxy or off"},
		"full without pool":       {mod: func(c *Config) { c.Pools = nil }, want: "--pool"},
		"bad unknown":             {mod: func(c *Config) { c.Unknown = "boot" }, want: "discover or ignore"},
		"lease binding in proxy":  {mod: func(c *Config) { c.DHCP, c.AgentBinding = "proxy", "lease" }, want: "--agent-binding lease needs --dhcp full"},
		"first use binding":       {mod: func(c *Config) { c.DHCP, c.AgentBinding = "off", "first-use" }},
		"bad binding":             {mod: func(c *Config) { c.AgentBinding = "trust" }, want: "expected lease, neighbour or first-use"},
		"pin off":                 {mod: func(c *Config) { c.FirstStagePins = map[string]string{"snponly.efi": "off"} }},
		"pin not a sha256":        {mod: func(c *Config) { c.FirstStagePins = map[string]string{"snponly.efi": "abc"} }, want: "--first-stage-pin snponly.efi=abc: expected a sha256"},
		"pin outside the folder":  {mod: func(c *Config) { c.FirstStagePins = map[string]string{"../x": strings.Repeat("a", 64)} }, want: "--first-stage-pin ../x"},
		"stub pin not a sha256":   {mod: func(c *Config) { c.EFIStubSHA256 = "c62ae56f" }, want: "--efi-stub-sha256"},
		"stub pin off":            {mod: func(c *Config) { c.EFIStubSHA256, c.EFIStubARM64SHA256 = "off", "" }},
	}
	for dhcp, want := range map[string]string{"full": "lease", "proxy": "neighbour", "off": "neighbour"} {
		c := ok
		c.DHCP = dhcp
		if got := c.Binding(); got != want {
			t.Errorf("--dhcp %s: default agent binding %s, want %s", dhcp, got, want)
		}
	}
	for name, tc := range tests {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want %q", name, err, tc.want)
		}
	}
}

func TestResolveServerIP(t *testing.T) {
	addrs := func(name string) ([]netip.Addr, error) {
		switch name {
		case "br0":
			return []netip.Addr{netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.78.0.1")}, nil
		case "empty":
			return nil, nil
		}
		return nil, errors.New("no such interface")
	}
	tests := map[string]struct {
		ifname, given, want, err string
	}{
		"first address":          {ifname: "br0", want: "10.77.0.1"},
		"given, on interface":    {ifname: "br0", given: "10.78.0.1", want: "10.78.0.1"},
		"given, other interface": {ifname: "br0", given: "192.168.1.1", err: "not an address of interface br0"},
		"interface without ipv4": {ifname: "empty", err: "no IPv4 address"},
		"missing interface":      {ifname: "nope", err: "no such interface"},
		"http only":              {want: "invalid IP"},
		"http only, given":       {given: "10.0.0.1", want: "10.0.0.1"},
		"not an address":         {ifname: "br0", given: "br0", err: "expected an IPv4"},
	}
	for name, tc := range tests {
		got, err := resolveServerIP(tc.ifname, tc.given, addrs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", name, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("%s: got %v, %v; want %s", name, got, err, tc.want)
		}
	}
}

// TestFirstStagePinFlag: Debian's pins are the default; a flag replaces
// one name's pin and keeps the others, NAME=off unpins it, the file's map
// merges the same way, and Pins leaves out what is off.
func TestFirstStagePinFlag(t *testing.T) {
	none := func(string) string { return "" }
	sum := strings.Repeat("ab", 32)
	def := Defaults()
	if len(def.FirstStagePins) != 4 || def.FirstStagePins["snponly.efi"] == "" || def.EFIStubSHA256 == "" {
		t.Fatalf("defaults: %v, stub %q: want Debian's four iPXE pins and the stub's", def.FirstStagePins, def.EFIStubSHA256)
	}
	cfg, err := Load([]string{"--first-stage-pin", "snponly.efi=" + sum, "--first-stage-pin", "ipxe.lkrn=off;custom.efi=" + sum}, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pins := cfg.Pins()
	want := map[string]string{"snponly.efi": sum, "custom.efi": sum, "undionly.kpxe": def.FirstStagePins["undionly.kpxe"], "ipxe.efi": def.FirstStagePins["ipxe.efi"]}
	if diff := cmp.Diff(want, pins); diff != "" {
		t.Errorf("pins from flags (-want +got):\n%s", diff)
	}
	file := filepath.Join(t.TempDir(), "ingot.yaml")
	os.WriteFile(file, []byte("first_stage_pin: {undionly.kpxe: off}\nefi_stub_sha256: \"off\"\n"), 0o644)
	cfg, err = Load([]string{"--config", file}, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pins(); len(p) != 3 || p["undionly.kpxe"] != "" || stubPin(cfg.EFIStubSHA256) != "" || cfg.EFIStubARM64SHA256 == "" {
		t.Errorf("pins from the file: %v, stub %q: want undionly.kpxe unpinned, the other three kept, the x86 stub unchecked", p, cfg.EFIStubSHA256)
	}
	if _, err := Load([]string{"--first-stage-pin", "snponly.efi"}, none, io.Discard); err == nil || !strings.Contains(err.Error(), "NAME=SHA256") {
		t.Errorf("a pin without a sum: %v, want an error saying NAME=SHA256", err)
	}
}
