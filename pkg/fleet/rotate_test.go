package fleet

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// passBMC is a BMC account: the password it takes, failed logins counted,
// and a rotation that may be refused.
type passBMC struct {
	password string
	failed   int
	refuse   error // RotatePassword's answer, nil: accepts
}

type passSession struct{ b *passBMC }

func (s passSession) RotatePassword(_ context.Context, _, p string) error {
	if s.b.refuse != nil {
		return s.b.refuse
	}
	s.b.password = p
	return nil
}
func (s passSession) Close() error { return nil }

func rotationFleet(t *testing.T, b *passBMC) (*Service, store.Store) {
	t.Helper()
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	keys, err := secret.Load(filepath.Join(t.TempDir(), "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: st, Keys: keys,
		Recipes:     func(string) (*recipe.Recipe, error) { return &recipe.Recipe{Name: "gpu"}, nil },
		Credentials: credential.Policy{Dir: "/etc/ingot/bmc"},
		DialBMCAs: func(_ context.Context, _ *machine.Machine, _, pass string) (BMCRotator, error) {
			if pass != b.password {
				b.failed++
				return nil, errors.New("401 Unauthorized")
			}
			return passSession{b}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

func secretPassword(t *testing.T, s *Service, name string) (string, string) {
	t.Helper()
	v, err := s.OpenSecret(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseSecretCredential(name, string(v))
	if err != nil {
		t.Fatal(err)
	}
	return c.password, c.pending
}

func TestRotateBMC(t *testing.T) {
	ctx := context.Background()
	b := &passBMC{password: "old-pass"}
	s, _ := rotationFleet(t, b)
	if err := s.SetSecret(ctx, "n1-bmc", []byte("username=admin\npassword=old-pass\n"), "t"); err != nil {
		t.Fatal(err)
	}
	m := machine.Machine{Name: "n1", MACs: []string{"52:54:00:aa:00:01"}, BMC: machine.BMC{Endpoint: "https://10.0.0.5", CredentialRef: "secret:n1-bmc"}}
	if _, err := s.Enroll(ctx, m, "t"); err != nil {
		t.Fatal(err)
	}

	// Accepted: the BMC and the secret agree on a new password, no login failed.
	r, err := s.RotateBMC(ctx, "n1", "t")
	pass, pending := secretPassword(t, s, "n1-bmc")
	if err != nil || !r.OK || pass != b.password || pass == "old-pass" || pending != "" || b.failed != 0 {
		t.Fatalf("rotation: %+v %v; secret %q pending %q, BMC %q, %d failed logins", r, err, pass, pending, b.password, b.failed)
	}
	if len(pass) != 20 {
		t.Errorf("new password %q: want 20 characters", pass)
	}

	// Refused by the BMC: the old password stays, in both places.
	b.refuse = errors.New("password does not meet the policy")
	before := b.password
	if _, err := s.RotateBMC(ctx, "n1", "t"); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Fatalf("a refused rotation: %v", err)
	}
	if pass, pending := secretPassword(t, s, "n1-bmc"); pass != before || pending != "" || b.password != before {
		t.Errorf("after a refused rotation: secret %q pending %q, BMC %q; want all %q", pass, pending, b.password, before)
	}
	b.refuse = nil

	// A crash after the BMC took the new password but before the secret was
	// rewritten: the secret holds it as pending. The next rotation settles
	// it (one failed login at most: the old password) and rotates.
	crashed := "crash-pass-1"
	if err := s.SetSecret(ctx, "n1-bmc", []byte("username=admin\npassword="+b.password+"\npending_password="+crashed+"\n"), "t"); err != nil {
		t.Fatal(err)
	}
	b.password, b.failed = crashed, 0
	if r, err := s.RotateBMC(ctx, "n1", "t"); err != nil || !r.OK {
		t.Fatalf("rotation after a crash: %+v %v", r, err)
	}
	if pass, pending := secretPassword(t, s, "n1-bmc"); pass != b.password || pending != "" || b.failed > 1 {
		t.Errorf("after settling: secret %q pending %q, BMC %q, %d failed logins", pass, pending, b.password, b.failed)
	}
	evs, _ := s.Events(ctx, "n1", 0, 0)
	var rotated int
	for _, ev := range evs {
		if ev.Kind == "bmc.password" && strings.HasPrefix(ev.Message, "BMC password rotated") {
			rotated++
		}
	}
	if rotated != 2 {
		t.Errorf("%d rotation events, want 2: %+v", rotated, evs)
	}

	// Not rotatable: a file reference; a secret shared by two machines.
	m2 := machine.Machine{Name: "n2", MACs: []string{"52:54:00:aa:00:02"}, BMC: machine.BMC{Endpoint: "https://10.0.0.6", CredentialRef: "file:/etc/ingot/bmc/n2"}}
	s.Enroll(ctx, m2, "t")
	if _, err := s.RotateBMC(ctx, "n2", "t"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "only secret: references") {
		t.Errorf("file reference: %v", err)
	}
	m3 := machine.Machine{Name: "n3", MACs: []string{"52:54:00:aa:00:03"}, BMC: machine.BMC{Endpoint: "https://10.0.0.7", CredentialRef: "secret:n1-bmc"}}
	s.Enroll(ctx, m3, "t")
	if _, err := s.RotateBMC(ctx, "n1", "t"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "shared by n1, n3") {
		t.Errorf("shared secret: %v", err)
	}
}
