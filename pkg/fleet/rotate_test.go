package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/credential"
	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/secret"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
	"github.com/ingot-dev/ingot/pkg/vbmc"
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
	v, err := s.openChecked(context.Background(), name, func(*store.Secret) error { return nil }) // wherever it goes
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

// rotationLog records, per machine, when its BMC took a new password.
type rotationLog struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (l *rotationLog) times(name string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at[name]...)
}

// loggedRotator is a real Redfish session (pkg/bmc) whose accepted
// rotations are logged.
type loggedRotator struct {
	*bmc.Client
	name string
	log  *rotationLog
}

func (r loggedRotator) RotatePassword(ctx context.Context, account, pass string) error {
	err := r.Client.RotatePassword(ctx, account, pass)
	if err == nil {
		r.log.mu.Lock()
		r.log.at[r.name] = append(r.log.at[r.name], time.Now())
		r.log.mu.Unlock()
	}
	return err
}

// repoMockup is a Redfish mockup of the repository's testdata.
func repoMockup(t *testing.T, name string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "redfish-mockups", name)
		}
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// The scheduler (serve --bmc-rotate-every) against virtual BMCs speaking
// Redfish: a machine whose secret is older than the interval is rotated in
// the first round; one whose secret is fresh is not, until the secret's age
// reaches the interval; machines that share a secret, or whose credential
// is a file, never are. No machine is rotated twice within the interval,
// and each is rotated again within one and a half intervals (the
// scheduler sleeps until the next secret is due; it used to wait a whole
// round more and rotate every two intervals). Afterwards each BMC takes
// the password its secret holds, and no longer the first one.
func TestRunRotationAgainstVirtualBMCs(t *testing.T) {
	ctx := context.Background()
	const every = 1500 * time.Millisecond
	var back atomic.Int64 // how far behind the store's clock runs
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second, Now: func() time.Time { return time.Now().Add(-time.Duration(back.Load())) }})
	keys, err := secret.Load(filepath.Join(t.TempDir(), "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	log := &rotationLog{at: map[string][]time.Time{}}
	credDir := t.TempDir()
	s, err := New(Config{Store: st, Keys: keys,
		Recipes:     func(string) (*recipe.Recipe, error) { return &recipe.Recipe{Name: "gpu"}, nil },
		Credentials: credential.Policy{Dir: credDir},
		DialBMCAs: func(ctx context.Context, m *machine.Machine, user, pass string) (BMCRotator, error) {
			c, err := bmc.Dial(ctx, bmc.Config{Endpoint: m.BMC.Endpoint, Username: user, Password: pass, ConnectTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second})
			if err != nil {
				return nil, err
			}
			return loggedRotator{Client: c, name: m.Name, log: log}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	endpoints := map[string]string{}
	for i, name := range []string{"due", "fresh", "shared-a", "shared-b", "file"} {
		b, err := vbmc.New(vbmc.Config{Root: repoMockup(t, "dmtf-public-rackmount1"), Username: "admin", Password: "first-" + name})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(b)
		t.Cleanup(srv.Close)
		endpoints[name] = srv.URL
		ref := "secret:" + name + "-bmc"
		switch name {
		case "shared-a", "shared-b":
			ref = "secret:shared-bmc"
		case "file":
			ref = "file:" + filepath.Join(credDir, "file")
		}
		m := machine.Machine{Name: name, MACs: []string{fmt.Sprintf("52:54:00:aa:01:%02x", i)},
			BMC: machine.BMC{Endpoint: srv.URL, CredentialRef: ref, Insecure: true}} // plain http: a test BMC
		if _, err := s.Enroll(ctx, m, "t"); err != nil {
			t.Fatal(err)
		}
	}
	setSecret := func(name, pass string, age time.Duration) {
		back.Store(int64(age))
		defer back.Store(0)
		if err := s.SetSecret(ctx, name, []byte("username=admin\npassword="+pass+"\n"), "t"); err != nil {
			t.Fatal(err)
		}
	}
	setSecret("due-bmc", "first-due", time.Hour)
	setSecret("shared-bmc", "first-shared-a", time.Hour)
	setSecret("fresh-bmc", "first-fresh", 0)
	freshSet := time.Now()

	rctx, cancel := context.WithTimeout(ctx, 3*every+every/3)
	defer cancel()
	start := time.Now()
	if err := s.RunRotation(rctx, every); err != nil {
		t.Fatalf("RunRotation: %v", err)
	}

	due, fresh := log.times("due"), log.times("fresh")
	switch {
	case len(due) == 0:
		t.Fatal("the machine whose secret was an hour old was never rotated")
	case due[0].Sub(start) > time.Second:
		t.Errorf("the due machine was rotated %v after the start, want in the first round", due[0].Sub(start))
	}
	switch {
	case len(fresh) == 0:
		t.Errorf("the machine whose secret was fresh was not rotated within %v of a %v interval", 3*every, every)
	case fresh[0].Sub(freshSet) < every:
		t.Errorf("the fresh machine was rotated %v after its secret was set, before the interval %v", fresh[0].Sub(freshSet), every)
	}
	for _, name := range []string{"shared-a", "shared-b", "file"} {
		if n := len(log.times(name)); n != 0 {
			t.Errorf("%s: rotated %d times, want never (a shared secret or a file credential)", name, n)
		}
	}
	for name, times := range map[string][]time.Time{"due": due, "fresh": fresh} {
		for i := 1; i < len(times); i++ {
			gap := times[i].Sub(times[i-1])
			t.Logf("%s: rotated again after %v (interval %v)", name, gap.Round(time.Millisecond), every)
			if limit := every*3/2 + time.Second/2; gap < every || gap > limit {
				t.Errorf("%s: rotations %v apart, want between %v and %v", name, gap, every, limit)
			}
		}
	}
	if len(due) < 2 {
		t.Errorf("the due machine was rotated %d times in %v, want a second rotation", len(due), 3*every)
	}
	for _, name := range []string{"due", "fresh"} {
		pass, _ := secretPassword(t, s, name+"-bmc")
		if c, err := bmc.Dial(ctx, bmc.Config{Endpoint: endpoints[name], Username: "admin", Password: pass, ConnectTimeout: 5 * time.Second}); err != nil {
			t.Errorf("%s: the BMC refuses the secret's password: %v", name, err)
		} else {
			c.Close()
		}
		if c, err := bmc.Dial(ctx, bmc.Config{Endpoint: endpoints[name], Username: "admin", Password: "first-" + name, ConnectTimeout: 5 * time.Second}); err == nil {
			c.Close()
			t.Errorf("%s: the BMC still takes its first password", name)
		}
	}
}
