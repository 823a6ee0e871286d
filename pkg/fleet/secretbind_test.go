package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
)

// A secret's bindings through the fleet's calls: set without endpoints it
// is bound at its first use to every machine using it then (eight racing
// first uses all open it, and bind once), and a machine enrolled with it
// afterwards is refused; set again it keeps them; set with endpoints it
// goes to exactly those; allow adds one (twice: no change; a malformed URL
// refused); the scheme is part of an endpoint.
func TestSecretBindings(t *testing.T) {
	ctx := context.Background()
	s, st := rotationFleet(t, &passBMC{password: "pw"})
	cred := []byte("username=admin\npassword=pw\n")
	if err := s.SetSecret(ctx, "shared", cred, "operator:alice"); err != nil {
		t.Fatal(err)
	}
	var ms []*machine.Machine
	for i := range 10 {
		m := &machine.Machine{ID: fmt.Sprintf("m-%d", i), Name: fmt.Sprintf("n%d", i),
			BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.0.0.%d", i+1), CredentialRef: "secret:shared"}}
		ms = append(ms, m)
		if i < 8 {
			if err := st.CreateMachine(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i, m := range ms[:8] {
		wg.Go(func() { _, _, errs[i] = s.Credentials().Resolve(m) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("n%d at the first uses: %v", i, err)
		}
	}
	infos, _ := s.Secrets(ctx)
	firsts := 0
	for _, b := range infos[0].Endpoints {
		if strings.HasPrefix(b.By, "first use by n") {
			firsts++
		}
	}
	if len(infos[0].Endpoints) != 8 || firsts != 1 {
		t.Fatalf("8 first uses racing: bindings %+v; want the 8 machines' endpoints, bound once", infos[0].Endpoints)
	}
	if evs, _ := st.Events(ctx, "m-5", 0, 0); len(evs) != 1 || !strings.Contains(evs[0].Message, "secret shared bound to https://10.0.0.6 (this machine's BMC) at its first use") {
		t.Errorf("n5's events: %+v, want one saying it was bound", evs)
	}
	if err := st.CreateMachine(ctx, ms[8]); err != nil { // enrolled after the first use
		t.Fatal(err)
	}
	if _, _, err := s.Credentials().Resolve(ms[8]); !errors.Is(err, credential.ErrRefused) || !strings.Contains(err.Error(), "ingot secret allow shared --endpoint https://10.0.0.9") {
		t.Errorf("n8, enrolled after the first use: %v, want refused naming the allow command", err)
	}
	if err := s.SetSecret(ctx, "shared", []byte("username=admin\npassword=new\n"), "operator:alice"); err != nil {
		t.Fatal(err)
	}
	if infos, _ = s.Secrets(ctx); len(infos[0].Endpoints) != 8 {
		t.Errorf("after a new value: %+v, want the bindings kept", infos[0].Endpoints)
	}
	for _, bad := range []string{"10.0.0.9", "ftp://10.0.0.9", "https://u:p@10.0.0.9"} {
		if err := s.AllowSecret(ctx, "shared", bad, "operator:bob"); !errors.Is(err, ErrInvalid) {
			t.Errorf("allow %q: %v, want ErrInvalid", bad, err)
		}
	}
	for range 2 {
		if err := s.AllowSecret(ctx, "shared", "HTTPS://10.0.0.9:443/", "operator:bob"); err != nil {
			t.Fatal(err)
		}
	}
	if infos, _ = s.Secrets(ctx); len(infos[0].Endpoints) != 9 || infos[0].Endpoints[8].Endpoint != "https://10.0.0.9" || infos[0].Endpoints[8].By != "operator:bob" {
		t.Errorf("after allowing https://10.0.0.9 twice: %+v", infos[0].Endpoints)
	}
	if _, _, err := s.Credentials().Resolve(ms[8]); err != nil {
		t.Errorf("n8 after the allow: %v", err)
	}
	if evs, _ := st.Events(ctx, "m-8", 0, 0); len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Message, "allowed to go to https://10.0.0.9") {
		t.Errorf("n8's events lack the allow: %+v", evs)
	}

	if err := s.SetSecretBound(ctx, "shared", cred, []string{"https://10.0.0.8"}, "operator:carol"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Credentials().Resolve(ms[2]); !errors.Is(err, credential.ErrRefused) {
		t.Errorf("n2 after set --endpoint https://10.0.0.8: %v, want refused", err)
	}
	if _, _, err := s.Credentials().Resolve(ms[7]); err != nil {
		t.Errorf("n7 (https://10.0.0.8): %v", err)
	}
	down := *ms[7]
	down.BMC.Endpoint, down.BMC.Insecure = "http://10.0.0.8", true
	if _, _, err := s.Credentials().Resolve(&down); !errors.Is(err, credential.ErrRefused) {
		t.Errorf("the bound host over plain http: %v, want refused (the scheme is part of the endpoint)", err)
	}

	// Allowing an endpoint for a secret not bound yet keeps its users.
	if err := s.SetSecret(ctx, "fresh", cred, "operator:alice"); err != nil {
		t.Fatal(err)
	}
	user := &machine.Machine{ID: "m-f", Name: "nf", BMC: machine.BMC{Endpoint: "https://10.0.1.1", CredentialRef: "secret:fresh"}}
	if err := st.CreateMachine(ctx, user); err != nil {
		t.Fatal(err)
	}
	if err := s.AllowSecret(ctx, "fresh", "https://10.0.1.2", "operator:bob"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Credentials().Resolve(user); err != nil {
		t.Errorf("the user of a secret allowed elsewhere before its first use: %v", err)
	}
}
