package lldp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/ingot-dev/ingot/pkg/machine"
)

var parseTests = map[string]struct {
	frame []byte
	want  machine.LLDPNeighbor
	err   *FrameError // Part and Offset; Reason is for people
}{
	"leaf switch with port VLAN": {
		frame: switchFrame(),
		want: machine.LLDPNeighbor{ChassisID: "28:99:3a:4d:12:00", PortID: "Ethernet12/1", PortDescr: "gpu-node-07 eth0",
			SystemName: "leaf-r12-a", VLAN: 100},
	},
	"locally assigned chassis, interface name port": {
		frame: frame(chassisID(7, []byte("FDO21120ABC")...), portName("Eth1/7"), ttl(120), systemName("spine-1.example.net"), end()),
		want:  machine.LLDPNeighbor{ChassisID: "FDO21120ABC", PortID: "Eth1/7", SystemName: "spine-1.example.net"},
	},
	"port ID locally assigned ifIndex": {
		frame: frame(chassisMAC("00:05:86:71:62:00"), portID(7, []byte("531")...), ttl(90), portDescr("xe-0/0/12"), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:05:86:71:62:00", PortID: "531", PortDescr: "xe-0/0/12"},
	},
	"port ID MAC, chassis interface name": {
		frame: frame(chassisID(6, []byte("br0")...), portID(3, mac("52:54:00:12:34:56")...), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "br0", PortID: "52:54:00:12:34:56"},
	},
	"network address chassis, IPv4": {
		frame: frame(chassisID(5, 1, 10, 0, 0, 1), portName("swp3"), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "10.0.0.1", PortID: "swp3"},
	},
	"network address port, IPv6": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portID(4, append([]byte{2}, net16("fd00::7")...)...), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "fd00::7"},
	},
	"agent circuit ID binary port shown in hex": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portID(6, 0x01, 0x02, 0xff), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "0102ff"},
	},
	"reserved chassis subtype shown in hex": {
		frame: frame(chassisID(0, 0xab, 0xcd), portName("p1"), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "abcd", PortID: "p1"},
	},
	"no End TLV": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), systemName("sw")),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1", SystemName: "sw"},
	},
	"padded to the minimum frame size after End": {
		frame: append(frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), end()), make([]byte, 30)...),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"anything after End is ignored": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), end(), []byte{0xff}),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"802.1Q tagged": {
		frame: tagged(frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), pvid(42), end())),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1", VLAN: 42},
	},
	"nearest customer bridge address": {
		frame: frameTo(groups[2], chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"nearest non-TPMR bridge address": {
		frame: frameTo(groups[1], chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"other organizations' TLVs and 802.1 VLAN name skipped": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120),
			org(0x00, 0x12, 0x0f, 1, 0x03, 0x6c, 0x03, 0x00, 0x1e), org(0x00, 0x80, 0xc2, 3, 0, 100, 4, 'p', 'r', 'o', 'v'),
			tlv(8, 5, 1, 10, 77, 0, 1, 2, 0, 0, 0, 2, 0), tlv(42, 1, 2, 3), end()),
		want: machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"port VLAN 0 means none": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), pvid(0), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"trailing NUL dropped, control characters replaced": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1\x00"), ttl(120), systemName("sw\x1b[2J\xff\x00"), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1", SystemName: "sw\uFFFD[2J\uFFFD"},
	},
	"shutdown LLDPDU (TTL 0)": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(0), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1"},
	},
	"long port description (9-bit length)": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), portDescr(strings.Repeat("d", 300)), end()),
		want:  machine.LLDPNeighbor{ChassisID: "00:11:22:33:44:55", PortID: "p1", PortDescr: strings.Repeat("d", 300)},
	},

	"shorter than an Ethernet header": {frame: []byte{1, 2, 3}, err: &FrameError{Part: "Ethernet header"}},
	"not an LLDP destination": {
		frame: append(mac("ff:ff:ff:ff:ff:ff"), switchFrame()[6:]...), err: &FrameError{Part: "Ethernet header"},
	},
	"not LLDP's EtherType": {
		frame: append(switchFrame()[:12], 0x08, 0x00, 0x45), err: &FrameError{Part: "Ethernet header", Offset: 12},
	},
	"ends inside a VLAN tag": {
		frame: append(switchFrame()[:12], 0x81, 0x00, 0x00, 0x64), err: &FrameError{Part: "Ethernet header", Offset: 12},
	},
	"empty LLDPDU": {frame: frame(), err: &FrameError{Part: "LLDPDU", Offset: 14}},
	"starts with Port ID": {
		frame: frame(portName("p1"), chassisMAC("00:11:22:33:44:55"), ttl(120), end()), err: &FrameError{Part: "Port ID TLV", Offset: 14},
	},
	"starts with End": {frame: frame(end()), err: &FrameError{Part: "End TLV", Offset: 14}},
	"no TTL": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), end()), err: &FrameError{Part: "End TLV", Offset: 14 + 9 + 5},
	},
	"ends after Port ID": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1")), err: &FrameError{Part: "LLDPDU", Offset: 14 + 9 + 5},
	},
	"TLV runs past the end": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), portDescr("abcdef")[:5]),
		err:   &FrameError{Part: "Port Description TLV", Offset: 14 + 9 + 5 + 4},
	},
	"half a TLV header": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), []byte{0x08}),
		err:   &FrameError{Part: "TLV header", Offset: 14 + 9 + 5 + 4},
	},
	"two System Names": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), systemName("a"), systemName("b"), end()),
		err:   &FrameError{Part: "System Name TLV", Offset: 14 + 9 + 5 + 4 + 3},
	},
	"two TTLs": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), ttl(120), end()),
		err:   &FrameError{Part: "TTL TLV", Offset: 14 + 9 + 5 + 4},
	},
	"End with a length": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), tlv(tlvEnd, 0)), err: &FrameError{Part: "End TLV", Offset: 14 + 9 + 5 + 4},
	},
	"TTL of 3 bytes": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), tlv(tlvTTL, 0, 0, 120), end()), err: &FrameError{Part: "TTL TLV", Offset: 14 + 9 + 5},
	},
	"chassis MAC of 5 bytes": {
		frame: frame(chassisID(4, 1, 2, 3, 4, 5), portName("p1"), ttl(120), end()), err: &FrameError{Part: "Chassis ID TLV", Offset: 14},
	},
	"chassis ID with only a subtype": {
		frame: frame(chassisID(7), portName("p1"), ttl(120), end()), err: &FrameError{Part: "Chassis ID TLV", Offset: 14},
	},
	"port ID longer than 255 bytes": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName(strings.Repeat("p", 256)), ttl(120), end()), err: &FrameError{Part: "Port ID TLV", Offset: 14 + 9},
	},
	"network address of an unknown family": {
		frame: frame(chassisID(5, 6, 1, 2, 3, 4), portName("p1"), ttl(120), end()), err: &FrameError{Part: "Chassis ID TLV", Offset: 14},
	},
	"IPv4 family with 16 bytes": {
		frame: frame(chassisID(5, append([]byte{1}, net16("fd00::1")...)...), portName("p1"), ttl(120), end()), err: &FrameError{Part: "Chassis ID TLV", Offset: 14},
	},
	"port VLAN ID of 5 bytes": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), org(0x00, 0x80, 0xc2, 1, 0), end()),
		err:   &FrameError{Part: "Organizationally Specific TLV", Offset: 14 + 9 + 5 + 4},
	},
	"port VLAN ID 4095": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), pvid(4095), end()),
		err:   &FrameError{Part: "Organizationally Specific TLV", Offset: 14 + 9 + 5 + 4},
	},
	"organizational TLV without a subtype": {
		frame: frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), org(0x00, 0x80, 0xc2), end()),
		err:   &FrameError{Part: "Organizationally Specific TLV", Offset: 14 + 9 + 5 + 4},
	},
}

func TestParse(t *testing.T) {
	for name, tc := range parseTests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.frame)
			if tc.err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want a *FrameError at %s offset %d", err, tc.err.Part, tc.err.Offset)
				}
				if fe.Part != tc.err.Part || fe.Offset != tc.err.Offset || fe.Reason == "" {
					t.Errorf("err = %v, want %s at offset %d with a reason", err, tc.err.Part, tc.err.Offset)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if os.Getenv("UPDATE_TESTDATA") != "" {
		writeSeeds(t)
	}
}

func TestParseTTL(t *testing.T) {
	du, err := parse(frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(0x1234), end()))
	if err != nil || du.TTL != 0x1234 {
		t.Errorf("parse = %+v, %v; want TTL 0x1234", du, err)
	}
}

func TestFrameErrorMessage(t *testing.T) {
	_, err := Parse(frame(chassisMAC("00:11:22:33:44:55"), portName("p1"), ttl(120), pvid(4095)))
	want := "LLDP frame: Organizationally Specific TLV at offset 32: IEEE 802.1 Port VLAN ID 4095, expected 0 (none) to 4094"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// TestParseGolden parses frames lldpd 1.0.16 sent in a namespace (captured
// with tcpdump: on a bridge, and on a veth with an interface alias and
// `portidsubtype ifname`) against testdata/*.json; UPDATE_TESTDATA=1
// rewrites those.
func TestParseGolden(t *testing.T) {
	facts := map[string]machine.LLDPNeighbor{
		"lldpd-bridge":  {ChassisID: "e2:b7:5f:29:b7:4c", PortID: "br0", PortDescr: "br0", SystemName: "ingot-lab"},
		"lldpd-ifalias": {ChassisID: "3e:85:f3:dc:d1:ad", PortID: "v0", PortDescr: "Ethernet1/7 to gpu-node-17", SystemName: "leaf-r12-a"},
	}
	for name, want := range facts {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name+".frame"))
			if err != nil {
				t.Fatal(err)
			}
			n, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, _ := json.MarshalIndent(n, "", "  ")
			golden := filepath.Join("testdata", name+".json")
			if os.Getenv("UPDATE_TESTDATA") != "" {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			g, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (UPDATE_TESTDATA=1 writes it)", err)
			}
			if diff := cmp.Diff(string(g), string(got)+"\n"); diff != "" {
				t.Errorf("%s (-golden +got):\n%s", golden, diff)
			}
			// What the golden file must say, so a wrong golden cannot pass.
			if diff := cmp.Diff(want, n); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParse: Parse never panics, refuses with a *FrameError whose offset
// lies in the frame, and what it accepts is sane. Seeds: the table's frames,
// the captured lldpd frames and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, tc := range parseTests {
		f.Add(tc.frame)
	}
	for _, name := range []string{"lldpd-bridge", "lldpd-ifalias"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name+".frame")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Parse(b)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > len(b) || fe.Reason == "" {
				t.Fatalf("error %v (%T) is not a *FrameError inside the frame", err, err)
			}
			return
		}
		if n.ChassisID == "" || n.PortID == "" || n.VLAN < 0 || n.VLAN > 4094 {
			t.Fatalf("accepted %+v", n)
		}
		for _, s := range []string{n.ChassisID, n.PortID, n.PortDescr, n.SystemName} {
			if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("field %q is not clean text", s)
			}
		}
	})
}

// writeSeeds refreshes testdata/fuzz/FuzzParse from the table's frames.
func writeSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range parseTests {
		file := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			return '-'
		}, name)
		for strings.Contains(file, "--") {
			file = strings.ReplaceAll(file, "--", "-")
		}
		file = strings.Trim(file, "-")
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", tc.frame)
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func tagged(f []byte) []byte {
	return append(append(append([]byte{}, f[:12]...), 0x81, 0x00, 0x00, 0x64), f[12:]...)
}
