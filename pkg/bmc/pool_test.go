package bmc_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/bmc"
	"github.com/ingot-dev/ingot/pkg/vbmc"
)

// countingDial dials for real and counts the dials.
func countingDial(n *atomic.Int64) bmc.DialFunc {
	return func(ctx context.Context, cfg bmc.Config) (*bmc.Client, error) {
		n.Add(1)
		return bmc.Dial(ctx, cfg)
	}
}

// Every caller of one BMC gets the same client: one dial, one session,
// however many ask at once; another BMC gets its own. Close logs out all.
func TestPoolSharesOneClientPerBMC(t *testing.T) {
	b1, url1 := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	b2, url2 := startBMC(t, "dmtf-public-tower", vbmc.Faults{})
	var dials atomic.Int64
	p := bmc.NewPool(countingDial(&dials))
	got := make([]*bmc.Client, 16)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.Get(ctxT(t), testConfig(url1))
			if err != nil {
				t.Errorf("Get: %v", err)
				return
			}
			got[i] = c
			if _, err := c.Readings(ctxT(t)); err != nil {
				t.Errorf("Readings: %v", err)
			}
		}()
	}
	wg.Wait()
	for _, c := range got {
		if c != got[0] {
			t.Fatal("callers of one BMC got different clients")
		}
	}
	other, err := p.Get(ctxT(t), testConfig(url2))
	if err != nil || other == got[0] {
		t.Fatalf("another BMC: %v (same client %v)", err, other == got[0])
	}
	if dials.Load() != 2 || p.Len() != 2 || b1.OpenSessions() != 1 || b2.OpenSessions() != 1 {
		t.Errorf("%d dials, %d pooled, sessions %d and %d; want 2, 2, 1 and 1", dials.Load(), p.Len(), b1.OpenSessions(), b2.OpenSessions())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if b1.OpenSessions() != 0 || b2.OpenSessions() != 0 {
		t.Errorf("sessions left after Close: %d and %d", b1.OpenSessions(), b2.OpenSessions())
	}
	if _, err := p.Get(ctxT(t), testConfig(url1)); err == nil {
		t.Error("Get after Close worked, want an error")
	}
}

// A password the BMC refused is not sent again through the pool (a poller
// asking every minute would lock the account); another password is.
func TestPoolRemembersARefusedPassword(t *testing.T) {
	b, _, url := lockoutBMC(t, "dmtf-public-rackmount1", vbmc.Lockout{Threshold: 2, Duration: 10 * time.Minute})
	p := bmc.NewPool(nil)
	defer p.Close()
	wrong := testConfig(url)
	wrong.Password = "wrong"
	for i := range 5 {
		if _, err := p.Get(ctxT(t), wrong); !bmc.IsKind(err, bmc.KindAuth) {
			t.Fatalf("Get %d with a wrong password: %v, want KindAuth", i+1, err)
		}
	}
	if n := b.Stats().FailedLogins; n != 1 || b.Locked(testUser) {
		t.Fatalf("5 Gets with a wrong password cost %d failed logins (locked %v), want 1", n, b.Locked(testUser))
	}
	c, err := p.Get(ctxT(t), testConfig(url))
	if err != nil {
		t.Fatalf("Get with the right password: %v", err)
	}
	if _, err := c.PowerState(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// A pooled client that stopped (the BMC refused its password at a session
// renewal) is answered from memory for the same password and dialed anew
// for a new one; a client a caller closed is dialed anew.
func TestPoolRedialsAStoppedOrClosedClient(t *testing.T) {
	b, _, url, clock := sessionBMC(t)
	p := bmc.NewPool(nil)
	defer p.Close()
	c, err := p.Get(ctxT(t), testConfig(url))
	if err != nil {
		t.Fatal(err)
	}
	other := dial(t, testConfig(url))
	if err := other.RotatePassword(ctxT(t), "", "rotated-pw"); err != nil {
		t.Fatal(err)
	}
	other.Close()
	clock.advance(2 * time.Minute)
	if _, err := c.PowerState(ctxT(t)); !bmc.IsKind(err, bmc.KindAuth) {
		t.Fatalf("PowerState with a stale password: %v", err)
	}
	if _, err := p.Get(ctxT(t), testConfig(url)); !bmc.IsKind(err, bmc.KindAuth) {
		t.Fatalf("Get with the refused password: %v, want its refusal", err)
	}
	if n := b.Stats().FailedLogins; n != 1 {
		t.Fatalf("%d failed logins, want 1", n)
	}
	cfg := testConfig(url)
	cfg.Password = "rotated-pw"
	c2, err := p.Get(ctxT(t), cfg)
	if err != nil || c2 == c {
		t.Fatalf("Get with the new password: %v (same client %v)", err, c2 == c)
	}
	c2.Close() // a caller closing a pooled client by mistake
	c3, err := p.Get(ctxT(t), cfg)
	if err != nil || c3 == c2 {
		t.Fatalf("Get after a caller closed the client: %v (same client %v)", err, c3 == c2)
	}
	if _, err := c3.PowerState(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := b.OpenSessions(); n != 1 {
		t.Errorf("%d sessions open, want 1", n)
	}
}

// A BMC that could not be reached is dialed again by the next Get, and
// Forget drops a client so the next Get dials.
func TestPoolRetriesUnreachableAndForgets(t *testing.T) {
	_, url := startBMC(t, "dmtf-public-rackmount1", vbmc.Faults{})
	var dials atomic.Int64
	p := bmc.NewPool(func(ctx context.Context, cfg bmc.Config) (*bmc.Client, error) {
		if dials.Add(1) == 1 {
			return nil, &bmc.Error{Kind: bmc.KindUnreachable, Endpoint: cfg.Endpoint, Err: errors.New("connection refused")}
		}
		return bmc.Dial(ctx, cfg)
	})
	defer p.Close()
	if _, err := p.Get(ctxT(t), testConfig(url)); !bmc.IsKind(err, bmc.KindUnreachable) {
		t.Fatalf("first Get: %v, want KindUnreachable", err)
	}
	c, err := p.Get(ctxT(t), testConfig(url))
	if err != nil {
		t.Fatalf("second Get: %v", err)
	}
	if err := p.Forget(url, testUser); err != nil {
		t.Fatal(err)
	}
	c2, err := p.Get(ctxT(t), testConfig(url))
	if err != nil || c2 == c || dials.Load() != 3 {
		t.Errorf("after Forget: %v, same client %v, %d dials; want a new client, 3 dials", err, c2 == c, dials.Load())
	}
}

// A BMC that never answers the logout keeps Close (serve's shutdown)
// waiting a bounded time, not its read timeout times its retries; the
// error says the sessions were left to expire.
func TestPoolCloseIsBounded(t *testing.T) {
	b, err := vbmc.New(vbmc.Config{Root: mockupDir(t, "dmtf-public-rackmount1"), Username: testUser, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			select { // the logout: never answered while Close waits
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		b.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer close(release)
	cfg := testConfig(srv.URL)
	cfg.ReadTimeout = time.Minute
	p := bmc.NewPool(nil)
	if _, err := p.Get(ctxT(t), cfg); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.Close()
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("Close took %s with an unanswered logout, want about 5 s", took)
	}
	if err == nil || !strings.Contains(err.Error(), "expire the sessions") {
		t.Errorf("Close: %v, want the unanswered logouts named", err)
	}
}
