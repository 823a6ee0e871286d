package dhcp

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

// poolFor picks the pool serving req (RFC 2131 §4.3.1): the subnet of the
// relay (giaddr) when relayed, else the subnet of the client's current
// address (renewals are unicast without giaddr), else our own subnet.
func (h *Handler) poolFor(req *dhcpv4.DHCPv4, ciaddr netip.Addr) (int, bool) {
	if gi := addr(req.GatewayIPAddr); gi.IsValid() && !gi.IsUnspecified() {
		i := h.poolContaining(gi)
		return i, i >= 0
	}
	if ciaddr.IsValid() && !ciaddr.IsUnspecified() {
		if i := h.poolContaining(ciaddr); i >= 0 {
			return i, true
		}
	}
	if i := h.poolContaining(h.cfg.ServerIP); i >= 0 {
		return i, true
	}
	return 0, len(h.cfg.Pools) == 1 // one pool and a server address outside it: serve it anyway
}

// poolContaining returns the index of the pool whose subnet holds ip, or -1.
func (h *Handler) poolContaining(ip netip.Addr) int {
	for i, p := range h.cfg.Pools {
		if ip.IsValid() && p.Subnet.Contains(ip) {
			return i
		}
	}
	return -1
}

// usable reports whether ip may be handed out dynamically from pool p.
func (h *Handler) usable(p Pool, ip netip.Addr) bool {
	if ip.Less(p.Start) || p.End.Less(ip) || ip == h.cfg.ServerIP || ip == p.Router {
		return false
	}
	if p.Subnet.Bits() >= 31 {
		return true // RFC 3021 point-to-point: no network or broadcast address
	}
	network := p.Subnet.Masked().Addr()
	bcast := u4ip(ip4u(network) | (1<<(32-p.Subnet.Bits()) - 1))
	return ip != network && ip != bcast
}

// choose picks the address to offer mac from pool pi and holds it for the
// offer: its reservation, else the address it already holds or leased,
// else the one it asked for, else the next free one. Invalid = none free.
func (h *Handler) choose(ctx context.Context, pi int, mac string, m *machine.Machine, requested netip.Addr) (netip.Addr, error) {
	p := h.cfg.Pools[pi]
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := reserved(m); r.IsValid() {
		if !p.Subnet.Contains(r) {
			h.cfg.Logger.Warn("dhcp reservation is not on the client's subnet", "mac", mac, "reserved", r, "subnet", p.Subnet)
			return netip.Addr{}, nil
		}
		h.holdLocked(r, mac, m, now)
		return r, nil
	}
	try := func(ip netip.Addr) (bool, error) {
		if !ip.IsValid() || !h.usable(p, ip) {
			return false, nil
		}
		free, _, err := h.freeLocked(ctx, ip, mac, now)
		if err != nil || !free {
			return false, err
		}
		h.holdLocked(ip, mac, m, now)
		return true, nil
	}
	// An address already held for this client (a retransmitted DISCOVER).
	if ip, ok := h.heldIP[mac]; ok {
		if ok, err := try(ip); ok || err != nil {
			return ip, err
		}
	}
	l, err := h.leaseLocked(ctx, mac)
	if err != nil {
		return netip.Addr{}, err
	}
	if l != nil && l.State != StateDeclined {
		if ok, err := try(l.IP); ok || err != nil {
			return l.IP, err
		}
	}
	if ok, err := try(requested); ok || err != nil {
		return requested, err
	}
	size := ip4u(p.End) - ip4u(p.Start) + 1
	for range size {
		ip := u4ip(h.cursor[pi])
		h.cursor[pi]++
		if h.cursor[pi] > ip4u(p.End) || h.cursor[pi] < ip4u(p.Start) {
			h.cursor[pi] = ip4u(p.Start)
		}
		if ok, err := try(ip); ok || err != nil {
			return ip, err
		}
	}
	h.cfg.Logger.Warn("dhcp pool exhausted", "subnet", p.Subnet, "mac", mac)
	return netip.Addr{}, nil
}

// claim holds ip for mac while its lease is committed, or says why mac may
// not have it.
func (h *Handler) claim(ctx context.Context, pi int, mac string, ip netip.Addr, m *machine.Machine) (string, error) {
	p := h.cfg.Pools[pi]
	now := h.cfg.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if reserved(m) == ip {
		h.holdLocked(ip, mac, m, now)
		return "", nil
	}
	free, own, err := h.freeLocked(ctx, ip, mac, now)
	switch {
	case err != nil:
		return "", err
	case !free:
		return fmt.Sprintf("%s is in use or declined", ip), nil
	case !h.usable(p, ip) && !own:
		return fmt.Sprintf("%s is not in this server's range %s-%s", ip, p.Start, p.End), nil
	}
	h.holdLocked(ip, mac, m, now)
	return "", nil
}

// freeLocked reports whether mac may use ip now, and whether ip is already
// mac's (held for it or leased to it). h.mu is held.
func (h *Handler) freeLocked(ctx context.Context, ip netip.Addr, mac string, now time.Time) (free, own bool, err error) {
	if until, ok := h.declined[ip]; ok {
		if now.Before(until) {
			return false, false, nil
		}
		delete(h.declined, ip)
	}
	if hd, ok := h.holds[ip]; ok && now.Before(hd.until) {
		if hd.mac != mac {
			return false, false, nil
		}
		own = true
	}
	if err := h.loadLocked(ctx); err != nil {
		return false, false, err
	}
	holder, ok := h.owner[ip]
	if !ok {
		return true, own, nil
	}
	l := h.leases[holder]
	switch {
	case l.State == StateDeclined:
		// A client found ip in use (DHCPDECLINE, RFC 2131 §3.1.5): keep it
		// from everyone, the decliner too, until Expires. DHCP policy, not
		// liveness: the store does not count a declined lease as live.
		return !now.Before(l.Expires), own, nil
	case l.MAC == mac:
		return true, true, nil
	}
	// Whether another client's lease still holds ip is the store's rule,
	// the one its PutLease conflict check applies.
	return !store.LeaseLive(l, now), own, nil
}

// The lease index: the store's leases, read once with ListLeases and kept
// in step by every commit of this handler, so deciding a reply reads no
// store. The store stays the authority: a lease it holds that the index
// lacks (written by another writer) makes PutLease fail with ErrConflict,
// and the client gets a NAK.

// loadLocked reads the store's leases into the index once. h.mu is held.
func (h *Handler) loadLocked(ctx context.Context) error {
	if h.loaded {
		return nil
	}
	ls, err := h.cfg.Store.ListLeases(ctx)
	if err != nil {
		return fmt.Errorf("loading leases: %w", err)
	}
	for _, l := range ls {
		h.indexLocked(l)
	}
	h.loaded = true
	return nil
}

// leaseLocked returns a copy of mac's lease, nil if none. h.mu is held.
func (h *Handler) leaseLocked(ctx context.Context, mac string) (*store.Lease, error) {
	if err := h.loadLocked(ctx); err != nil {
		return nil, err
	}
	l, ok := h.leases[mac]
	if !ok {
		return nil, nil
	}
	return &l, nil
}

// indexLocked records committed lease l. h.mu is held.
func (h *Handler) indexLocked(l store.Lease) {
	if old, ok := h.leases[l.MAC]; ok && h.owner[old.IP] == l.MAC {
		delete(h.owner, old.IP)
	}
	h.leases[l.MAC] = l
	h.owner[l.IP] = l.MAC
}

// holdLocked keeps ip for mac for OfferHold; a client holds one address at
// a time. h.mu is held.
func (h *Handler) holdLocked(ip netip.Addr, mac string, m *machine.Machine, now time.Time) {
	if len(h.holds) >= 4096 && len(h.holds)%1024 == 0 {
		for k, v := range h.holds { // drop expired holds now and then
			if !now.Before(v.until) {
				h.dropLocked(k, v.mac)
			}
		}
	}
	if old, ok := h.heldIP[mac]; ok && old != ip {
		h.dropLocked(old, mac)
	}
	h.holds[ip] = hold{mac: mac, until: now.Add(h.cfg.OfferHold), m: m}
	h.heldIP[mac] = ip
}

// heldMachine returns the machine record read when ip was offered to mac,
// if that was less than machineFresh ago: the REQUEST that follows an
// OFFER is decided on the record the OFFER was (one store read per DORA,
// not two).
func (h *Handler) heldMachine(ip netip.Addr, mac string, now time.Time) (*machine.Machine, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.holds[ip]
	read := hd.until.Add(-h.cfg.OfferHold)
	if !ok || hd.mac != mac || now.Sub(read) >= machineFresh || now.Before(read) {
		return nil, false
	}
	return hd.m, true
}

// machineFresh is how long a machine record read for an OFFER decides the
// REQUEST that follows it.
const machineFresh = 2 * time.Second

func (h *Handler) dropLocked(ip netip.Addr, mac string) {
	if hd, ok := h.holds[ip]; ok && hd.mac == mac {
		delete(h.holds, ip)
	}
	if h.heldIP[mac] == ip {
		delete(h.heldIP, mac)
	}
}

// unhold forgets what mac holds.
func (h *Handler) unhold(mac string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ip, ok := h.heldIP[mac]; ok {
		h.dropLocked(ip, mac)
	}
}

// unholdIP forgets ip if mac holds it.
func (h *Handler) unholdIP(ip netip.Addr, mac string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(ip, mac)
}

func ip4u(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func u4ip(u uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)})
}
