//go:build integration

package backends_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/backends"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// populate fills a store as a site's install: 20 machines with events,
// inventories past the history limit, leases (one moved, one expired and
// given way), jobs in every state, operator and machine tokens, sealed
// secrets, telemetry states, power days and summaries, and a fence.
func populate(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	for i := range 20 {
		m := machine.Machine{Name: fmt.Sprintf("gpu-%03d", i), MACs: []string{fmt.Sprintf("52:54:00:01:00:%02x", i)}, Rack: fmt.Sprintf("r%d", i%4),
			Serial: fmt.Sprintf("SN%04d", i), BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.1.0.%d", i), CredentialRef: fmt.Sprintf("secret:bmc-%03d", i)}}
		must(t, s.CreateMachine(ctx, &m, machine.Event{Kind: "enrolled", Actor: "test"}))
		for j := range 3 + i%3 {
			_, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "state", Message: fmt.Sprint(j)})
			must(t, err)
		}
		for j := range 23 { // past the default history of 20: trimmed
			_, err := s.PutInventory(ctx, m.ID, machine.Inventory{Source: "agent", DIMMs: make([]machine.DIMM, j%4)})
			must(t, err)
		}
		ip := netip.AddrFrom4([4]byte{10, 1, 1, byte(10 + i)})
		must(t, s.PutLease(ctx, store.Lease{MAC: m.MACs[0], IP: ip, State: store.LeaseBound, MachineID: m.ID, Expires: now.Add(time.Hour)}))
		must(t, s.PutSecret(ctx, store.Secret{Name: fmt.Sprintf("bmc-%03d", i), KeyID: "k1", Sealed: []byte{byte(i), 7, 7}}))
		st, _ := json.Marshal(map[string]int{"watts": 700 + i})
		must(t, s.PutTelemetry(ctx, []store.NodeTelemetry{{Machine: m.ID, State: st}},
			[]store.PowerDay{{Machine: m.ID, Day: "2026-11-30", Buckets: []byte{1, 2, byte(i)}}, {Machine: m.ID, Day: "2026-12-01", Buckets: []byte{3, byte(i)}}}))
		must(t, s.PutPowerSummaries(ctx, []store.PowerDay{{Machine: m.ID, Day: "2026-11-29", Buckets: []byte{9, byte(i)}}}))
		if i%2 == 0 {
			_, err := s.ChangeMachine(ctx, m.ID, store.Change{Edit: func(m *machine.Machine) ([]machine.Event, error) {
				m.State = machine.StateReady
				return []machine.Event{{Kind: "state", Message: "ready"}}, nil
			}})
			must(t, err)
		}
	}
	// A lease moved, and an expired one given way to another MAC.
	must(t, s.PutLease(ctx, store.Lease{MAC: "52:54:00:01:00:01", IP: netip.MustParseAddr("10.1.2.1"), State: store.LeaseBound, Expires: now.Add(time.Hour)}))
	must(t, s.PutLease(ctx, store.Lease{MAC: "52:54:00:09:09:09", IP: netip.MustParseAddr("10.1.3.1"), State: store.LeaseBound, Expires: now.Add(-time.Hour)}))
	must(t, s.PutLease(ctx, store.Lease{MAC: "52:54:00:09:09:0a", IP: netip.MustParseAddr("10.1.3.1"), State: store.LeaseBound, Expires: now.Add(time.Hour)}))
	for i, state := range []store.JobState{store.JobPending, store.JobRunning, store.JobSucceeded, store.JobFailed, store.JobCancelled} {
		j := store.Job{Kind: "reimage", State: state, Step: "boot", Machines: []string{fmt.Sprintf("gpu-%03d", i)}, Spec: json.RawMessage(`{"image":"x"}`)}
		must(t, s.CreateJob(ctx, &j))
		if state == store.JobRunning {
			must(t, s.SwapFence(ctx, "job/"+j.ID, "", "ingot-a/1"))
			h := sha256.Sum256([]byte("agent-" + j.ID))
			must(t, s.PutToken(ctx, store.Token{ID: "t-agent", Name: "agent", Hash: hex.EncodeToString(h[:]), Scope: "machine:m-x", JobID: j.ID, Kind: "agent"}))
		}
	}
	h := sha256.Sum256([]byte("operator"))
	must(t, s.PutToken(ctx, store.Token{ID: "t-op", Name: "ci", Hash: hex.EncodeToString(h[:]), Scope: "operator"}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// view is what a store answers through the contracts, for comparing two.
type view struct {
	Machines    []machine.Machine
	Events      map[string][]machine.Event
	Inventories map[string][]store.Snapshot
	Leases      []store.Lease
	ByIP        map[string]string
	Jobs        []store.Job
	Running     []store.Job
	Tokens      []store.Token
	AgentTokens []store.Token
	Secrets     []store.Secret
	Nodes       []store.NodeTelemetry
	Days, Sums  []store.PowerDay
	Fence       string
}

func read(t *testing.T, s store.Store) view {
	t.Helper()
	ctx := context.Background()
	v := view{Events: map[string][]machine.Event{}, Inventories: map[string][]store.Snapshot{}, ByIP: map[string]string{}}
	var err error
	v.Machines, err = s.ListMachines(ctx, store.MachineFilter{})
	must(t, err)
	for _, m := range v.Machines {
		v.Events[m.Name], err = s.Events(ctx, m.ID, 0, 0)
		must(t, err)
		v.Inventories[m.Name], err = s.Inventories(ctx, m.ID)
		must(t, err)
		d, err := s.PowerDays(ctx, m.ID, "")
		must(t, err)
		v.Days = append(v.Days, d...)
		sm, err := s.PowerSummaries(ctx, m.ID, "")
		must(t, err)
		v.Sums = append(v.Sums, sm...)
	}
	v.Leases, err = s.ListLeases(ctx)
	must(t, err)
	for _, l := range v.Leases {
		if got, err := s.LeaseByIP(ctx, l.IP); err == nil {
			v.ByIP[l.IP.String()] = got.MAC
		}
	}
	v.Jobs, err = s.ListJobs(ctx, "")
	must(t, err)
	v.Running, err = s.ListJobs(ctx, store.JobRunning)
	must(t, err)
	v.Tokens, err = s.ListTokens(ctx)
	must(t, err)
	v.AgentTokens, err = s.FindTokens(ctx, store.TokenFilter{Scope: "machine:m-x"})
	must(t, err)
	v.Secrets, err = s.ListSecrets(ctx)
	must(t, err)
	v.Nodes, err = s.ListNodeTelemetry(ctx)
	must(t, err)
	v.Fence, err = s.Fence(ctx, "job/"+v.Running[0].ID)
	must(t, err)
	return v
}

// TestIntegrationMigrateBoltToEtcd migrates a populated bbolt install into
// an etcd prefix (one member: the conformance suite covers three): Migrate's own check compares every
// record of the two portable backups, and every read through the
// contracts answers the same on both (revisions aside: each backend's
// own). A second run does nothing; a migration into a prefix that holds
// other records is refused and writes nothing.
func TestIntegrationMigrateBoltToEtcd(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	from := "bolt://" + filepath.Join(t.TempDir(), "ingot.db")
	src, err := backends.Open(ctx, from, store.Options{})
	must(t, err)
	populate(t, src)
	want := read(t, src)
	must(t, src.Close())
	to := c.URL("site-a")
	start := time.Now()
	m, err := backends.Migrate(ctx, from, to, store.Options{})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Logf("migrated %d records in %s: %v", m.Total(), time.Since(start).Round(time.Millisecond), m.Records)
	if m.Done || m.Records["machine"] != 20 || m.Records["event"] < 100 || m.Records["inventory"] != 400 {
		t.Errorf("Migration = %+v; want 20 machines, their events and 20 inventories each, written", m)
	}
	dst, err := backends.Open(ctx, to, store.Options{})
	must(t, err)
	got := read(t, dst)
	if err := dst.Check(ctx); err != nil {
		t.Errorf("Check of the migrated prefix: %v", err)
	}
	must(t, dst.Close())
	opts := cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmpopts.IgnoreFields(store.Job{}, "Revision")}
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("read through the contracts (-bolt +etcd):\n%s", d)
	}
	again, err := backends.Migrate(ctx, from, to, store.Options{})
	if err != nil || !again.Done {
		t.Errorf("a second Migrate = %+v, %v; want Done, nothing written", again, err)
	}
	// A target holding anything else is refused.
	other := c.URL("site-b")
	o, err := backends.Open(ctx, other, store.Options{})
	must(t, err)
	must(t, o.CreateMachine(ctx, &machine.Machine{Name: "someone-else"}))
	must(t, o.Close())
	if _, err := backends.Migrate(ctx, from, other, store.Options{}); err == nil || !strings.Contains(err.Error(), "nothing was written") {
		t.Errorf("Migrate into a prefix holding another machine: %v; want a refusal", err)
	}
	o, err = backends.Open(ctx, other, store.Options{})
	must(t, err)
	defer o.Close()
	if ms, _ := o.ListMachines(ctx, store.MachineFilter{}); len(ms) != 1 {
		t.Errorf("the refused target holds %d machines; want its 1", len(ms))
	}
}
