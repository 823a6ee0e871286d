package agentauth_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/agentauth"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

const mac = "52:54:00:00:00:01"

var (
	machineIP = netip.MustParseAddr("10.77.0.100")
	otherIP   = netip.MustParseAddr("10.77.0.200")
)

// fixture: a machine with a running job and a bound DHCP lease.
func fixture(t *testing.T, binding agentauth.Binding, neigh []agentauth.Neighbour) (*agentauth.Auth, store.Store, string) {
	t.Helper()
	ctx := context.Background()
	s := storetest.Open(t)
	m := &machine.Machine{ID: "m1", Name: "node1", MACs: []string{mac}, State: machine.StateProvisioning}
	if err := s.CreateMachine(ctx, m); err != nil {
		t.Fatal(err)
	}
	j := &store.Job{ID: "j1", Kind: "reimage", State: store.JobRunning, Machines: []string{"m1"}, Created: time.Now()}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLease(ctx, store.Lease{MAC: mac, IP: machineIP, MachineID: "m1", State: "bound", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	record := func(ctx context.Context, ev machine.Event) {
		if _, err := s.AppendEvent(ctx, ev); err != nil {
			t.Error(err)
		}
	}
	a, err := agentauth.New(agentauth.Config{Store: s, Binding: binding, Record: record,
		Neighbours: func(context.Context) ([]agentauth.Neighbour, error) { return neigh, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return a, s, j.ID
}

func securityEvents(t *testing.T, s store.Store) int {
	t.Helper()
	evs, err := s.Events(context.Background(), "m1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Kind == "security" {
			n++
		}
	}
	return n
}

func TestIssueBootTie(t *testing.T) {
	cases := map[string]struct {
		binding agentauth.Binding
		neigh   []agentauth.Neighbour
		from    netip.Addr
		ok      bool
		why     string
	}{
		"lease holder":              {agentauth.BindLease, nil, machineIP, true, ""},
		"another address (lease)":   {agentauth.BindLease, nil, otherIP, false, "is leased to 10.77.0.100"},
		"neighbour entry matches":   {agentauth.BindNeighbour, []agentauth.Neighbour{{IP: otherIP, MAC: mac}}, otherIP, true, ""},
		"neighbour of another MAC":  {agentauth.BindNeighbour, []agentauth.Neighbour{{IP: otherIP, MAC: "52:54:00:00:00:99"}}, otherIP, false, "is 52:54:00:00:00:99"},
		"no neighbour entry":        {agentauth.BindNeighbour, nil, machineIP, false, "no neighbour entry"},
		"first use takes any first": {agentauth.BindFirstUse, nil, otherIP, true, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			a, _, job := fixture(t, c.binding, c.neigh)
			sec, err := a.IssueBoot(context.Background(), "m1", mac, job, c.from)
			if c.ok != (err == nil) {
				t.Fatalf("IssueBoot from %s: %q, %v; want ok=%v", c.from, sec, err, c.ok)
			}
			if !c.ok && (!errors.Is(err, agentauth.ErrNotTied) || !strings.Contains(err.Error(), c.why)) {
				t.Errorf("error %v: want ErrNotTied saying %q", err, c.why)
			}
		})
	}
}

func TestFirstUseBindsOneAddressPerAttempt(t *testing.T) {
	ctx := context.Background()
	a, _, job := fixture(t, agentauth.BindFirstUse, nil)
	if _, err := a.IssueBoot(ctx, "m1", mac, job, machineIP); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IssueBoot(ctx, "m1", mac, job, otherIP); !errors.Is(err, agentauth.ErrNotTied) {
		t.Fatalf("second address in one boot attempt: %v, want ErrNotTied", err)
	}
	if _, err := a.IssueBoot(ctx, "m1", mac, job, machineIP); err != nil {
		t.Fatalf("same address again: %v", err)
	}
	// The engine's BMC step starts a new attempt: the binding is free again.
	if err := a.DeleteJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IssueBoot(ctx, "m1", mac, job, otherIP); err != nil {
		t.Fatalf("after a new boot attempt: %v", err)
	}
}

func TestExchangeAndUse(t *testing.T) {
	ctx := context.Background()
	a, s, job := fixture(t, agentauth.BindLease, nil)
	boot, err := a.IssueBoot(ctx, "m1", mac, job, machineIP)
	if err != nil {
		t.Fatal(err)
	}
	// The boot credential opens nothing but the exchange.
	if _, err := a.Authenticate(ctx, boot, machineIP, agentauth.KindAgent); !errors.Is(err, agentauth.ErrWrongKind) {
		t.Errorf("boot credential on an agent route: %v, want ErrWrongKind", err)
	}
	// A replay from another host is refused and recorded.
	if _, _, err := a.Exchange(ctx, boot, otherIP); !errors.Is(err, agentauth.ErrForeign) {
		t.Fatalf("exchange from %s: %v, want ErrForeign", otherIP, err)
	}
	if n := securityEvents(t, s); n != 1 {
		t.Errorf("%d security events after a foreign exchange, want 1", n)
	}
	first, _, err := a.Exchange(ctx, boot, machineIP)
	if err != nil {
		t.Fatal(err)
	}
	// The agent retried: idempotent from the same address, the newest wins.
	second, tok, err := a.Exchange(ctx, boot, machineIP)
	if err != nil {
		t.Fatalf("repeated exchange from the same address: %v", err)
	}
	if tok.JobID != job || agentauth.MachineID(tok) != "m1" {
		t.Errorf("agent credential %+v: want job %s, machine m1", tok, job)
	}
	if _, err := a.Authenticate(ctx, first, machineIP, agentauth.KindAgent); !errors.Is(err, agentauth.ErrUnknown) {
		t.Errorf("replaced agent credential: %v, want ErrUnknown", err)
	}
	if _, err := a.Authenticate(ctx, second, machineIP, agentauth.KindAgent); err != nil {
		t.Errorf("agent credential from its address: %v", err)
	}
	if _, err := a.Authenticate(ctx, second, otherIP, agentauth.KindAgent); !errors.Is(err, agentauth.ErrForeign) {
		t.Errorf("agent credential from %s: %v, want ErrForeign", otherIP, err)
	}
	if n := securityEvents(t, s); n != 2 {
		t.Errorf("%d security events, want 2", n)
	}
	// A new boot of the job invalidates everything issued before.
	if _, err := a.IssueBoot(ctx, "m1", mac, job, machineIP); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, second, machineIP, agentauth.KindAgent); !errors.Is(err, agentauth.ErrUnknown) {
		t.Errorf("agent credential of the earlier boot: %v, want ErrUnknown", err)
	}
	if _, _, err := a.Exchange(ctx, boot, machineIP); !errors.Is(err, agentauth.ErrUnknown) {
		t.Errorf("boot credential of the earlier boot: %v, want ErrUnknown", err)
	}
}

func TestFirstBootCredential(t *testing.T) {
	ctx := context.Background()
	a, s, job := fixture(t, agentauth.BindLease, nil)
	fb, err := a.IssueFirstBoot(ctx, "m1", job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, fb, otherIP, agentauth.KindFirstBoot); err == nil {
		t.Fatal("first-boot credential accepted from an address not tied to the machine")
	}
	if n := securityEvents(t, s); n != 1 {
		t.Errorf("%d security events, want 1", n)
	}
	tok, err := a.Authenticate(ctx, fb, machineIP, agentauth.KindFirstBoot)
	if err != nil || agentauth.MachineID(tok) != "m1" {
		t.Fatalf("first boot from the machine: %+v, %v", tok, err)
	}
	if _, err := a.Authenticate(ctx, fb, machineIP, agentauth.KindAgent); !errors.Is(err, agentauth.ErrWrongKind) {
		t.Errorf("first-boot credential on an agent route: %v, want ErrWrongKind", err)
	}
}

func TestDeleteJobRemovesEveryCredential(t *testing.T) {
	ctx := context.Background()
	a, s, job := fixture(t, agentauth.BindLease, nil)
	boot, _ := a.IssueBoot(ctx, "m1", mac, job, machineIP)
	if _, _, err := a.Exchange(ctx, boot, machineIP); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IssueFirstBoot(ctx, "m1", job); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	toks, err := s.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 0 {
		t.Errorf("%d credentials left after the job ended, want 0 (deleted, not revoked): %+v", len(toks), toks)
	}
}

func TestCredentialEndsWithItsJob(t *testing.T) {
	ctx := context.Background()
	a, s, job := fixture(t, agentauth.BindLease, nil)
	boot, _ := a.IssueBoot(ctx, "m1", mac, job, machineIP)
	if _, err := s.UpdateJob(ctx, job, func(j *store.Job) error { j.State = store.JobFailed; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Exchange(ctx, boot, machineIP); !errors.Is(err, agentauth.ErrUnknown) {
		t.Errorf("exchange after the job ended: %v, want ErrUnknown", err)
	}
}

func TestParseARP(t *testing.T) {
	in := `IP address       HW type     Flags       HW address            Mask     Device
10.77.0.100      0x1         0x2         52:54:00:00:00:01     *        br0
10.77.0.101      0x1         0x0         00:00:00:00:00:00     *        br0
192.168.1.1      0x1         0x2         AA:BB:CC:DD:EE:FF     *        eth0
`
	got, err := agentauth.ParseARP(strings.NewReader(in), "br0")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].IP != machineIP || got[0].MAC != mac {
		t.Errorf("ParseARP: %+v; want only the complete br0 entry", got)
	}
	all, _ := agentauth.ParseARP(strings.NewReader(in), "")
	if len(all) != 2 || all[1].MAC != "aa:bb:cc:dd:ee:ff" {
		t.Errorf("ParseARP every interface: %+v", all)
	}
	for name, bad := range map[string]string{
		"short line": "hdr\n10.0.0.1 0x1 0x2\n",
		"bad ip":     "hdr\n10.0.0.x 0x1 0x2 52:54:00:00:00:01 * br0\n",
		"bad mac":    "hdr\n10.0.0.1 0x1 0x2 52:54:00 * br0\n",
		"bad flags":  "hdr\n10.0.0.1 0x1 zz 52:54:00:00:00:01 * br0\n",
	} {
		if _, err := agentauth.ParseARP(strings.NewReader(bad), ""); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v, want an error naming line 2", name, err)
		}
	}
}

func FuzzParseARP(f *testing.F) {
	f.Add("IP address HW type Flags HW address Mask Device\n10.77.0.100 0x1 0x2 52:54:00:00:00:01 * br0\n")
	f.Add("x\n1 2 3 4 5 6\n")
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := agentauth.ParseARP(strings.NewReader(s), "")
		if err != nil {
			return
		}
		for _, n := range ns {
			if !n.IP.IsValid() || len(n.MAC) != 17 {
				t.Fatalf("entry %+v from %q", n, s)
			}
		}
	})
}

// An InfiniBand (IPoIB) neighbour has a 20-byte address: it is no boot
// NIC, so it is skipped, and the Ethernet entries around it still count.
func TestParseARPSkipsIPoIB(t *testing.T) {
	table := "IP address HW type Flags HW address Mask Device\n" +
		"10.77.0.100 0x1 0x2 52:54:00:00:00:01 * br0\n" +
		"192.168.100.7 0x20 0x2 80:00:02:08:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6b:2c:91 * ib0\n"
	ns, err := agentauth.ParseARP(strings.NewReader(table), "")
	if err != nil || len(ns) != 1 || ns[0].MAC != "52:54:00:00:00:01" {
		t.Errorf("neighbours %+v, %v; want only the Ethernet one", ns, err)
	}
}
