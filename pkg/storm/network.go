package storm

import (
	"context"
	"fmt"
	"net"

	"github.com/ingot-dev/ingot/pkg/netns"
)

// The storm's network. It exists only inside the two namespaces Link joins.
const (
	// ServerIP is the boot server's address, on ServerIface in the server
	// namespace.
	ServerIP    = "10.77.0.1"
	ServerIface = "eth0"
	// ClientIface is the machines' shared interface in the client
	// namespace; clientIP is its own address (the route to the server),
	// which no machine uses.
	ClientIface = "eth0"
	clientIP    = "10.77.0.2"
	prefixLen   = 16
	// PoolStart and PoolEnd bound the addresses the machines lease.
	PoolStart = "10.77.16.1"
	PoolEnd   = "10.77.31.254"
)

// Link joins a server and a client namespace with a veth pair: ServerIP on
// the server's end, the client's own address on the other.
func Link(ctx context.Context, srv, cli *netns.NS) error {
	return netns.Veth(ctx, srv, ServerIface, fmt.Sprintf("%s/%d", ServerIP, prefixLen),
		cli, ClientIface, fmt.Sprintf("%s/%d", clientIP, prefixLen))
}

// Machines makes n machines with MACs 02:53:00:00:HI:LO (locally
// administered), every other one UEFI (EDK2 PXE) and the rest BIOS.
func Machines(n int) []Machine {
	ms := make([]Machine, n)
	for i := range ms {
		fw := BIOS
		if i%2 == 1 {
			fw = UEFI
		}
		ms[i] = Machine{MAC: net.HardwareAddr{0x02, 0x53, 0, 0, byte(i >> 8), byte(i)}.String(), Firmware: fw}
	}
	return ms
}
