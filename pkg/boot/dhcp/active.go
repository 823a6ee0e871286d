package dhcp

import (
	"context"
	"net/netip"
)

// Several ingot instances on one etcd store (pkg/scaleout) share the
// leases. Each segment is answered by one of them at a time: Config.Active
// is true on the instance that leads the segment's election, and false on
// the others and on an instance that cannot reach etcd (its lease not
// renewed in time: it answers nothing rather than decide from a lease
// index other instances may have changed). Why one, not all: DHCP offers
// are not transactional (an offered address is only held in memory), so
// two instances answering one broadcast domain would offer one free
// address to two clients and NAK one of them at the REQUEST, a whole DORA
// lost exactly in a storm, and every client would get two offers. Safety
// does not rest on the election: PutLease takes an address only while no
// other MAC's live lease holds it, in the same etcd transaction as the
// write, so even two instances both answering (an election in transition,
// a paused leader waking up) never give one address to two MACs; the
// loser NAKs. Instances on different segments lead their own elections
// and all answer.

// active reports whether the handler answers now. Coming back from not
// answering, the lease index is read again from the store, where other
// instances committed leases meanwhile.
func (h *Handler) active() bool {
	if h.cfg.Active == nil {
		return true
	}
	on := h.cfg.Active()
	if on == h.answering.Load() {
		return on
	}
	h.mu.Lock()
	if on && !h.answering.Load() {
		h.loaded = false // read the store's leases again before deciding
		clear(h.leases)
		clear(h.owner)
		h.cfg.Logger.Info("dhcp answering this segment")
	} else if !on && h.answering.Load() {
		h.cfg.Logger.Warn("dhcp not answering: another instance leads this segment, or the store cannot be reached")
	}
	h.answering.Store(on)
	h.mu.Unlock()
	return on
}

// learnConflict records what the store holds on ip after PutLease refused
// it (another instance's lease the index did not have), so the next offer
// does not pick ip again.
func (h *Handler) learnConflict(ctx context.Context, ip netip.Addr) {
	l, err := h.cfg.Store.LeaseByIP(ctx, ip)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.indexLocked(*l)
	h.mu.Unlock()
}
