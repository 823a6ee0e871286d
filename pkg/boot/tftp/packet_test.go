package tftp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRequest(t *testing.T) {
	tests := map[string]struct {
		in   string
		want request
		err  bool
	}{
		"bare RRQ": {"\x00\x01undionly.kpxe\x00octet\x00",
			request{op: opRRQ, name: "undionly.kpxe", mode: "octet"}, false},
		"EDK2 options in order": {"\x00\x01snponly.efi\x00octet\x00tsize\x000\x00blksize\x001468\x00windowsize\x004\x00",
			request{op: opRRQ, name: "snponly.efi", mode: "octet", options: []option{{"tsize", "0"}, {"blksize", "1468"}, {"windowsize", "4"}}}, false},
		"WRQ": {"\x00\x02up\x00netascii\x00",
			request{op: opWRQ, name: "up", mode: "netascii"}, false},
		"no final NUL": {"\x00\x01f\x00octet",
			request{op: opRRQ, name: "f", mode: "octet"}, false},
		"NUL padding and a dangling option name": {"\x00\x01f\x00octet\x00blksize\x00\x00\x00\x00tsize\x00",
			request{op: opRRQ, name: "f", mode: "octet", options: []option{{"blksize", ""}}}, false},
		"empty filename": {"\x00\x01\x00octet\x00", request{}, true},
		"no mode":        {"\x00\x01file", request{}, true},
		"empty mode":     {"\x00\x02a\x00\x00", request{}, true},
		"ACK on port 69": {"\x00\x04\x00\x01", request{}, true},
		"DATA":           {"\x00\x03\x00\x01abc", request{}, true},
		"too short":      {"\x00\x01", request{}, true},
		"over 512 bytes": {"\x00\x01" + strings.Repeat("a", 600) + "\x00octet\x00", request{}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequest([]byte(tc.in))
			if (err != nil) != tc.err {
				t.Fatalf("parseRequest: err = %v, want error %v", err, tc.err)
			}
			if err != nil && !errors.Is(err, errMalformed) {
				t.Errorf("error %v is not errMalformed", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(request{}, option{})); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnswerable(t *testing.T) {
	self := netip.MustParseAddrPort("10.77.0.1:69")
	tests := map[string]bool{
		"10.77.0.20:2070":       true,
		"[fe80::1%eth0]:2070":   true,
		"10.77.0.20:0":          false,
		"0.0.0.0:2070":          false,
		"255.255.255.255:2070":  false,
		"224.0.0.1:2070":        false,
		"[ff02::1]:2070":        false,
		"10.77.0.1:69":          false, // a forged request from the server itself
		"[::ffff:10.77.0.1]:69": false,
		"10.77.0.1:2070":        true,
	}
	for src, want := range tests {
		if got := answerable(netip.MustParseAddrPort(src), self); got != want {
			t.Errorf("answerable(%s) = %v, want %v", src, got, want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	opts := func(kv ...string) []option {
		var o []option
		for i := 0; i+1 < len(kv); i += 2 {
			o = append(o, option{kv[i], kv[i+1]})
		}
		return o
	}
	tests := map[string]struct {
		opts  []option
		size  int64
		octet bool
		limit int
		want  negotiated
	}{
		"no options: 512, no OACK": {nil, 100, true, 1472, negotiated{blksize: 512}},
		"EDK2: tsize answered, blksize and windowsize granted": {
			opts("tsize", "0", "blksize", "1468", "windowsize", "4"), 5000, true, 1472,
			negotiated{blksize: 1468, window: 4, oack: opts("tsize", "5000", "blksize", "1468", "windowsize", "4")}},
		"windowsize capped at maxWindow": {opts("windowsize", "65535"), 5, true, 1472,
			negotiated{blksize: 512, window: maxWindow, oack: opts("windowsize", "16")}},
		"windowsize 0, over 65535 or not a number: ignored": {opts("windowsize", "0", "WindowSize", "x"), 5, true, 1472,
			negotiated{blksize: 512}},
		"windowsize over 65535: ignored": {opts("windowsize", "65536"), 5, true, 1472, negotiated{blksize: 512}},
		"blksize capped at the limit": {opts("blksize", "65464"), 5, true, 1472,
			negotiated{blksize: 1472, oack: opts("blksize", "1472")}},
		"blksize below 512 honoured (RFC 2348: 8 and up)": {opts("blksize", "8"), 5, true, 1472,
			negotiated{blksize: 8, oack: opts("blksize", "8")}},
		"blksize out of range or not a number: ignored": {opts("blksize", "7", "BLKSIZE", "x"), 5, true, 1472,
			negotiated{blksize: 512}},
		"names without case, echoed as sent, first wins": {opts("BlkSize", "1024", "blksize", "2048", "TSIZE", "0"), 77, true, 1472,
			negotiated{blksize: 1024, oack: opts("BlkSize", "1024", "TSIZE", "77")}},
		"netascii: no tsize (the size would not be exact)": {opts("tsize", "0"), 77, false, 1472,
			negotiated{blksize: 512}},
		"unknown size: no tsize": {opts("tsize", "0"), -1, true, 1472, negotiated{blksize: 512}},
		"only unknown options: no OACK": {opts("timeout", "1", "utimeout", "8"), 5, true, 1472,
			negotiated{blksize: 512}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := negotiate(tc.opts, tc.size, tc.octet, tc.limit)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(negotiated{}, option{})); diff != "" {
				t.Errorf("negotiate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseReply(t *testing.T) {
	tests := map[string]struct {
		in   string
		want reply
	}{
		"ACK 7":               {"\x00\x04\x00\x07", reply{op: opACK, block: 7}},
		"ERROR 8":             {"\x00\x05\x00\x08User aborted the transfer\x00", reply{op: opERROR, code: 8, msg: "User aborted the transfer"}},
		"ERROR without NUL":   {"\x00\x05\x00\x05unknown", reply{op: opERROR, code: 5, msg: "unknown"}},
		"short":               {"\x00\x04\x00", reply{}},
		"DATA is not a reply": {"\x00\x03\x00\x01x", reply{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseReply([]byte(tc.in)), cmp.AllowUnexported(reply{})); diff != "" {
				t.Errorf("parseReply (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzTFTPRequest feeds arbitrary datagrams to the request parser and the
// option negotiation: no panic, and whatever is accepted is answered within
// the bounds the amplification limit relies on: an OACK of at most 56
// bytes and a block size in 8..limit.
func FuzzTFTPRequest(f *testing.F) {
	for _, s := range []string{
		"\x00\x01undionly.kpxe\x00octet\x00",
		"\x00\x01snponly.efi\x00octet\x00tsize\x000\x00blksize\x001468\x00windowsize\x004\x00",
		"\x00\x01f\x00octet\x00BLKSIZE\x0099999999999999999999\x00tsize\x00-1\x00",
		"\x00\x02up\x00netascii\x00", "\x00\x01\x00\x00", "\x00\x04\x00\x01",
	} {
		f.Add([]byte(s), int64(5000))
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		req, err := parseRequest(b)
		if err != nil {
			return
		}
		if req.name == "" || (req.op != opRRQ && req.op != opWRQ) {
			t.Fatalf("accepted %q as %+v", b, req)
		}
		const limit = 1472
		n := negotiate(req.options, size, true, limit)
		if oack := appendOACK(nil, n.oack); len(oack) > 56 {
			t.Fatalf("OACK of %d bytes for %q: %q", len(oack), b, oack)
		}
		if n.blksize != defaultBlock && (n.blksize < minBlock || n.blksize > limit) {
			t.Fatalf("blksize %d for %q", n.blksize, b)
		}
	})
}
