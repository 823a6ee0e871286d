package agentauth

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// Tie reports whether addr is tied to mac by the binding in force; the
// error says why not. First-use binding ties every address here: its rule
// (one address per boot attempt) is kept by IssueBoot.
func (a *Auth) Tie(ctx context.Context, mac string, addr netip.Addr) error {
	addr = addr.Unmap()
	switch a.cfg.Binding {
	case BindFirstUse:
		return nil
	case BindNeighbour:
		ns, err := a.cfg.Neighbours(ctx)
		if err != nil {
			return fmt.Errorf("%w: reading the neighbour table: %v", ErrNotTied, err)
		}
		for _, n := range ns {
			if n.IP == addr {
				if n.MAC == mac {
					return nil
				}
				return fmt.Errorf("%w: the neighbour entry for %s is %s, not %s", ErrNotTied, addr, n.MAC, mac)
			}
		}
		return fmt.Errorf("%w: no neighbour entry for %s on the boot interface", ErrNotTied, addr)
	default:
		l, err := a.cfg.Store.LeaseByMAC(ctx, mac)
		if err != nil {
			return fmt.Errorf("%w: no DHCP lease for %s", ErrNotTied, mac)
		}
		if l.IP != addr {
			return fmt.Errorf("%w: %s is leased to %s, not to %s", ErrNotTied, mac, l.IP, addr)
		}
		if !l.Expires.IsZero() && a.now().After(l.Expires) {
			return fmt.Errorf("%w: the lease of %s to %s expired at %s", ErrNotTied, addr, mac, l.Expires.Format("2006-01-02T15:04:05Z07:00"))
		}
		return nil
	}
}

// ReadARP returns a Neighbours function over a /proc/net/arp file (the
// network namespace of the reading process), keeping complete entries of
// iface ("" keeps every interface).
func ReadARP(path, iface string) func(context.Context) ([]Neighbour, error) {
	return func(context.Context) ([]Neighbour, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return ParseARP(f, iface)
	}
}

// ParseARP reads the /proc/net/arp format:
//
//	IP address       HW type     Flags       HW address            Mask     Device
//	10.77.0.100      0x1         0x2         52:54:00:12:34:56     *        br0
//
// Entries without the complete flag (0x2) are left out: their hardware
// address is not yet known.
func ParseARP(r io.Reader, iface string) ([]Neighbour, error) {
	var out []Neighbour
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if line == 1 || len(f) == 0 {
			continue // the header
		}
		if len(f) != 6 {
			return nil, fmt.Errorf("arp table line %d: %d fields, expected 6 (IP, type, flags, MAC, mask, device)", line, len(f))
		}
		if iface != "" && f[5] != iface {
			continue
		}
		ip, err := netip.ParseAddr(f[0])
		if err != nil {
			return nil, fmt.Errorf("arp table line %d: address %q: %v", line, f[0], err)
		}
		flags, err := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 32)
		if err != nil {
			return nil, fmt.Errorf("arp table line %d: flags %q: expected hex", line, f[2])
		}
		if flags&0x2 == 0 {
			continue
		}
		mac, err := machine.NormalizeMAC(f[3])
		if errors.Is(err, machine.ErrNotEthernet) {
			// Not an Ethernet neighbour (IPoIB's 20-byte addresses on a
			// GPU fabric, an EUI-64): no boot NIC, nothing to tie.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("arp table line %d: %v", line, err)
		}
		out = append(out, Neighbour{IP: ip, MAC: mac})
	}
	return out, sc.Err()
}
