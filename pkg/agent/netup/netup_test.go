package netup

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var netInterfaces = net.Interfaces

func TestCandidates(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	ifs := []net.Interface{
		{Name: "lo", Flags: net.FlagLoopback},
		{Name: "eth1", HardwareAddr: mac},
		{Name: "eth0", HardwareAddr: mac},
		{Name: "ib0", HardwareAddr: make(net.HardwareAddr, 20)}, // IPoIB: not Ethernet
		{Name: "tun0"},
	}
	names := func(is []net.Interface) []string {
		var n []string
		for _, i := range is {
			n = append(n, i.Name)
		}
		return n
	}
	if diff := cmp.Diff([]string{"eth0", "eth1"}, names(Candidates(ifs, ""))); diff != "" {
		t.Errorf("any: %s", diff)
	}
	if diff := cmp.Diff([]string{"eth1"}, names(Candidates(ifs, "eth1"))); diff != "" {
		t.Errorf("named: %s", diff)
	}
}

func TestMessages(t *testing.T) {
	// ifaddrmsg{AF_INET, 24, 0, universe, index 3} + local, address, broadcast.
	want := []byte{2, 24, 0, 0, 3, 0, 0, 0,
		8, 0, 2, 0, 10, 77, 0, 50, // IFA_LOCAL
		8, 0, 1, 0, 10, 77, 0, 50, // IFA_ADDRESS
		8, 0, 4, 0, 10, 77, 0, 255} // IFA_BROADCAST
	if got := AddrMsg(3, net.ParseIP("10.77.0.50"), 24); !bytes.Equal(got, want) {
		t.Errorf("AddrMsg = % x\nwant       % x", got, want)
	}
	want = []byte{2, 0, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0,
		8, 0, 5, 0, 10, 77, 0, 1, // RTA_GATEWAY
		8, 0, 4, 0, 3, 0, 0, 0} // RTA_OIF
	if got := DefaultRouteMsg(3, net.ParseIP("10.77.0.1")); !bytes.Equal(got, want) {
		t.Errorf("DefaultRouteMsg = % x\nwant              % x", got, want)
	}
	if got := ResolvConf([]net.IP{net.ParseIP("10.0.0.1")}); got != "nameserver 10.0.0.1\n" {
		t.Errorf("ResolvConf = %q", got)
	}
}

func TestRenewAfter(t *testing.T) {
	for _, tc := range []struct{ lease, every, want time.Duration }{
		{time.Hour, 0, 30 * time.Minute},
		{time.Hour, time.Second, time.Second},
		{0, 0, time.Hour},
		{time.Duration(0xffffffff) * time.Second, 0, time.Hour},
		{time.Second, 0, time.Second},
	} {
		if got := renewAfter(tc.lease, tc.every); got != tc.want {
			t.Errorf("renewAfter(%v, %v) = %v, want %v", tc.lease, tc.every, got, tc.want)
		}
	}
}
