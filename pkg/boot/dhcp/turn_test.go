package dhcp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/ingot-dev/ingot/pkg/store"
)

// indexDiff says where h's lease index and the store's leases disagree
// ("" where they agree): the index holds every stored lease as stored and
// no other, and gives each address a live lease (store.LeaseLive) holds
// to that lease's MAC, so that the allocator never offers it.
func indexDiff(h *Handler, stored []store.Lease, now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		if len(stored) == 0 {
			return ""
		}
		return fmt.Sprintf("the index was never loaded; the store holds %d leases", len(stored))
	}
	var diffs []string
	seen := map[string]bool{}
	for _, l := range stored {
		seen[l.MAC] = true
		got, ok := h.leases[l.MAC]
		if !ok || got.IP != l.IP || got.State != l.State || !got.Expires.Equal(l.Expires) {
			diffs = append(diffs, fmt.Sprintf("%s: the store has %s %s until %s, the index %v %+v", l.MAC, l.IP, l.State, l.Expires, ok, got))
		}
		if store.LeaseLive(l, now) && h.owner[l.IP] != l.MAC {
			diffs = append(diffs, fmt.Sprintf("%s: leased to %s in the store, owned by %q in the index", l.IP, l.MAC, h.owner[l.IP]))
		}
	}
	for mac, l := range h.leases {
		if !seen[mac] {
			diffs = append(diffs, fmt.Sprintf("%s: %s in the index, no lease in the store", mac, l.IP))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

// gatedStore commits leases as its Store does; the commit of the lease of
// gate then signals committed and waits for open before it returns: that
// request has reached the store and not yet its index.
type gatedStore struct {
	Store
	gate      netip.Addr
	committed chan struct{}
	open      chan struct{}
}

func (g *gatedStore) PutLease(ctx context.Context, l store.Lease) error {
	err := g.Store.PutLease(ctx, l)
	if l.IP == g.gate {
		close(g.committed)
		<-g.open
	}
	return err
}

func openBolt(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "ingot.db"), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Two REQUESTs of one client for two addresses, decided at once: the
// first has committed 10.77.0.150 to the store when the second arrives for
// 10.77.0.160. Decided side by side, the second claim dropped the first's
// hold and the two commits reached the store in one order (.160 last) and
// the index in the other (.150 last): the index took .160, leased in the
// store, to be free, offered it to the next client, and the store's
// conflict check NAKed that client's REQUEST. Decided one after the other
// (turn.go), the index and the store agree and the next client is ACKed.
func TestRequestsOfOneClientDecidedInTurn(t *testing.T) {
	st := openBolt(t)
	first, second := netip.MustParseAddr("10.77.0.150"), netip.MustParseAddr("10.77.0.160")
	gs := &gatedStore{Store: st, gate: first, committed: make(chan struct{}), open: make(chan struct{})}
	cfg := baseConfig()
	cfg.Store, cfg.Unknown = gs, UnknownIgnore
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(mac string, ip netip.Addr) <-chan *dhcpv4.DHCPv4 {
		out := make(chan *dhcpv4.DHCPv4, 1)
		go func() {
			reply, err := h.Handle(context.Background(), initReboot(mac, ip.String())(nil), Meta{Port: 67})
			if err != nil {
				t.Errorf("REQUEST of %s for %s: %v", mac, ip, err)
			}
			out <- reply
		}()
		return out
	}
	r1 := ask(macA, first)
	<-gs.committed
	r2 := ask(macA, second)
	// The second is decided (the bug) or waits for the first (the fix).
	var reply2 *dhcpv4.DHCPv4
	for decided := false; !decided; {
		select {
		case reply2 = <-r2:
			decided = true
		case <-time.After(time.Millisecond):
			h.mu.Lock()
			decided = h.turns[macA] != nil && h.turns[macA].waiting
			h.mu.Unlock()
		}
	}
	close(gs.open)
	for _, r := range []*dhcpv4.DHCPv4{<-r1, orWait(reply2, r2)} {
		if r == nil || r.MessageType() != dhcpv4.MessageTypeAck {
			t.Fatalf("REQUEST of %s: %v, want an ACK", macA, r)
		}
	}
	ls, err := st.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := indexDiff(h, ls, time.Now()); d != "" {
		t.Errorf("the index and the store disagree:\n%s", d)
	}
	// The next client asks for the address the store holds for macA.
	offer, err := h.Handle(context.Background(), pkt(macB, dhcpv4.MessageTypeDiscover,
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(second.AsSlice()))), Meta{Port: 67})
	if err != nil || offer == nil {
		t.Fatalf("DISCOVER of %s: %v, %v", macB, offer, err)
	}
	if ip := addr(offer.YourIPAddr); ip == second {
		t.Errorf("%s, leased to %s in the store, was offered to %s", ip, macA, macB)
	}
	s := &scn{ip: map[string]net.IP{macB: offer.YourIPAddr}}
	ack, err := h.Handle(context.Background(), selecting(macB, "10.77.0.1")(s), Meta{Port: 67})
	if err != nil || ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Errorf("REQUEST of %s for %s: %v, %v; want an ACK", macB, offer.YourIPAddr, ack, err)
	}
}

// orWait is r, or the reply from ch when r is nil.
func orWait(r *dhcpv4.DHCPv4, ch <-chan *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	if r != nil {
		return r
	}
	return <-ch
}

// A client's request waits for the one being decided; a third one
// meanwhile is dropped; other clients are not held up.
func TestTakeTurn(t *testing.T) {
	cfg := baseConfig()
	cfg.Store = newFakeStore()
	cfg.Unknown = UnknownIgnore
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, ok := h.take(ctx, macA)
	if !ok {
		t.Fatal("first request of a client did not get its turn")
	}
	got := make(chan bool)
	go func() {
		r, ok := h.take(ctx, macA)
		if ok {
			r()
		}
		got <- ok
	}()
	for waiting := false; !waiting; time.Sleep(time.Millisecond) {
		h.mu.Lock()
		waiting = h.turns[macA].waiting
		h.mu.Unlock()
	}
	if _, ok := h.take(ctx, macA); ok {
		t.Error("a third request of a client got a turn while one was decided and one waited")
	}
	rb, ok := h.take(ctx, macB)
	if !ok {
		t.Error("another client's request waited for macA's")
	}
	rb()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := h.take(cctx, macA); ok {
		t.Error("a request with its context ended got a turn while another was decided")
	}
	release()
	if !<-got {
		t.Error("the waiting request did not get its turn when the first was decided")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.turns) != 0 {
		t.Errorf("turns left after every request was decided: %v", h.turns)
	}
}

// A hostile burst (Hostile) decided 64 at a time against the real store
// leaves the index and the store in agreement, and every valid client
// after it is ACKed an address of its own.
func TestHostileBurstThenClients(t *testing.T) {
	st := openBolt(t)
	pool, _ := ParsePool("10.77.0.0/16,10.77.1.0-10.77.250.255")
	h, err := NewHandler(Config{ServerIP: netip.MustParseAddr("10.77.0.1"), Pools: []Pool{pool}, Store: st,
		Unknown: UnknownIgnore})
	if err != nil {
		t.Fatal(err)
	}
	const burst, clients = 3000, 500
	g := NewHostile(7, HostileConfig{Server: netip.MustParseAddr("10.77.0.1"), Subnet: pool.Subnet, Start: pool.Start,
		End: netip.MustParseAddr("10.77.2.243"), MACs: 32}) // the clients' addresses
	pkts, _ := g.Burst(burst)
	run(64, len(pkts), func(i int) {
		if req, err := dhcpv4.FromBytes(pkts[i]); err == nil {
			if _, err := h.Handle(context.Background(), req, Meta{Port: 67}); err != nil {
				t.Error(err)
			}
		}
	})
	ls, err := st.ListLeases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := indexDiff(h, ls, time.Now()); d != "" {
		t.Fatalf("after the hostile burst the index and the store disagree:\n%s", d)
	}
	var mu sync.Mutex
	owner := map[string]string{}
	run(64, clients, func(i int) {
		mac := net.HardwareAddr{2, 0x10, 0, 0, byte(i >> 8), byte(i)}
		d, _ := dhcpv4.NewDiscovery(mac)
		o, err := h.Handle(context.Background(), d, Meta{Port: 67})
		if err != nil || o == nil {
			t.Errorf("DISCOVER of %s: %v, %v", mac, o, err)
			return
		}
		r, _ := dhcpv4.NewRequestFromOffer(o)
		a, err := h.Handle(context.Background(), r, Meta{Port: 67})
		if err != nil || a == nil || a.MessageType() != dhcpv4.MessageTypeAck {
			t.Errorf("REQUEST of %s for %s: %v, %v; want an ACK", mac, o.YourIPAddr, a, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := owner[a.YourIPAddr.String()]; dup {
			t.Errorf("%s ACKed to %s and %s", a.YourIPAddr, prev, mac)
		}
		owner[a.YourIPAddr.String()] = mac.String()
	})
}

// run calls fn(0..n-1) from workers goroutines.
func run(workers, n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
