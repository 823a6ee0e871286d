//go:build integration

package dhcp_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ingot-dev/ingot/pkg/boot/dhcp"
)

// Sizes of the hostile test: well under a minute on two shared cores.
// INGOT_HOSTILE_BURST, INGOT_HOSTILE_CLIENTS and INGOT_HOSTILE_WINDOW
// change them.
const (
	hostileBurst   = 8000 // malformed and mutated packets
	hostileClients = 8000 // valid clients after them, distinct MACs
	hostileWindow  = 64   // valid exchanges in flight
)

// After a burst of malformed and mutated packets (dhcp.Hostile) every
// valid client of a storm completes DORA: no NAK, no failure, no address
// ACKed twice, and every ACK is the store's lease. The burst's in-pool
// REQUESTs aim at the addresses the storm is handed, so an address the
// burst left taken in the store but free in the allocator shows as a NAK.
// Its RENEWING REQUESTs name ciaddrs nobody answers ARP for: their ACKs
// wait seconds in the kernel's ARP queue, charged to the server's socket,
// and must not hold the server up (sendNow), or the storm's clients time
// out.
func TestIntegrationHostileBurstThenStorm(t *testing.T) {
	srv, load := benchPair(t)
	st := openStore(t, filepath.Join(t.TempDir(), "ingot.db"))
	t.Cleanup(func() { st.Close() }) // after the server stops (cleanups run last first)
	pool, err := dhcp.ParsePool("10.77.0.0/16,10.77.1.0-10.77.250.255,router=10.77.0.1")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	serve(t, srv, dhcp.Config{Interface: "eth0", Mode: dhcp.ModeFull, Pools: []dhcp.Pool{pool},
		LeaseTime: time.Hour, Store: st, Unknown: dhcp.UnknownIgnore, Registerer: reg})
	g := newLoadgen(t, load)
	g.ready(t, "ingot")

	clients, window := envInt("INGOT_HOSTILE_CLIENTS", hostileClients), envInt("INGOT_HOSTILE_WINDOW", hostileWindow)
	// In-pool REQUESTs aim at the addresses the storm will be handed.
	end := pool.Start
	for range clients - 1 {
		end = end.Next()
	}
	hostile := dhcp.NewHostile(1, dhcp.HostileConfig{Server: netip.MustParseAddr("10.77.0.1"),
		Subnet: pool.Subnet, Start: pool.Start, End: end, MACs: 64})
	pkts, kinds := hostile.Burst(envInt("INGOT_HOSTILE_BURST", hostileBurst))
	start := time.Now()
	for i, p := range pkts {
		if _, err := g.conn.WriteToUDP(p, bcast67); err != nil {
			t.Fatalf("sending hostile packet %d: %v", i, err)
		}
		if i%128 == 127 {
			time.Sleep(2 * time.Millisecond) // let the server's socket buffer drain
		}
	}
	before := waitQuiet(t, reg)
	t.Logf("hostile burst: %d packets %v in %.1fs; server: %s", len(pkts), kinds, time.Since(start).Seconds(), results(before))

	acks, secs := g.run(0x10, clients, window)
	after := waitQuiet(t, reg)
	t.Logf("storm: %d/%d DORA in %.1fs, %d in flight, %d retransmissions, %d NAKs received; server during the storm: %s",
		acks, clients, secs, window, g.retries.Load(), g.naks.Load(), results(after.minus(before)))
	if n := g.naks.Load(); n != 0 {
		t.Errorf("%d valid clients were NAKed after the hostile burst, want 0; the first: %q", n, g.nakWhy)
		for _, why := range g.nakWhy { // the store's view of each NAKed address
			for _, w := range strings.Fields(why) {
				if ip, err := netip.ParseAddr(w); err == nil && ip.Is4() {
					l, err := st.LeaseByIP(context.Background(), ip)
					t.Logf("the store's lease of %s: %+v %v", ip, l, err)
					break
				}
			}
		}
	}
	if acks != clients {
		t.Errorf("%d of %d valid clients did not complete DORA", clients-acks, clients)
	}
	if n := g.dups.Load(); n != 0 {
		t.Errorf("%d addresses were ACKed to two clients", n)
	}
	checkAcksStored(t, g, st)
}

// checkAcksStored checks that each address the storm was ACKed is the
// store's bound lease of the MAC it was ACKed to.
func checkAcksStored(t *testing.T, g *loadgen, st *bolt.Store) {
	t.Helper()
	bad := 0
	g.acked.Range(func(k, v any) bool {
		ip, mac := k.(netip.Addr), v.(string)
		l, err := st.LeaseByIP(context.Background(), ip)
		if err != nil || l.MAC != mac || l.State != dhcp.StateBound {
			if bad++; bad <= 5 {
				t.Errorf("%s was ACKed to %s; the store holds %+v (%v)", ip, mac, l, err)
			}
		}
		return true
	})
	if bad > 5 {
		t.Errorf("... %d ACKs in all are not the store's leases", bad)
	}
}

// packetCounts is ingot_dhcp_packets_total by "type/result", and
// ingot_dhcp_replies_unsent_total by "unsent/type".
type packetCounts map[string]float64

func (c packetCounts) minus(d packetCounts) packetCounts {
	out := packetCounts{}
	for k, v := range c {
		if v -= d[k]; v != 0 {
			out[k] = v
		}
	}
	return out
}

func results(c packetCounts) string {
	var parts []string
	for k, v := range c {
		parts = append(parts, k+"="+strconv.FormatFloat(v, 'f', -1, 64))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func countPackets(t *testing.T, reg *prometheus.Registry) packetCounts {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := packetCounts{}
	for _, mf := range mfs {
		name := mf.GetName()
		if name != "ingot_dhcp_packets_total" && name != "ingot_dhcp_replies_unsent_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var typ, res string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "type":
					typ = l.GetValue()
				case "result":
					res = l.GetValue()
				}
			}
			if name == "ingot_dhcp_replies_unsent_total" {
				typ, res = "unsent", typ
			}
			out[typ+"/"+res] += m.GetCounter().GetValue()
		}
	}
	return out
}

// waitQuiet waits until the server has decided nothing for longer than a
// request may wait for a worker (1 s), and returns its counts.
func waitQuiet(t *testing.T, reg *prometheus.Registry) packetCounts {
	t.Helper()
	total := func(c packetCounts) (n float64) {
		for _, v := range c {
			n += v
		}
		return n
	}
	last, since := -1.0, time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c := countPackets(t, reg)
		if n := total(c); n != last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) > 1200*time.Millisecond {
			return c
		}
	}
	t.Fatal("the DHCP server never went quiet")
	return nil
}
