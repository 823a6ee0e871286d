package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
)

// DHCPInfo is what the engine knows of serve's DHCP, for recipes'
// network.pool: the mode and, in full mode, the pools it answers from.
type DHCPInfo struct {
	Mode     string // full, proxy, off; "" = not known (no pool rules apply)
	Pools    []DHCPPool
	ServerIP netip.Addr
}

// DHCPPool is one subnet serve's DHCP answers for and its dynamic range.
type DHCPPool struct {
	Subnet     netip.Prefix
	Start, End netip.Addr
	Router     netip.Addr
}

// poolRules checks a recipe's network.pool against serve's DHCP: in full
// mode it must lie in a subnet serve answers for (else no reservation from
// it can be handed out: a preflight problem), and a machine's existing
// reservation must lie in it. In proxy or off mode it is unused, and the
// plan says so.
func (e *Engine) poolRules(r *recipe.Recipe, m *machine.Machine) (problems, notes []string) {
	if r.Network.Pool == "" || e.dhcp.Mode == "" {
		return nil, nil
	}
	pool, err := netip.ParsePrefix(r.Network.Pool)
	if err != nil {
		return []string{fmt.Sprintf("recipe %s network.pool %q: %v", r.Name, r.Network.Pool, err)}, nil
	}
	if e.dhcp.Mode != "full" {
		return nil, []string{fmt.Sprintf("network.pool %s is unused: ingot's DHCP is in %s mode, the site's DHCP server gives addresses", pool, e.dhcp.Mode)}
	}
	if _, ok := e.subnetOf(pool); !ok {
		return []string{fmt.Sprintf("recipe %s network.pool %s is outside every subnet ingot's DHCP serves (%s)", r.Name, pool, e.subnets())}, nil
	}
	if m.IPv4 != "" {
		if a, err := netip.ParseAddr(m.IPv4); err == nil && !pool.Contains(a) {
			return []string{fmt.Sprintf("machine %s is reserved %s, outside its recipe's network.pool %s", m.Name, a, pool)}, nil
		}
	}
	return nil, nil
}

func (e *Engine) subnetOf(pool netip.Prefix) (DHCPPool, bool) {
	for _, p := range e.dhcp.Pools {
		if p.Subnet.Contains(pool.Masked().Addr()) && p.Subnet.Bits() <= pool.Bits() {
			return p, true
		}
	}
	return DHCPPool{}, false
}

func (e *Engine) subnets() string {
	s := ""
	for i, p := range e.dhcp.Pools {
		if i > 0 {
			s += ", "
		}
		s += p.Subnet.String()
	}
	if s == "" {
		return "none"
	}
	return s
}

// reserve gives a machine without a reservation an address of its
// recipe's network.pool (full mode): the first one outside serve's
// dynamic range, then inside it, that is no network, broadcast, server or
// router address, reserved to no other machine and leased to no other MAC.
func (e *Engine) reserve(ctx context.Context, r *recipe.Recipe, m *machine.Machine) error {
	if r.Network.Pool == "" || e.dhcp.Mode != "full" || m.IPv4 != "" {
		return nil
	}
	pool, err := netip.ParsePrefix(r.Network.Pool)
	if err != nil {
		return err
	}
	sub, ok := e.subnetOf(pool)
	if !ok {
		return fmt.Errorf("network.pool %s is outside ingot's DHCP subnets", pool)
	}
	taken := map[netip.Addr]bool{e.dhcp.ServerIP: true, sub.Router: true}
	ms, err := e.machines.List(ctx, store.MachineFilter{})
	if err != nil {
		return err
	}
	for _, o := range ms {
		if a, err := netip.ParseAddr(o.IPv4); err == nil && o.ID != m.ID {
			taken[a] = true
		}
	}
	free := func(a netip.Addr) bool {
		if taken[a] || a == pool.Masked().Addr() || !sub.Subnet.Contains(a) || isBroadcast(sub.Subnet, a) || isBroadcast(pool, a) {
			return false
		}
		if e.leases == nil {
			return true
		}
		l, err := e.leases.LeaseByIP(ctx, a)
		return errors.Is(err, store.ErrNotFound) || (err == nil && l.MAC == firstMAC(m))
	}
	dynamic := func(a netip.Addr) bool { return !a.Less(sub.Start) && !sub.End.Less(a) }
	var pick netip.Addr
	for _, wantDynamic := range []bool{false, true} {
		for a := pool.Masked().Addr().Next(); pool.Contains(a) && !pick.IsValid(); a = a.Next() {
			if dynamic(a) == wantDynamic && free(a) {
				pick = a
			}
		}
	}
	if !pick.IsValid() {
		return fmt.Errorf("network.pool %s has no free address for %s", pool, m.Name)
	}
	if err := e.machines.Reserve(ctx, m.ID, pick.String(), "engine", fmt.Sprintf("reserved %s from the recipe's network.pool %s", pick, pool)); err != nil {
		return err
	}
	m.IPv4 = pick.String()
	return nil
}

func isBroadcast(p netip.Prefix, a netip.Addr) bool {
	if p.Bits() >= 31 {
		return false
	}
	b := p.Masked().Addr().As4()
	host := 32 - p.Bits()
	u := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	u |= 1<<host - 1
	return a == netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}

func firstMAC(m *machine.Machine) string {
	if len(m.MACs) == 0 {
		return ""
	}
	n, _ := machine.NormalizeMAC(m.MACs[0])
	return n
}
