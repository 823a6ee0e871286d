//go:build integration

package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// TestIntegrationTwoInstances opens one prefix from two stores with their
// own clients (two ingot instances) and races them on everything that
// must be unique: one MAC, one IP, one job revision, one machine's event
// numbers. Exactly one wins each race and the seqs have no gaps.
func TestIntegrationTwoInstances(t *testing.T) {
	c := etcdtest.Three(t)
	ctx := context.Background()
	a := openPrefix(t, c.Client(t), "/site/", store.Options{})
	b := openPrefix(t, c.Client(t), "/site/", store.Options{})
	insts := []*etcd.Store{a, b}
	const rounds = 20
	var macWins, ipWins atomic.Int64
	for r := range rounds {
		mac := fmt.Sprintf("52:54:00:00:01:%02x", r)
		ip := netip.AddrFrom4([4]byte{10, 1, 0, byte(r)})
		var wg sync.WaitGroup
		for i, s := range insts {
			wg.Go(func() {
				m := machine.Machine{Name: fmt.Sprintf("n%d-%d", r, i), MACs: []string{mac}}
				err := s.CreateMachine(ctx, &m)
				switch {
				case err == nil:
					macWins.Add(1)
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("CreateMachine: %v; want nil or ErrConflict", err)
				}
				l := store.Lease{MAC: fmt.Sprintf("52:54:00:00:02:%02x", 2*r+i), IP: ip, State: store.LeaseBound, Expires: time.Now().Add(time.Hour)}
				err = s.PutLease(ctx, l)
				switch {
				case err == nil:
					ipWins.Add(1)
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("PutLease: %v; want nil or ErrConflict", err)
				}
			})
		}
		wg.Wait()
	}
	if macWins.Load() != rounds || ipWins.Load() != rounds {
		t.Errorf("%d machines and %d leases won %d races each; want exactly one winner a race", macWins.Load(), ipWins.Load(), rounds)
	}
	m := machine.Machine{Name: "shared"}
	if err := a.CreateMachine(ctx, &m); err != nil {
		t.Fatal(err)
	}
	const each = 40
	var wg sync.WaitGroup
	for g := range 8 {
		s := insts[g%2]
		wg.Go(func() {
			for range each {
				if _, err := s.AppendEvent(ctx, machine.Event{Machine: "shared", Kind: "x"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	evs, err := b.Events(ctx, m.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d; want %d (no gaps, no repeats)", i, ev.Seq, i+1)
		}
	}
	if len(evs) != 8*each {
		t.Errorf("%d events; want %d", len(evs), 8*each)
	}
	t.Logf("events: %+v and %+v (rounds, calls) on the two instances", a.EventStats(), b.EventStats())
}

// TestIntegrationMemberLoss stops a member (the leader, where etcd elects
// one) of a 3-member cluster while 16 writers put leases: every PutLease
// that returned nil is there afterwards, through the loss, the election
// and the member's return; errors during the election are allowed (the
// caller was not told yes), and most writes succeed.
func TestIntegrationMemberLoss(t *testing.T) {
	c := etcdtest.Three(t)
	ctx := context.Background()
	s := openPrefix(t, c.Client(t), "/loss/", store.Options{})
	leader := leaderIndex(t, c)
	var (
		mu    sync.Mutex
		acked []store.Lease
		fails atomic.Int64
		n     atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := n.Add(1)
				l := store.Lease{MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", byte(v>>8), byte(v)),
					IP: netip.AddrFrom4([4]byte{10, 2, byte(v >> 8), byte(v)}), State: store.LeaseBound, Expires: time.Now().Add(time.Hour)}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := s.PutLease(wctx, l)
				cancel()
				if err != nil {
					fails.Add(1)
					continue
				}
				mu.Lock()
				acked = append(acked, l)
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	c.Stop(leader)
	time.Sleep(4 * time.Second)
	c.Restart(leader)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	list, err := s.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range list {
		have[l.MAC] = true
	}
	lost := 0
	for _, l := range acked {
		if !have[l.MAC] {
			lost++
		}
	}
	t.Logf("stopped member %d (the leader); %d leases acknowledged, %d calls failed, %d lost; lease group commit %+v",
		leader, len(acked), fails.Load(), lost, s.LeaseStats())
	if lost > 0 || len(acked) < 100 {
		t.Errorf("%d acknowledged leases lost (want 0); %d acknowledged (want at least 100)", lost, len(acked))
	}
}

// leaderIndex is the member that leads now.
func leaderIndex(t *testing.T, c *etcdtest.Cluster) int {
	t.Helper()
	cli := c.Client(t)
	for i, m := range c.Members {
		st, err := cli.Status(context.Background(), m.ClientURL)
		if err == nil && st.Header.MemberId == st.Leader {
			return i
		}
	}
	t.Fatal("no member leads")
	return 0
}

// TestIntegrationCheckFindsDamage writes what no store writes (a unique
// key of a missing machine, one pointing at a machine that lacks it, an
// event above its counter, an IP index entry of a lease that moved) and
// expects Check to name each.
func TestIntegrationCheckFindsDamage(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	cli := c.Client(t)
	s, err := etcd.OpenClient(ctx, cli, "/damage/", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := machine.Machine{Name: "gpu-01", MACs: []string{"52:54:00:00:00:01"}}
	if err := s.CreateMachine(ctx, &m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatalf("healthy prefix: %v", err)
	}
	for k, v := range map[string]string{
		"/damage/k/mac/52:54:00:00:00:99":          "m-gone",
		"/damage/k/serial/SN9":                     m.ID,
		"/damage/ev/" + m.ID + "/0000000000000009": `{}`,
		"/damage/lip/10.9.9.9":                     "52:54:00:00:00:01",
	} {
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "/damage/k/name/gpu-01"); err != nil {
		t.Fatal(err)
	}
	err = s.Check(ctx)
	for _, want := range []string{"missing machine m-gone", "k/serial/SN9 points to machine " + m.ID + ", which does not hold it",
		"0000000000000009 is above its counter 1", "IP index 10.9.9.9", "k/name/gpu-01, but the key is missing"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v; want it to report %q", err, want)
		}
	}
}

// TestIntegrationAuth opens a store with etcd's user/password auth named
// in the URL (the password in a file), the user allowed only its prefix:
// the store works, a wrong password and another prefix are refused with
// errors that say so.
func TestIntegrationAuth(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	cli := c.Client(t)
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "ingot-site-a"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "ingot-site-a", "/site-a/", "/site-a0", 2) // READWRITE
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "ingot", "s3cret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "ingot", "ingot-site-a"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("setting up auth: %v", err)
		}
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := etcd.OpenURL(ctx, c.URL("site-a")+"?user=ingot&password-file="+pw+"&dial-timeout=30s", store.Options{})
	if err != nil {
		t.Fatalf("OpenURL with user and password file: %v", err)
	}
	defer s.Close()
	m := machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(ctx, &m); err != nil {
		t.Fatalf("CreateMachine as ingot: %v", err)
	}
	_, err = etcd.OpenURL(ctx, c.URL("site-a")+"?user=ingot&password=wrong", store.Options{})
	if err == nil || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a wrong password: %v; want etcd's authentication error, without the password", err)
	}
	_, err = etcd.OpenURL(ctx, c.URL("site-b")+"?user=ingot&password-file="+pw, store.Options{})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a prefix the user may not write: %v; want permission denied", err)
	}
}

// TestIntegrationLayoutNewer refuses a prefix written by a newer ingot.
func TestIntegrationLayoutNewer(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/newer/meta/layout", "99"); err != nil {
		t.Fatal(err)
	}
	_, err := etcd.OpenClient(ctx, cli, "/newer/", store.Options{})
	if !errors.Is(err, store.ErrSchema) || !strings.Contains(err.Error(), "99") {
		t.Errorf("OpenClient on a newer layout: %v; want ErrSchema naming 99", err)
	}
}

// TestIntegrationTLS opens a store over TLS with a client certificate
// (etcd --client-cert-auth) named in the URL; without the certificate,
// or trusting another CA, the open fails.
func TestIntegrationTLS(t *testing.T) {
	tl := etcdtest.NewTLS(t)
	c := etcdtest.Start(t, 1, etcdtest.Options{TLS: tl})
	ctx := context.Background()
	base := c.URL("tls")
	s, err := etcd.OpenURL(ctx, base+"?cacert="+tl.CACert+"&cert="+tl.ClientCert+"&key="+tl.ClientKey+"&dial-timeout=30s", store.Options{})
	if err != nil {
		t.Fatalf("OpenURL over TLS with a client certificate: %v", err)
	}
	defer s.Close()
	m := machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(ctx, &m); err != nil {
		t.Fatalf("CreateMachine over TLS: %v", err)
	}
	other := etcdtest.NewTLS(t)
	for name, u := range map[string]string{
		"no client certificate": base + "?cacert=" + tl.CACert,
		"another CA":            base + "?cacert=" + other.CACert + "&cert=" + tl.ClientCert + "&key=" + tl.ClientKey,
		"plain HTTP":            base,
	} {
		start := time.Now()
		_, err := etcd.OpenURL(ctx, u+sep(u)+"dial-timeout=2s", store.Options{})
		if err == nil || !strings.Contains(err.Error(), "no answer from etcd") {
			t.Errorf("%s: OpenURL: %v; want it refused, saying etcd did not answer", name, err)
		}
		t.Logf("%s: refused in %s: %v", name, time.Since(start).Round(time.Millisecond), err)
	}
	if _, err := etcd.OpenURL(ctx, base+"?cacert="+filepath.Join(t.TempDir(), "none.pem"), store.Options{}); err == nil ||
		!strings.Contains(err.Error(), "reading the etcd CA") {
		t.Errorf("a missing CA file: %v; want it named", err)
	}
}

// sep is the separator before the next query parameter of u.
func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// TestIntegrationStaleRevisionOnFollowers writes a machine and a job, then
// at once asks for a write at the revision before, many times over three
// members: the caller's function never runs on the stale revision (a
// member behind the leader still holds it; a serializable read there once
// let it run, and the conformance suite caught it).
func TestIntegrationStaleRevisionOnFollowers(t *testing.T) {
	c := etcdtest.Three(t)
	ctx := context.Background()
	s := openPrefix(t, c.Client(t), "/stale/", store.Options{})
	m := machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(ctx, &m); err != nil {
		t.Fatal(err)
	}
	j := store.Job{Kind: "reimage"}
	if err := s.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i := range 300 {
		_, old, err := s.GetMachineRev(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ChangeMachine(ctx, m.ID, store.Change{Edit: store.Edit(func(m *machine.Machine) error { m.Rack = fmt.Sprint(i); return nil })}); err != nil {
			t.Fatal(err)
		}
		_, err = s.ChangeMachine(ctx, m.ID, store.Change{Rev: old, Edit: store.Edit(func(*machine.Machine) error { ran++; return nil })})
		if !errors.Is(err, store.ErrStale) {
			t.Fatalf("ChangeMachine at the revision before: %v; want ErrStale", err)
		}
		oldJob := j.Revision
		up, err := s.UpdateJob(ctx, j.ID, func(j *store.Job) error { j.Attempt = i; return nil })
		if err != nil {
			t.Fatal(err)
		}
		j = *up
		if _, err := s.UpdateJobRev(ctx, j.ID, oldJob, func(*store.Job) error { ran++; return nil }); !errors.Is(err, store.ErrStale) {
			t.Fatalf("UpdateJobRev at the revision before: %v; want ErrStale", err)
		}
	}
	if ran > 0 {
		t.Errorf("the caller's function ran %d times on a stale revision; want never", ran)
	}
}
