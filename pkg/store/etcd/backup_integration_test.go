//go:build integration

package etcd_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
	"github.com/ingot-dev/ingot/pkg/store/etcd"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// populate writes records of every kind, with history trimmed, a lease
// moved and one given way, a job updated, a token revoked.
func populate(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		m := machine.Machine{Name: fmt.Sprintf("gpu-%02d", i), MACs: []string{fmt.Sprintf("52:54:00:00:00:%02x", i)},
			Serial: fmt.Sprintf("SN%d", i), BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.0.1.%d", i)}, Rack: "r1"}
		if err := s.CreateMachine(ctx, &m); err != nil {
			t.Fatal(err)
		}
		for j := range 4 { // History is 3: the first is trimmed
			if _, err := s.PutInventory(ctx, m.ID, machine.Inventory{Source: "agent", DIMMs: make([]machine.DIMM, j)}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "state", Message: fmt.Sprint(j)}); err != nil {
				t.Fatal(err)
			}
		}
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)})
		if err := s.PutLease(ctx, store.Lease{MAC: m.MACs[0], IP: ip, State: store.LeaseBound, Expires: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ChangeMachine(ctx, "gpu-01", store.Change{Edit: store.Edit(func(m *machine.Machine) error { m.Name, m.MACs = "gpu-renamed", nil; return nil })}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLease(ctx, store.Lease{MAC: "52:54:00:00:00:02", IP: netip.MustParseAddr("10.0.0.99"), State: store.LeaseBound,
		Expires: time.Now().Add(time.Hour)}); err != nil { // moved: 10.0.0.12 is free
		t.Fatal(err)
	}
	j := store.Job{Kind: "reimage", Machines: []string{"gpu-00"}, Spec: json.RawMessage(`{"image":"a"}`)}
	if err := s.CreateJob(ctx, &j); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateJob(ctx, j.ID, func(j *store.Job) error { j.State, j.Step = store.JobRunning, "power"; return nil }); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("secret"))
	if err := s.PutToken(ctx, store.Token{ID: "t-1", Name: "ci", Hash: hex.EncodeToString(h[:]), Scope: "operator", Revoked: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := s.PutSecret(ctx, store.Secret{Name: fmt.Sprintf("bmc-%02d", i), KeyID: "k1", Sealed: []byte{byte(i), 1, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutTelemetry(ctx, []store.NodeTelemetry{{Machine: "m-x", State: []byte("st")}},
		[]store.PowerDay{{Machine: "m-x", Day: "2025-03-01", Buckets: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPowerSummaries(ctx, []store.PowerDay{{Machine: "m-x", Day: "2025-02-01", Buckets: []byte("sum")}}); err != nil {
		t.Fatal(err)
	}
}

// records is what a store holds, read through the contracts.
type records struct {
	Machines    []machine.Machine
	Revisions   map[string]uint64
	Inventories map[string][]store.Snapshot
	Events      map[string][]machine.Event
	ByMAC       map[string]string
	Leases      []store.Lease
	ByIP        map[string]string
	Jobs        []store.Job
	Tokens      []store.Token
	Secrets     []store.Secret
	Nodes       []store.NodeTelemetry
	Days, Sums  []store.PowerDay
}

func readAll(t *testing.T, s store.Store) records {
	t.Helper()
	ctx := context.Background()
	r := records{Revisions: map[string]uint64{}, Inventories: map[string][]store.Snapshot{}, Events: map[string][]machine.Event{},
		ByMAC: map[string]string{}, ByIP: map[string]string{}}
	r.Machines = must(s.ListMachines(ctx, store.MachineFilter{}))
	for _, m := range r.Machines {
		r.Revisions[m.ID] = must(s.MachineRevision(ctx, m.ID))
		r.Inventories[m.ID] = must(s.Inventories(ctx, m.ID))
		r.Events[m.ID] = must(s.Events(ctx, m.ID, 0, 0))
		for _, mac := range m.MACs {
			r.ByMAC[mac] = must(s.MachineByMAC(ctx, mac)).ID
		}
	}
	r.Leases = must(s.ListLeases(ctx))
	for _, l := range r.Leases {
		if got, err := s.LeaseByIP(ctx, l.IP); err == nil {
			r.ByIP[l.IP.String()] = got.MAC
		}
	}
	r.Jobs = must(s.ListJobs(ctx, ""))
	r.Tokens = must(s.ListTokens(ctx))
	r.Secrets = must(s.ListSecrets(ctx))
	r.Nodes = must(s.ListNodeTelemetry(ctx))
	r.Days = must(s.PowerDays(ctx, "m-x", ""))
	r.Sums = must(s.PowerSummaries(ctx, "m-x", ""))
	return r
}

// TestIntegrationBackupOpensAsBolt backs up an etcd store and opens the
// file with the bbolt backend (what `ingot admin restore` does): every
// record reads back the same through the contracts, revisions included,
// the file passes bbolt's consistency check, and the next revision and
// sequence numbers continue above the copied ones.
func TestIntegrationBackupOpensAsBolt(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	s := openPrefix(t, c.Client(t), "/backup/", store.Options{History: 3})
	populate(t, s)
	want := readAll(t, s)
	path := filepath.Join(t.TempDir(), "backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Backup(ctx, f)
	if err != nil || n == 0 {
		t.Fatalf("Backup = %d bytes, %v", n, err)
	}
	f.Close()
	// A write after the backup is not in it.
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: "gpu-00", Kind: "after"}); err != nil {
		t.Fatal(err)
	}
	if err := bolt.CheckFile(path); err != nil {
		t.Fatalf("bbolt check of the backup: %v", err)
	}
	b, err := bolt.Open(path, store.Options{History: 3})
	if err != nil {
		t.Fatalf("the bbolt backend opens the backup: %v", err)
	}
	defer b.Close()
	got := readAll(t, b)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("records of the backup opened by bbolt (-etcd +bolt):\n%s", diff)
	}
	// Sequence numbers and revisions continue.
	m := want.Machines[0]
	if ev, err := b.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "x"}); err != nil || ev.Seq != 5 {
		t.Errorf("next event on the restored copy = %d, %v; want 5", ev.Seq, err)
	}
	if seq, err := b.PutInventory(ctx, m.ID, machine.Inventory{}); err != nil || seq != 5 {
		t.Errorf("next snapshot on the restored copy = %d, %v; want 5", seq, err)
	}
	var top uint64
	for _, r := range want.Revisions {
		top = max(top, r)
	}
	for _, j := range want.Jobs {
		top = max(top, j.Revision)
	}
	if ch, err := b.ChangeMachine(ctx, m.ID, store.Change{Rev: want.Revisions[m.ID], Edit: store.Edit(func(*machine.Machine) error { return nil })}); err != nil || ch.Rev <= top {
		t.Errorf("ChangeMachine at the copied revision = %+v, %v; want a revision above %d", ch, err, top)
	}
	j := store.Job{Kind: "inspect"}
	if err := b.CreateJob(ctx, &j); err != nil || j.Revision <= top {
		t.Errorf("a new job's revision on the restored copy = %d, %v; want above %d", j.Revision, err, top)
	}
}

// TestIntegrationRestoreFromBolt restores a bbolt backup (what `ingot
// admin migrate` and `ingot admin restore --db etcd://` do) into an empty
// prefix: every record reads back the same through the contracts (but
// revisions, which are etcd's own here), sequence numbers continue, the
// prefix passes Check; a second restore into it is refused and writes
// nothing; a restore that died halfway (its marker left) keeps every
// instance from opening the prefix.
func TestIntegrationRestoreFromBolt(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	b, err := bolt.Open(filepath.Join(t.TempDir(), "ingot.db"), store.Options{History: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	populate(t, b)
	if err := b.SwapFence(ctx, "job/j-1", "", "ingot-a"); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, b)
	var backup bytes.Buffer
	if _, err := b.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	cfg, err := etcd.ParseURL(c.URL("restored"))
	if err != nil {
		t.Fatal(err)
	}
	if err := etcd.Restore(ctx, cfg, bytes.NewReader(backup.Bytes()), store.Options{}); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	s := openPrefix(t, c.Client(t), "/restored/", store.Options{History: 3})
	got := readAll(t, s)
	noRevs := cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmpopts.IgnoreFields(records{}, "Revisions"), cmpopts.IgnoreFields(store.Job{}, "Revision")}
	if diff := cmp.Diff(want, got, noRevs); diff != "" {
		t.Errorf("records restored into etcd (-bolt +etcd):\n%s", diff)
	}
	if v, err := s.Fence(ctx, "job/j-1"); v != "ingot-a" || err != nil {
		t.Errorf("fence after restore = %q, %v; want ingot-a", v, err)
	}
	m := want.Machines[0]
	if ev, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "x"}); err != nil || ev.Seq != 5 {
		t.Errorf("next event after restore = %d, %v; want 5", ev.Seq, err)
	}
	if err := etcd.Restore(ctx, cfg, bytes.NewReader(backup.Bytes()), store.Options{}); !errors.Is(err, store.ErrExists) {
		t.Errorf("a second restore into the prefix: %v; want ErrExists", err)
	}
	if ms, _ := s.ListMachines(ctx, store.MachineFilter{}); len(ms) != len(want.Machines) {
		t.Errorf("after the refused restore: %d machines; want %d", len(ms), len(want.Machines))
	}
	// A marker left by a restore that died keeps instances out.
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/half/meta/restoring", "dead"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.OpenClient(ctx, cli, "/half/", store.Options{}); !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "etcdctl del --prefix /half/") {
		t.Errorf("opening a prefix a restore holds: %v; want ErrLocked saying how to clear it", err)
	}
}
