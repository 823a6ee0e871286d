package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

type fakeBMC struct {
	inv machine.Inventory
	err error
}

func (f fakeBMC) Inventory(context.Context) (machine.Inventory, error) { return f.inv, f.err }
func (f fakeBMC) Close() error                                         { return nil }

func newFleet(t *testing.T, b *fakeBMC) (*Service, store.Store) {
	t.Helper()
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	recipes := func(name string) (*recipe.Recipe, error) {
		switch name {
		case "gpu":
			return &recipe.Recipe{Name: "gpu", Hardware: recipe.Hardware{GPUs: []recipe.GPUSpec{{Vendor: "NVIDIA", Model: "H100", Count: 8}}}}, nil
		case "base":
			return &recipe.Recipe{Name: "base", Template: true}, nil
		}
		return nil, fmt.Errorf("no recipe %s", name)
	}
	var dial DialBMC
	if b != nil {
		dial = func(context.Context, *machine.Machine) (BMCReader, error) { return *b, nil }
	}
	s, err := New(Config{Store: st, Recipes: recipes, DialBMC: dial, Credentials: credential.Policy{Dir: "/etc/ingot/bmc", EnvPrefix: "INGOT_BMC_"},
		Now: func() time.Time { return time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

func node(name string) machine.Machine {
	return machine.Machine{Name: name, MACs: []string{"52:54:00:AA:00:01"}, Recipe: "gpu",
		BMC: machine.BMC{Endpoint: "https://10.0.0.5", CredentialRef: "file:/etc/ingot/bmc/n1"}}
}

func TestEnrollRefuses(t *testing.T) {
	cases := map[string]struct {
		mutate func(*machine.Machine)
		want   string
	}{
		"upper case name":      {func(m *machine.Machine) { m.Name = "GPU-1" }, `name "GPU-1": 'G' is not allowed`},
		"newline in name":      {func(m *machine.Machine) { m.Name = "n1\ninitrd=x" }, `'\n' is not allowed`},
		"traversal in name":    {func(m *machine.Machine) { m.Name = "../../x" }, "a label is empty"},
		"injection in id":      {func(m *machine.Machine) { m.ID = "m-1 initrd=http://evil/x" }, `id: invalid request: name "m-1 initrd=http://evil/x"`},
		"label too long":       {func(m *machine.Machine) { m.Name = strings.Repeat("a", 64) }, "longer than 63"},
		"state at enrolment":   {func(m *machine.Machine) { m.State = machine.StateReady }, `state "ready": a machine's state is set by its lifecycle`},
		"no MAC":               {func(m *machine.Machine) { m.MACs = nil }, "macs: at least one MAC"},
		"8-byte MAC":           {func(m *machine.Machine) { m.MACs = []string{"00:00:00:00:fe:80:00:00"} }, "macs[0]: invalid request: MAC"},
		"BMC not a URL":        {func(m *machine.Machine) { m.BMC.Endpoint = "10.0.0.5" }, `bmc.endpoint "10.0.0.5"`},
		"credential reference": {func(m *machine.Machine) { m.BMC.CredentialRef = "/etc/shadow" }, `bmc.credential_ref "/etc/shadow"`},
		"credential file outside the folder": {func(m *machine.Machine) { m.BMC.CredentialRef = "file:/etc/shadow" },
			`must name a file inside /etc/ingot/bmc`},
		"credential variable without the prefix": {func(m *machine.Machine) { m.BMC.CredentialRef = "env:AWS_SECRET_ACCESS_KEY" },
			`starting with INGOT_BMC_`},
		"negative index":  {func(m *machine.Machine) { m.Index = -1 }, "index -1"},
		"bad IPv4":        {func(m *machine.Machine) { m.IPv4 = "10.0.0" }, `ipv4 "10.0.0"`},
		"unknown recipe":  {func(m *machine.Machine) { m.Recipe = "cpu" }, `recipe "cpu": no recipe cpu`},
		"template recipe": {func(m *machine.Machine) { m.Recipe = "base" }, `recipe "base" is a template`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, st := newFleet(t, nil)
			m := node("n1")
			c.mutate(&m)
			_, err := s.Enroll(context.Background(), m, "operator:alice")
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Enroll = %v, want ErrInvalid saying %q", err, c.want)
			}
			if ms, _ := st.ListMachines(context.Background(), store.MachineFilter{}); len(ms) != 0 {
				t.Errorf("a refused enrolment stored %v", ms)
			}
		})
	}
}

// Every change leaves one event with its actor; mid-job changes are
// refused naming the job.
func TestMachineChanges(t *testing.T) {
	ctx := context.Background()
	s, st := newFleet(t, nil)
	m, err := s.Enroll(ctx, node("n1"), "operator:alice")
	if err != nil {
		t.Fatal(err)
	}
	if m.State != machine.StateEnrolled || m.MACs[0] != "52:54:00:aa:00:01" {
		t.Errorf("enrolled %+v: want state enrolled and the MAC normalized", m)
	}
	if _, err := s.Enroll(ctx, node("n1"), "operator:alice"); !errors.Is(err, store.ErrExists) && !errors.Is(err, store.ErrConflict) {
		t.Errorf("second enrolment of n1: %v, want a name clash", err)
	}
	if _, err := s.SetRecipe(ctx, "n1", "", "operator:bob", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRecipe(ctx, "n1", "base", "operator:bob", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetRecipe to a template: %v, want ErrInvalid", err)
	}
	evs, _ := st.Events(ctx, m.ID, 0, 0)
	want := []struct{ kind, actor string }{{"enrolled", "operator:alice"}, {"recipe", "operator:bob"}}
	if len(evs) != len(want) {
		t.Fatalf("events %+v, want %v", evs, want)
	}
	for i, w := range want {
		if evs[i].Kind != w.kind || evs[i].Actor != w.actor {
			t.Errorf("event %d = %s by %s, want %s by %s", i, evs[i].Kind, evs[i].Actor, w.kind, w.actor)
		}
	}
	if err := st.CreateJob(ctx, &store.Job{ID: "j-1", Kind: "reimage", Machines: []string{m.ID}, State: store.JobRunning, Step: "image"}); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"SetRecipe": func() error { _, err := s.SetRecipe(ctx, "n1", "gpu", "operator:bob", 0); return err }(),
		"Delete":    s.Delete(ctx, "n1", "operator:bob"),
	} {
		if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "j-1") {
			t.Errorf("%s mid-job: %v, want ErrBusy naming j-1", what, err)
		}
	}
	if _, err := st.UpdateJob(ctx, "j-1", func(j *store.Job) error { j.State = store.JobSucceeded; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "n1", "operator:bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "n1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
}

func TestDiscover(t *testing.T) {
	ctx := context.Background()
	s, st := newFleet(t, nil)
	m, err := s.Discover(ctx, "52:54:00:AA:00:09", "bios", "dhcp")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Discover(ctx, "52:54:00:aa:00:09", "bios", "dhcp")
	if err != nil || again.ID != m.ID {
		t.Fatalf("second discovery: %+v, %v; want the same machine", again, err)
	}
	evs, _ := st.Events(ctx, m.ID, 0, 0)
	if m.State != machine.StateDiscovered || len(evs) != 1 || evs[0].Kind != "discovered" || evs[0].Actor != "dhcp" {
		t.Errorf("discovered %+v with events %+v: want state discovered and exactly one discovered event by dhcp", m, evs)
	}
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	s, _ := newFleet(t, nil)
	secret, tok, err := s.CreateToken(ctx, "ci", ScopeReadOnly, time.Hour, "operator:alice")
	if err != nil || !strings.HasPrefix(secret, "ingot_") || tok.Expires.IsZero() {
		t.Fatalf("CreateToken = %q, %+v, %v", secret, tok, err)
	}
	if _, _, err := s.CreateToken(ctx, "ci", "root", 0, "operator:alice"); !errors.Is(err, ErrInvalid) {
		t.Errorf("scope root: %v, want ErrInvalid", err)
	}
	toks, err := s.Tokens(ctx)
	if err != nil || len(toks) != 1 || toks[0].Hash != "" || toks[0].Scope != ScopeReadOnly {
		t.Fatalf("Tokens = %+v, %v: want the one read-only token without its hash", toks, err)
	}
	if err := s.RevokeToken(ctx, tok.ID, "operator:alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, tok.ID, "operator:alice"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second revoke: %v, want ErrNotFound", err)
	}
}

func TestInspect(t *testing.T) {
	ctx := context.Background()
	b := &fakeBMC{inv: machine.Inventory{Source: "redfish", GPUs: []machine.GPU{{Vendor: "NVIDIA", Model: "H100 SXM"}}}}
	s, st := newFleet(t, b)
	m, err := s.Enroll(ctx, node("n1"), "operator:alice")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Inspect(ctx, "n1", "operator:alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.Recipe != "gpu" || len(res.Findings) == 0 || !strings.Contains(res.Summary, "critical") {
		t.Errorf("inspection %+v: want a critical finding (1 of 8 GPUs)", res)
	}
	if snap, err := st.Inventory(ctx, m.ID, res.Snapshot); err != nil || len(snap.Inventory.GPUs) != 1 {
		t.Errorf("stored snapshot %d: %+v, %v", res.Snapshot, snap, err)
	}
	b.err = errors.New("connection refused")
	if _, err := s.Inspect(ctx, "n1", "operator:alice"); err == nil || !strings.Contains(err.Error(), "https://10.0.0.5: connection refused") {
		t.Errorf("Inspect with the BMC down: %v, want an error naming the BMC", err)
	}
}

// Tokens expire by default, and expired ones are swept away.
func TestTokenExpiry(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	s, err := New(Config{Store: st, Recipes: func(string) (*recipe.Recipe, error) { return nil, nil }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_, def, err := s.CreateToken(ctx, "ops", "", 0, "admin:root")
	if err != nil || !def.Expires.Equal(now.Add(DefaultTokenTTL)) {
		t.Fatalf("token without a lifetime expires %v (%v), want now + %s", def.Expires, err, DefaultTokenTTL)
	}
	if _, _, err := s.CreateToken(ctx, "short", "", time.Hour, "admin:root"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if n, err := s.SweepTokens(ctx); err != nil || n != 1 {
		t.Fatalf("SweepTokens = %d, %v; want the one expired token", n, err)
	}
	toks, _ := s.Tokens(ctx)
	if len(toks) != 1 || toks[0].Name != "ops" {
		t.Errorf("tokens after the sweep: %+v", toks)
	}
}

// Discovery keeps at most MaxDiscovered machines waiting: a flood of
// made-up MACs cannot fill the store.
func TestDiscoveryCap(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	s, err := New(Config{Store: st, Recipes: func(string) (*recipe.Recipe, error) { return nil, nil }, MaxDiscovered: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := s.Discover(ctx, fmt.Sprintf("52:54:00:00:01:%02x", i), "bios", "dhcp"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Discover(ctx, "52:54:00:00:01:ff", "bios", "dhcp"); !errors.Is(err, ErrFull) {
		t.Errorf("fourth discovery: %v, want ErrFull", err)
	}
	if _, err := s.Discover(ctx, "52:54:00:00:01:00", "bios", "dhcp"); err != nil {
		t.Errorf("a known MAC at the limit: %v, want its machine", err)
	}
}

// The periodic refresh inspects ready machines (not others) and records
// drift from the recipe as an inspect event.
func TestRunRefresh(t *testing.T) {
	b := &fakeBMC{inv: machine.Inventory{GPUs: make([]machine.GPU, 7)}}
	for i := range b.inv.GPUs {
		b.inv.GPUs[i] = machine.GPU{Vendor: "NVIDIA", Model: "H100"}
	}
	s, st := newFleet(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, other := node("ready-1"), node("enrolled-1")
	other.MACs, other.BMC.Endpoint = []string{"52:54:00:aa:00:02"}, "https://10.0.0.6"
	for _, m := range []*machine.Machine{&ready, &other} {
		if _, err := s.Enroll(ctx, *m, "t"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ChangeMachine(ctx, "ready-1", store.Change{Edit: store.Edit(func(m *machine.Machine) error { m.State = machine.StateReady; return nil })}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.RunRefresh(ctx, 20*time.Millisecond) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs, _ := s.Events(ctx, "ready-1", 0, 0)
		var found bool
		for _, ev := range evs {
			if ev.Kind == "inspect" && ev.Actor == "inventory-refresh" && strings.Contains(ev.Message, "critical") {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refresh inspect event with the 7-of-8-GPU drift: %+v", evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if evs, _ := s.Events(ctx, "enrolled-1", 0, 0); len(evs) > 1 {
		for _, ev := range evs {
			if ev.Kind == "inspect" {
				t.Errorf("a machine not ready was refreshed: %+v", ev)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
