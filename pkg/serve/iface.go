package serve

import (
	"fmt"
	"net"
	"net/netip"
)

// resolveServerIP picks our address on the boot interface: the given one,
// which must belong to the interface, or the interface's first IPv4
// address. Without an interface (HTTP-only) it returns the given address
// or the zero Addr.
func resolveServerIP(ifname, given string, addrsOf func(string) ([]netip.Addr, error)) (netip.Addr, error) {
	var want netip.Addr
	if given != "" {
		a, err := netip.ParseAddr(given)
		if err != nil || !a.Is4() {
			return netip.Addr{}, fmt.Errorf("--server-ip %q: expected an IPv4 address", given)
		}
		want = a
	}
	if ifname == "" {
		return want, nil
	}
	addrs, err := addrsOf(ifname)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("interface %s has no IPv4 address; give it one (ip addr add ...) or choose another --interface", ifname)
	}
	if !want.IsValid() {
		return addrs[0], nil
	}
	for _, a := range addrs {
		if a == want {
			return want, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("--server-ip %s is not an address of interface %s (it has %v): ingot never serves on another interface", want, ifname, addrs)
}

// interfaceIPv4s lists the IPv4 addresses of a network interface.
func interfaceIPv4s(name string) ([]netip.Addr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	as, err := ifc.Addrs()
	if err != nil {
		return nil, fmt.Errorf("interface %s addresses: %w", name, err)
	}
	var out []netip.Addr
	for _, a := range as {
		if pn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(pn.IP); ok && ip.Unmap().Is4() {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// ResolveServerIP is the server's address on --interface (or --server-ip),
// as Run resolves it.
func (c Config) ResolveServerIP() (netip.Addr, error) {
	return resolveServerIP(c.Interface, c.ServerIP, interfaceIPv4s)
}
