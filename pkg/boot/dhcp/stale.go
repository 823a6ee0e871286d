package dhcp

import (
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// A request that waited for a worker is dropped unanswered when its client
// has sent it again since (a newer copy is queued: answering the old one
// only delays the fresh requests behind it), or when it waited longer than
// staleAfter, by when every client has sent it again.
//
// Dropping by age alone, after 1 s, cost a boot storm on a loaded server
// every request its workers could not reach within the second: PXE
// firmware sends again only after 4 s (PXE 2.1, EDK2; RFC 2131 §4.1
// suggests 4 s), so each such machine lost 4 s, and 134 of 500 in
// pkg/storm's BenchmarkTFTPStorm did, while the copy they waited for was
// the only one queued.
const staleAfter = 4 * time.Second

// copyKey identifies a request across its client's retransmissions: the
// client's hardware address, its transaction ID and the message type.
type copyKey struct {
	mac string
	xid dhcpv4.TransactionID
	typ dhcpv4.MessageType
}

func keyOf(req *dhcpv4.DHCPv4) copyKey {
	return copyKey{string(req.ClientHWAddr), req.TransactionID, req.MessageType()}
}

// copies remembers when the latest copy of each queued request arrived.
// It holds an entry per request in the work queue at most (the reader
// blocks when the queue is full), removed when its latest copy is taken.
type copies struct {
	mu     sync.Mutex
	latest map[copyKey]time.Time
}

func newCopies() *copies { return &copies{latest: map[copyKey]time.Time{}} }

// arrived records j as the latest copy of its request.
func (c *copies) arrived(j job) {
	c.mu.Lock()
	c.latest[keyOf(j.req)] = j.at
	c.mu.Unlock()
}

// stale reports whether a worker taking j at now should drop it: a newer
// copy is queued, or j waited longer than staleAfter. Taking the latest
// copy forgets the request.
func (c *copies) stale(j job, now time.Time) bool {
	k := keyOf(j.req)
	c.mu.Lock()
	newer := c.latest[k].After(j.at)
	if !newer {
		delete(c.latest, k)
	}
	c.mu.Unlock()
	return newer || now.Sub(j.at) > staleAfter
}
