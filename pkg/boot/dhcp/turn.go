package dhcp

import "context"

// One decision per client at a time. A REQUEST is decided in steps: claim
// the address in the index (h.mu), commit the lease to the store (no lock
// held), then index it. Two requests of one client decided at once (forged
// packets sharing a chaddr, or a retransmission) interleave those steps:
// the second claim drops the hold the first is committing under (a client
// holds one address at a time), and the two commits reach the store in one
// order and the index in the other. The index then takes an address the
// store holds for that client to be free, offers it to another client, and
// the store's conflict check NAKs that client's REQUEST. A client's
// requests are therefore decided one after the other, as Kea's
// ClientHandler does: one request waits for the one being decided, and
// any more of the same client meanwhile are dropped (its retransmissions
// ask again).

// turn is the request of a client being decided.
type turn struct {
	done    chan struct{} // closed when it is decided
	waiting bool          // another request of the client waits for done
}

// take waits until no other request of mac is being decided and makes the
// caller's the one; call release when it is decided. ok is false, and the
// request is to be dropped, when another request of mac already waits or
// ctx ends first.
func (h *Handler) take(ctx context.Context, mac string) (release func(), ok bool) {
	for {
		h.mu.Lock()
		t, busy := h.turns[mac]
		if !busy {
			t = &turn{done: make(chan struct{})}
			h.turns[mac] = t
			h.mu.Unlock()
			return func() { h.endTurn(mac, t) }, true
		}
		if t.waiting {
			h.mu.Unlock()
			return nil, false
		}
		t.waiting = true
		h.mu.Unlock()
		select {
		case <-t.done: // take it, unless a newcomer took it first
		case <-ctx.Done():
			return nil, false
		}
	}
}

func (h *Handler) endTurn(mac string, t *turn) {
	h.mu.Lock()
	delete(h.turns, mac)
	h.mu.Unlock()
	close(t.done)
}
