package ra

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAdvertisement(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x77, 0, 1}
	got := Advertisement(netip.MustParsePrefix("fd00:696e:676f:7400::/64"), 0, mac)
	want := []byte{
		134, 0, 0, 0, // type, code, checksum (kernel)
		64, 0, 0, 0, // hop limit, flags, router lifetime 0
		0, 0, 0, 0, 0, 0, 0, 0, // reachable, retrans
		1, 1, 0x52, 0x54, 0, 0x77, 0, 1, // source link-layer address
		3, 4, 64, 0xc0, 0, 1, 0x51, 0x80, 0, 0, 0x38, 0x40, 0, 0, 0, 0, // prefix info header
		0xfd, 0, 0x69, 0x6e, 0x67, 0x6f, 0x74, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Advertisement (-want +got):\n%s", d)
	}
	if got := Advertisement(netip.MustParsePrefix("fd00::/64"), 30*time.Minute, nil); got[6] != 0x07 || got[7] != 0x08 || len(got) != 48 {
		t.Errorf("router lifetime 1800 s without MAC: got % x", got)
	}
}

func TestNewRejects(t *testing.T) {
	for name, c := range map[string]Config{
		"no interface": {},
		"ipv4 prefix":  {Interface: "lo", Prefix: netip.MustParsePrefix("10.0.0.0/24")},
		"not /64":      {Interface: "lo", Prefix: netip.MustParsePrefix("fd00::/48")},
		"no such if":   {Interface: "nonexistent0"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: New(%+v) succeeded", name, c)
		}
	}
}
