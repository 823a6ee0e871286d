package storm

import (
	"net"
	"strings"
	"testing"
)

// The storm reads three things a server under test sends: TFTP packets,
// iPXE scripts and boot file names. None may panic or loop on any input.

func FuzzParseTFTP(f *testing.F) {
	for _, s := range [][]byte{
		append([]byte{0, tftpOACK}, "tsize\x00174000\x00blksize\x001468\x00"...),
		append([]byte{0, tftpOACK}, "tsize\x00174000\x00blksize\x001468\x00windowsize\x004\x00"...),
		append([]byte{0, tftpDATA, 0, 1}, "data"...),
		append([]byte{0, tftpERROR, 0, 1}, "File not found\x00"...),
		{0, tftpACK, 0xff, 0xff},
		{0, tftpOACK, 'a', 0},
		{},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseTFTP(b)
		if err != nil {
			return
		}
		if p.op == tftpOACK {
			blk, win, tsize, err := oackTerms(p.opts, 1468, 4)
			if err == nil && (blk < 8 || blk > 1468 || win < 1 || win > 4 || tsize < -1) {
				t.Fatalf("oackTerms(%q) = %d, %d, %d: outside what was asked", p.opts, blk, win, tsize)
			}
		}
		if p.op == tftpDATA && len(p.data) != len(b)-4 {
			t.Fatalf("DATA of %d bytes from a %d-byte packet", len(p.data), len(b))
		}
	})
}

func FuzzParseScript(f *testing.F) {
	for _, s := range []string{
		"#!ipxe\nkernel http://s/k initrd=initrd.img a=b\ninitrd --name initrd.img http://s/i\nboot\n",
		"#!ipxe\nsanboot --no-describe --drive 0x80 || exit\n",
		"#!ipxe\ninitrd --name\n",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := parseScript(s)
		if err == nil && (b.Kernel == "" || b.Initrd == "" || !strings.Contains(s, "boot")) {
			t.Fatalf("parseScript(%q) = %+v with no error", s, b)
		}
	})
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"http://s/ipxe?mac=${net0/mac}", "${mac:hexhyp}", "${", "${}", "plain"} {
		f.Add(s)
	}
	mac := net.HardwareAddr{0x02, 0x53, 0, 0, 0, 1}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := expand(s, mac)
		if err == nil && strings.Contains(out, "${") {
			t.Fatalf("expand(%q) = %q: a setting left unfilled", s, out)
		}
	})
}
