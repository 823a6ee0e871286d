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
// is bound at its first use (once, whichever of two racing machines comes
// first; the other is refused); set again it keeps them; set with
// endpoints it goes to exactly those; allow adds one (twice: no change; a
// malformed URL refused); the scheme is part of an endpoint.
func TestSecretBindings(t *testing.T) {
	ctx := context.Background()
	s, st := rotationFleet(t, &passBMC{password: "pw"})
	cred := []byte("username=admin\npassword=pw\n")
	if err := s.SetSecret(ctx, "shared", cred, "operator:alice"); err != nil {
		t.Fatal(err)
	}
	var ms []*machine.Machine
	for i := range 8 {
		m := &machine.Machine{ID: fmt.Sprintf("m-%d", i), Name: fmt.Sprintf("n%d", i),
			BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.0.0.%d", i+1), CredentialRef: "secret:shared"}}
		if err := st.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Go(func() { _, _, errs[i] = s.Credentials().Resolve(m) })
	}
	wg.Wait()
	opened := 0
	for i, err := range errs {
		switch {
		case err == nil:
			opened++
		case !errors.Is(err, credential.ErrRefused) || !strings.Contains(err.Error(), "ingot secret allow shared --endpoint https://10.0.0."):
			t.Errorf("n%d: %v, want refused naming the allow command", i, err)
		}
	}
	infos, _ := s.Secrets(ctx)
	if opened != 1 || len(infos[0].Endpoints) != 1 || !strings.HasPrefix(infos[0].Endpoints[0].By, "first use by n") {
		t.Fatalf("8 first uses racing: %d opened, bindings %+v; want exactly one", opened, infos[0].Endpoints)
	}
	bound := infos[0].Endpoints[0].Endpoint

	if err := s.SetSecret(ctx, "shared", []byte("username=admin\npassword=new\n"), "operator:alice"); err != nil {
		t.Fatal(err)
	}
	if infos, _ = s.Secrets(ctx); len(infos[0].Endpoints) != 1 || infos[0].Endpoints[0].Endpoint != bound {
		t.Errorf("after a new value: %+v, want the binding kept", infos[0].Endpoints)
	}
	for _, bad := range []string{"10.0.0.9", "ftp://10.0.0.9", "https://u:p@10.0.0.9"} {
		if err := s.AllowSecret(ctx, "shared", bad, "operator:bob"); !errors.Is(err, ErrInvalid) {
			t.Errorf("allow %q: %v, want ErrInvalid", bad, err)
		}
	}
	for range 2 {
		if err := s.AllowSecret(ctx, "shared", "HTTPS://10.0.0.3:443/", "operator:bob"); err != nil {
			t.Fatal(err)
		}
	}
	if infos, _ = s.Secrets(ctx); len(infos[0].Endpoints) != 2 || infos[0].Endpoints[1].Endpoint != "https://10.0.0.3" || infos[0].Endpoints[1].By != "operator:bob" {
		t.Errorf("after allowing https://10.0.0.3 twice: %+v", infos[0].Endpoints)
	}
	if _, _, err := s.Credentials().Resolve(ms[2]); err != nil {
		t.Errorf("n2 after the allow: %v", err)
	}
	if evs, _ := st.Events(ctx, "m-2", 0, 0); len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Message, "allowed to go to https://10.0.0.3") {
		t.Errorf("n2's events lack the allow: %+v", evs)
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
}
