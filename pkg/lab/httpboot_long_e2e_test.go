//go:build e2e && e2e_long

package lab_test

import (
	"testing"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// UEFI HTTP boot beside the site's DHCP server (dnsmasq gives the address,
// ingot the URL in a proxyDHCP offer, which EDK2's HTTP boot combines). In
// make test-e2e-long: make test has proxy mode (TestE2ELabProxy) and UEFI
// HTTP boot (TestE2ELabUEFIHTTP) each on their own.
func TestE2ELabUEFIHTTPProxy(t *testing.T) {
	netnstest.Need(t, "dnsmasq")
	uefiHTTP(t, "dnsmasq")
}
