//go:build integration

package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/etcd/etcdtest"
)

// The secrets and telemetry contracts past etcd's 128-operation limit
// (storetest.Run checks their rules on a few records).

func TestIntegrationSecrets(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	s := openPrefix(t, c.Client(t), "/secrets/", store.Options{Now: func() time.Time { return now }})
	const n = 500 // one BMC password a machine: more than etcd's 128 operations
	for i := range n {
		sec := store.Secret{Name: fmt.Sprintf("bmc-%03d", i), KeyID: "k1", Sealed: bytes.Repeat([]byte{byte(i)}, 80)}
		if err := s.PutSecret(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	if err := s.PutSecret(ctx, store.Secret{Name: "bmc-007", KeyID: "k1", Sealed: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSecret(ctx, "bmc-007")
	if err != nil || string(got.Sealed) != "again" || !got.Created.Equal(now.Add(-time.Hour)) || !got.Updated.Equal(now) {
		t.Errorf("replaced secret = %+v, %v; want the new value, Created kept, Updated from the clock", got, err)
	}
	list, err := s.ListSecrets(ctx)
	if err != nil || len(list) != n || list[0].Name != "bmc-000" || list[n-1].Name != fmt.Sprintf("bmc-%03d", n-1) {
		t.Fatalf("ListSecrets: %d secrets, %v; want %d sorted by name", len(list), err, n)
	}
	// Key rotation: every secret re-sealed in one write.
	for i := range list {
		list[i].KeyID, list[i].Sealed = "k2", []byte("resealed-"+list[i].Name)
	}
	stale := append([]store.Secret(nil), list...)
	now = now.Add(time.Hour)
	if err := s.ReplaceSecrets(ctx, list); err != nil {
		t.Fatalf("ReplaceSecrets of %d: %v", n, err)
	}
	after, _ := s.ListSecrets(ctx)
	for _, sec := range after {
		if sec.KeyID != "k2" || string(sec.Sealed) != "resealed-"+sec.Name || !sec.Updated.Equal(now) {
			t.Fatalf("after ReplaceSecrets: %+v", sec)
		}
	}
	// A rotation that read before another write: refused, nothing written.
	stale[3].Sealed = []byte("late")
	err = s.ReplaceSecrets(ctx, stale)
	if !errors.Is(err, store.ErrStale) || strings.Contains(err.Error(), "resealed-") {
		t.Errorf("stale ReplaceSecrets: %v; want ErrStale without sealed bytes", err)
	}
	if sec, _ := s.GetSecret(ctx, stale[3].Name); sec == nil || string(sec.Sealed) == "late" {
		t.Errorf("a refused ReplaceSecrets wrote %+v", sec)
	}
	if err := s.DeleteSecret(ctx, "bmc-007"); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"GetSecret after delete":   second(s.GetSecret(ctx, "bmc-007")),
		"DeleteSecret again":       s.DeleteSecret(ctx, "bmc-007"),
		"ReplaceSecrets of a gone": s.ReplaceSecrets(ctx, []store.Secret{{Name: "nope", KeyID: "k", Sealed: []byte("x")}}),
	} {
		want := store.ErrNotFound
		if strings.HasPrefix(what, "Replace") {
			want = store.ErrStale
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v; want %v", what, err, want)
		}
	}
	if err := s.PutSecret(ctx, store.Secret{Name: "x"}); err == nil {
		t.Error("a secret without a key ID or value was stored")
	}
}

func second[T any](_ T, err error) error { return err }

func TestIntegrationTelemetry(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	s := openPrefix(t, c.Client(t), "/telemetry/", store.Options{})
	// A flush for 500 machines: a state and two days of 5-minute buckets
	// each, some 5 MiB: more than one etcd request carries.
	var nodes []store.NodeTelemetry
	var days []store.PowerDay
	for i := range 500 {
		id := fmt.Sprintf("m-%04d", i)
		nodes = append(nodes, store.NodeTelemetry{Machine: id, State: bytes.Repeat([]byte("s"), 1500)})
		for _, d := range []string{"2025-02-28", "2025-03-01"} {
			days = append(days, store.PowerDay{Machine: id, Day: d, Buckets: bytes.Repeat([]byte(d[9:]), 4600)})
		}
	}
	if err := s.PutTelemetry(ctx, nodes, days); err != nil {
		t.Fatalf("PutTelemetry of 500 machines: %v", err)
	}
	got, err := s.ListNodeTelemetry(ctx)
	if err != nil || len(got) != 500 || got[0].Machine != "m-0000" || len(got[499].State) != 1500 {
		t.Fatalf("ListNodeTelemetry: %d, %v; want 500 sorted by machine", len(got), err)
	}
	pd, err := s.PowerDays(ctx, "m-0042", "2025-03-01")
	if err != nil || len(pd) != 1 || pd[0].Day != "2025-03-01" || !bytes.Equal(pd[0].Buckets, days[85].Buckets) {
		t.Errorf("PowerDays(m-0042, from 2025-03-01) = %+v, %v", pd, err)
	}
	if pd, _ := s.PowerDays(ctx, "m-0042", ""); len(pd) != 2 || pd[0].Day != "2025-02-28" {
		t.Errorf("PowerDays(m-0042) = %d days; want 2, oldest first", len(pd))
	}
	// An invalid record anywhere in a batch writes nothing.
	bad := []store.PowerDay{{Machine: "m-new", Day: "2025-03-02", Buckets: []byte("x")}, {Machine: "m/x", Day: "2025-03-02"}}
	if err := s.PutTelemetry(ctx, []store.NodeTelemetry{{Machine: "m-new", State: []byte("x")}}, bad); err == nil {
		t.Error("PutTelemetry with a machine ID holding / succeeded")
	}
	if pd, _ := s.PowerDays(ctx, "m-new", ""); len(pd) != 0 {
		t.Errorf("a refused batch wrote %v", pd)
	}
	if err := s.PutPowerSummaries(ctx, []store.PowerDay{{Machine: "m-0001", Day: "2024-01-01", Buckets: []byte("old")},
		{Machine: "m-0001", Day: "2025-01-01", Buckets: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeletePowerSummariesBefore(ctx, "2025-01-01"); err != nil || n != 1 {
		t.Errorf("DeletePowerSummariesBefore = %d, %v; want 1", n, err)
	}
	if n, err := s.DeletePowerDaysBefore(ctx, "2025-03-01"); err != nil || n != 500 {
		t.Errorf("DeletePowerDaysBefore = %d, %v; want 500 (more than one transaction)", n, err)
	}
	if err := s.DeleteTelemetry(ctx, "m-0001"); err != nil {
		t.Fatal(err)
	}
	sums, _ := s.PowerSummaries(ctx, "m-0001", "")
	left, _ := s.PowerDays(ctx, "m-0001", "")
	if all, _ := s.ListNodeTelemetry(ctx); len(all) != 499 || len(sums) != 0 || len(left) != 0 {
		t.Errorf("after DeleteTelemetry: %d machines, %d summaries, %d days of m-0001", len(all), len(sums), len(left))
	}
}

// An inventory too big for one etcd request is refused with the limit
// named, and nothing is written.
func TestIntegrationInventoryOverRequestLimit(t *testing.T) {
	c := etcdtest.Single(t)
	ctx := context.Background()
	s := openPrefix(t, c.Client(t), "/big/", store.Options{})
	m := machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(ctx, &m); err != nil {
		t.Fatal(err)
	}
	inv := machine.Inventory{Source: "agent", DIMMs: make([]machine.DIMM, 40000)}
	for i := range inv.DIMMs {
		inv.DIMMs[i].Slot = strings.Repeat("x", 40)
	}
	_, err := s.PutInventory(ctx, m.ID, inv)
	if err == nil || !strings.Contains(err.Error(), "etcd's limits") || !strings.Contains(err.Error(), m.ID) {
		t.Errorf("PutInventory of a huge inventory: %v; want the limit and the machine named", err)
	}
	if snaps, err := s.Inventories(ctx, m.ID); err != nil || len(snaps) != 0 {
		t.Errorf("after the refused write: %d snapshots, %v; want none", len(snaps), err)
	}
	if diff := cmp.Diff(uint64(1), must(s.PutInventory(ctx, m.ID, machine.Inventory{Source: "agent"}))); diff != "" {
		t.Errorf("the next snapshot's seq (-want +got):\n%s", diff)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
