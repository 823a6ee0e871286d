package storetest

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/store"
)

// leaseCases check LeaseStore.
var leaseCases = []conformanceCase{
	{"leases/put, get, list, move and delete", leaseCRUD},
	{"leases/another MAC on a leased IP", leaseConflict},
}

func bound(mac, ip string, until time.Time) store.Lease {
	return store.Lease{MAC: mac, IP: netip.MustParseAddr(ip), State: store.LeaseBound, Expires: until, Subnet: "10.0.0.0/24"}
}

func leaseCRUD(t *testing.T, e env) {
	until := start.Add(time.Hour)
	in := bound("52-54-00-AA-BB-02", "::ffff:10.0.0.12", until) // any notation, an IPv4-mapped address
	for _, l := range []store.Lease{in, bound("52:54:00:aa:bb:01", "10.0.0.11", until)} {
		if err := e.s.PutLease(e.ctx, l); err != nil {
			t.Fatalf("PutLease(%s): %v", l.MAC, err)
		}
	}
	want := store.Lease{MAC: "52:54:00:aa:bb:02", IP: netip.MustParseAddr("10.0.0.12"), State: store.LeaseBound,
		Expires: until, Subnet: "10.0.0.0/24", Updated: start}
	for name, get := range map[string]func() (*store.Lease, error){
		"by MAC, colon":      func() (*store.Lease, error) { return e.s.LeaseByMAC(e.ctx, "52:54:00:aa:bb:02") },
		"by MAC, upper dash": func() (*store.Lease, error) { return e.s.LeaseByMAC(e.ctx, "52-54-00-AA-BB-02") },
		"by IP":              func() (*store.Lease, error) { return e.s.LeaseByIP(e.ctx, netip.MustParseAddr("10.0.0.12")) },
		"by mapped IP":       func() (*store.Lease, error) { return e.s.LeaseByIP(e.ctx, netip.MustParseAddr("::ffff:10.0.0.12")) },
	} {
		got, err := get()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(want, *got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	ls, err := e.s.ListLeases(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var macs []string
	for _, l := range ls {
		macs = append(macs, l.MAC)
	}
	if diff := cmp.Diff([]string{"52:54:00:aa:bb:01", "52:54:00:aa:bb:02"}, macs); diff != "" {
		t.Errorf("ListLeases order (-want +got):\n%s", diff)
	}
	// A MAC that moves gives up its old address.
	if err := e.s.PutLease(e.ctx, bound("52:54:00:aa:bb:02", "10.0.0.13", until)); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.LeaseByIP(e.ctx, netip.MustParseAddr("10.0.0.12"))
	wantIs(t, "LeaseByIP of the address the MAC left", err, store.ErrNotFound)
	if l, err := e.s.LeaseByMAC(e.ctx, "52:54:00:aa:bb:02"); err != nil || l.IP != netip.MustParseAddr("10.0.0.13") {
		t.Errorf("moved lease = %+v, %v", l, err)
	}
	// The address given up is free for another MAC at once.
	if err := e.s.PutLease(e.ctx, bound("52:54:00:aa:bb:03", "10.0.0.12", until)); err != nil {
		t.Errorf("taking the address another MAC left: %v", err)
	}
	if err := e.s.DeleteLease(e.ctx, "52-54-00-AA-BB-02"); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.LeaseByMAC(e.ctx, "52:54:00:aa:bb:02")
	wantIs(t, "LeaseByMAC after delete", err, store.ErrNotFound)
	_, err = e.s.LeaseByIP(e.ctx, netip.MustParseAddr("10.0.0.13"))
	wantIs(t, "LeaseByIP after delete", err, store.ErrNotFound)
	wantIs(t, "DeleteLease again", e.s.DeleteLease(e.ctx, "52:54:00:aa:bb:02"), store.ErrNotFound)
	if err := e.s.PutLease(e.ctx, store.Lease{MAC: "nonsense", IP: netip.MustParseAddr("10.0.0.20")}); err == nil {
		t.Error("a lease with a malformed MAC was stored")
	}
	if err := e.s.PutLease(e.ctx, store.Lease{MAC: "52:54:00:aa:bb:04"}); err == nil {
		t.Error("a lease without an IP was stored")
	}
}

func leaseConflict(t *testing.T, e env) {
	tests := map[string]struct {
		state    string
		expires  time.Duration // from the clock at the put
		advance  time.Duration // the clock moves on before the second put
		conflict bool
	}{
		"bound, live":             {store.LeaseBound, time.Hour, 0, true},
		"offered, live":           {store.LeaseOffered, time.Minute, 0, true},
		"bound, expired":          {store.LeaseBound, -time.Second, 0, false},
		"bound, expired by clock": {store.LeaseBound, time.Hour, time.Hour, false},
		"bound, not yet by clock": {store.LeaseBound, time.Hour, 59 * time.Minute, true},
		"released before expiry":  {store.LeaseReleased, time.Hour, 0, false},
		"declined before expiry":  {store.LeaseDeclined, time.Hour, 0, false},
		"expiring now (not live)": {store.LeaseBound, 0, 0, false},
	}
	i := 0
	for name, tc := range tests {
		i++
		ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})
		holderMAC := fmt.Sprintf("52:54:00:00:01:%02x", i)
		t.Run(name, func(t *testing.T) {
			holder := store.Lease{MAC: holderMAC, IP: ip, State: tc.state, Expires: e.clk.Now().Add(tc.expires)}
			if err := e.s.PutLease(e.ctx, holder); err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(tc.advance)
			newcomer := store.Lease{MAC: "52:54:00:00:02:01", IP: ip, State: store.LeaseBound, Expires: e.clk.Now().Add(time.Hour)}
			err := e.s.PutLease(e.ctx, newcomer)
			got, gerr := e.s.LeaseByIP(e.ctx, ip)
			if gerr != nil {
				t.Fatalf("LeaseByIP after the second put: %v", gerr)
			}
			if tc.conflict {
				wantIs(t, "PutLease over a live lease", err, store.ErrConflict)
				wantMsg(t, "PutLease over a live lease", err, holderMAC, ip.String())
				if got.MAC != holderMAC {
					t.Errorf("the live lease lost its IP to %s", got.MAC)
				}
				return
			}
			if err != nil {
				t.Fatalf("PutLease over a lease that is not live: %v", err)
			}
			if got.MAC != newcomer.MAC {
				t.Errorf("LeaseByIP = %s; want the newcomer %s", got.MAC, newcomer.MAC)
			}
			if old, err := e.s.LeaseByMAC(e.ctx, holderMAC); err != nil || old.IP != ip {
				t.Errorf("the replaced holder's own record: %+v, %v; want it kept under its MAC", old, err)
			}
			// Clean up for the next case: the newcomer is one MAC.
			if err := e.s.DeleteLease(e.ctx, newcomer.MAC); err != nil {
				t.Fatal(err)
			}
		})
	}
}
