package engine

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

func poolEngine(t *testing.T, mode string) (*Engine, store.Store) {
	t.Helper()
	s := storetest.Open(t)
	e, err := New(Config{Machines: fleetOn(t, s, noRecipes), Jobs: s, Leases: s, DialBMC: func(context.Context, *machine.Machine) (BMC, error) { return nil, nil },
		Recipes: noRecipes,
		DHCP: DHCPInfo{Mode: mode, ServerIP: netip.MustParseAddr("10.40.0.1"), Pools: []DHCPPool{{
			Subnet: netip.MustParsePrefix("10.40.0.0/22"), Start: netip.MustParseAddr("10.40.2.0"), End: netip.MustParseAddr("10.40.3.250"),
			Router: netip.MustParseAddr("10.40.0.2")}}}})
	if err != nil {
		t.Fatal(err)
	}
	return e, s
}

func TestPoolRules(t *testing.T) {
	r := func(pool string) *recipe.Recipe {
		return &recipe.Recipe{Name: "gpu", Network: recipe.Network{Pool: pool}}
	}
	cases := map[string]struct {
		mode, pool, reserved string
		problem, note        string
	}{
		"inside a served subnet":    {mode: "full", pool: "10.40.0.0/24"},
		"outside every subnet":      {mode: "full", pool: "10.99.0.0/24", problem: "outside every subnet ingot's DHCP serves (10.40.0.0/22)"},
		"reservation outside":       {mode: "full", pool: "10.40.0.0/24", reserved: "10.40.1.7", problem: "reserved 10.40.1.7, outside its recipe's network.pool"},
		"proxy mode: unused":        {mode: "proxy", pool: "10.40.0.0/24", note: "unused: ingot's DHCP is in proxy mode"},
		"no pool in the recipe":     {mode: "full"},
		"serve's DHCP is not known": {pool: "10.40.0.0/24"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := poolEngine(t, c.mode)
			problems, notes := e.poolRules(r(c.pool), &machine.Machine{Name: "n1", IPv4: c.reserved})
			if got := strings.Join(problems, "; "); (c.problem == "") != (got == "") || !strings.Contains(got, c.problem) {
				t.Errorf("problems %q, want %q", got, c.problem)
			}
			if got := strings.Join(notes, "; "); (c.note == "") != (got == "") || !strings.Contains(got, c.note) {
				t.Errorf("notes %q, want %q", got, c.note)
			}
		})
	}
}

func TestReserveFromPool(t *testing.T) {
	ctx := context.Background()
	e, s := poolEngine(t, "full")
	r := &recipe.Recipe{Name: "gpu", Network: recipe.Network{Pool: "10.40.0.0/30"}}
	add := func(name, mac, ip string) *machine.Machine {
		m := &machine.Machine{Name: name, MACs: []string{mac}, IPv4: ip, State: machine.StateEnrolled}
		if err := s.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// 10.40.0.0/30: .0 network, .1 the server, .2 the router, .3 the pool's
	// broadcast: nothing is free.
	m := add("n1", "52:54:00:00:00:01", "")
	if err := e.reserve(ctx, r, m); err == nil || !strings.Contains(err.Error(), "no free address") {
		t.Fatalf("reserve in a full pool: %v", err)
	}
	r.Network.Pool = "10.40.0.0/28"
	add("n2", "52:54:00:00:00:02", "10.40.0.3")
	if err := s.PutLease(ctx, store.Lease{MAC: "52:54:00:00:00:09", IP: netip.MustParseAddr("10.40.0.4"), State: "bound", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := e.reserve(ctx, r, m); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetMachine(ctx, "n1")
	if got.IPv4 != "10.40.0.5" {
		t.Errorf("reserved %q, want 10.40.0.5 (.1 server, .2 router, .3 n2's, .4 leased to another MAC)", got.IPv4)
	}
	evs, _ := s.Events(ctx, got.ID, 0, 0)
	if len(evs) == 0 || evs[len(evs)-1].Kind != "reservation" {
		t.Errorf("events %+v: want a reservation event", evs)
	}
}
