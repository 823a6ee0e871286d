package inventory

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

var nicVendors = map[string]string{
	"0x15b3": "Mellanox", "0x8086": "Intel", "0x14e4": "Broadcom", "0x1af4": "Red Hat",
	"0x10ec": "Realtek", "0x1077": "QLogic", "0x1924": "Solarflare", "0x1d0f": "Amazon",
}

var nicModels = map[string]string{
	"15b3:1021": "ConnectX-7", "15b3:101d": "ConnectX-6 Dx", "15b3:101f": "ConnectX-6 Lx", "15b3:101b": "ConnectX-6", "15b3:1017": "ConnectX-5",
	"15b3:a2dc": "BlueField-3", "15b3:a2d6": "BlueField-2", "8086:100e": "82540EM (e1000)",
	"8086:10d3": "82574L (e1000e)", "8086:1592": "E810-C", "8086:1572": "X710", "1af4:1000": "virtio-net",
	"1af4:1041": "virtio-net", "1af4:0001": "virtio-net",
}

// readNICs lists physical network ports (those with a device link): virtual
// interfaces (lo, bridges, veth, tun) are left out.
func readNICs(root string) ([]machine.NIC, error) {
	dir := filepath.Join(root, "sys/class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces in %s: %w", dir, err)
	}
	var nics []machine.NIC
	for _, e := range ents {
		d := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(d, "device")); err != nil {
			continue
		}
		vendor := readString(d, "device/vendor")
		id := strings.TrimPrefix(vendor, "0x") + ":" + strings.TrimPrefix(readString(d, "device/device"), "0x")
		n := machine.NIC{
			Name:      e.Name(),
			MAC:       readString(d, "address"),
			Vendor:    nicVendors[vendor],
			Model:     nicModels[id],
			SpeedMbps: atoi(readString(d, "speed")), // -1 or unreadable while down -> 0
			LinkUp:    readString(d, "carrier") == "1",
		}
		if n.Model == "" && vendor != "" {
			n.Model = "[" + id + "]"
		}
		if l, err := os.Readlink(filepath.Join(d, "device")); err == nil && strings.Count(filepath.Base(l), ":") == 2 {
			n.PCIAddress = filepath.Base(l)
			n.LinkCurrent = machine.PCIeLink{Gen: PCIeGen(readString(d, "device/current_link_speed")), Width: atoi(readString(d, "device/current_link_width"))}
			n.LinkMax = machine.PCIeLink{Gen: PCIeGen(readString(d, "device/max_link_speed")), Width: atoi(readString(d, "device/max_link_width"))}
		}
		if l, err := os.Readlink(filepath.Join(d, "device/driver")); err == nil && n.Model == "" {
			n.Model = filepath.Base(l) // the driver's name says more than nothing
		}
		nics = append(nics, n)
	}
	sort.Slice(nics, func(i, j int) bool { return nics[i].Name < nics[j].Name })
	return nics, nil
}

// listenLLDP asks lldp for the neighbours of the NICs with link, in the
// background; the channel yields them (nil without lldp or such NICs).
func listenLLDP(ctx context.Context, nics []machine.NIC, lldp func(context.Context, []string) map[string]machine.LLDPNeighbor) <-chan map[string]machine.LLDPNeighbor {
	out := make(chan map[string]machine.LLDPNeighbor, 1)
	var up []string
	for _, n := range nics {
		if n.LinkUp {
			up = append(up, n.Name)
		}
	}
	if lldp == nil || len(up) == 0 {
		out <- nil
		return out
	}
	go func() { out <- lldp(ctx, up) }()
	return out
}

// markNICs sets Boot on the boot interface's NIC and LLDP on each NIC a
// neighbour was heard on.
func markNICs(nics []machine.NIC, boot string, heard map[string]machine.LLDPNeighbor) {
	for i := range nics {
		nics[i].Boot = boot != "" && nics[i].Name == boot
		if n, ok := heard[nics[i].Name]; ok {
			nics[i].LLDP = &n
		}
	}
}

// BootIface returns the interface this host reaches server (an http(s)
// URL) over: the one holding the source address the kernel picks for it.
// Nothing is sent (a UDP socket is only connected). A bond or bridge
// holding the address is returned as itself, not its ports.
func BootIface(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("finding the boot interface: server %q is not a URL with a host", server)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
		if port == "" {
			port = "80"
		}
	}
	c, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return "", fmt.Errorf("finding the interface that reaches %s: %w", u.Host, err)
	}
	local := c.LocalAddr().(*net.UDPAddr).IP
	c.Close()
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listing interfaces: %w", err)
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(local) {
				return ifc.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no interface holds %s, the address that reaches %s", local, u.Host)
}
