package storm

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	tests := map[string]struct {
		script string
		want   bootScript
		err    string
	}{
		"ingot's agent script (pkg/boot/httpboot RenderAgent)": {
			"#!ipxe\n# ingot: machine storm-001 (m-1) is provisioning: agent for recipe storm 1.0.0\n" +
				"kernel http://10.77.0.1:8080/artifacts/sha256/aa initrd=initrd.img ingot.server=http://10.77.0.1:8080 ingot.token=mb_x console=ttyS0\n" +
				"initrd --name initrd.img http://10.77.0.1:8080/artifacts/sha256/bb\nboot\n",
			bootScript{Kernel: "http://10.77.0.1:8080/artifacts/sha256/aa",
				Cmdline: "initrd=initrd.img ingot.server=http://10.77.0.1:8080 ingot.token=mb_x console=ttyS0",
				Initrd:  "http://10.77.0.1:8080/artifacts/sha256/bb"}, ""},
		"the peers' static script, CRLF": {
			"#!ipxe\r\nkernel http://s/vmlinuz initrd=initrd.img\r\ninitrd http://s/initrd.img\r\nboot\r\n",
			bootScript{Kernel: "http://s/vmlinuz", Cmdline: "initrd=initrd.img", Initrd: "http://s/initrd.img"}, ""},
		"local boot":         {"#!ipxe\n# ingot: machine x is ready: boot from local disk\nsanboot --no-describe --drive 0x80 || exit\n", bootScript{}, "sanboot"},
		"exit":               {"#!ipxe\nexit\n", bootScript{}, `script says "exit"`},
		"an error script":    {"#!ipxe\necho ingot: cannot boot machine x: no recipe\nsleep 10\nexit 1\n", bootScript{}, "sleep"},
		"not a script":       {"<html>429 Too Many Requests</html>", bootScript{}, "expected #!ipxe"},
		"no boot":            {"#!ipxe\nkernel http://s/k\ninitrd http://s/i\n", bootScript{}, "never says boot"},
		"no initrd":          {"#!ipxe\nkernel http://s/k\nboot\n", bootScript{}, "expected both"},
		"initrd without URL": {"#!ipxe\ninitrd --name x\n", bootScript{}, "initrd without a URL"},
		"empty":              {"", bootScript{}, "expected #!ipxe"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseScript(tc.script)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseScript: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0x53, 0, 0, 0x0a, 0xbc}
	tests := map[string]struct{ in, want, err string }{
		"ingot's URL, nothing to fill": {"http://10.77.0.1:8080/ipxe?mac=02:53:00:00:0a:bc&arch=bios", "http://10.77.0.1:8080/ipxe?mac=02:53:00:00:0a:bc&arch=bios", ""},
		"dnsmasq's ${net0/mac}":        {"http://s/ipxe?mac=${net0/mac}", "http://s/ipxe?mac=02:53:00:00:0a:bc", ""},
		"${mac:hexhyp}":                {"http://s/${mac:hexhyp}.ipxe", "http://s/02-53-00-00-0a-bc.ipxe", ""},
		"${mac:hexraw} twice":          {"${mac:hexraw}/${mac:hexraw}", "025300000abc/025300000abc", ""},
		"unknown setting":              {"http://s/${uuid}", "", "knows only"},
		"unknown type":                 {"http://s/${mac:base64}", "", "expected hex"},
		"unterminated":                 {"http://s/${mac", "", "unterminated"},
	}
	for name, tc := range tests {
		got, err := expand(tc.in, mac)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: expand(%q) = %q, %v; want an error containing %q", name, tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: expand(%q) = %q, %v; want %q", name, tc.in, got, err, tc.want)
		}
	}
}
