package bolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/store"
)

func TestTelemetryRecords(t *testing.T) {
	ctx := context.Background()
	s, err := bolt.Open(filepath.Join(t.TempDir(), "ingot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	days := []store.PowerDay{{Machine: "m-1", Day: "2026-11-30", Buckets: []byte("a")}, {Machine: "m-1", Day: "2026-12-01", Buckets: []byte("b")},
		{Machine: "m-10", Day: "2026-12-01", Buckets: []byte("c")}}
	if err := s.PutTelemetry(ctx, []store.NodeTelemetry{{Machine: "m-1", State: []byte("{}")}, {Machine: "m-10", State: []byte("{}")}}, days); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTelemetry(ctx, nil, []store.PowerDay{{Machine: "m-1", Day: "bad"}}); err == nil {
		t.Error("a day that is not a date was stored")
	}
	ns, _ := s.ListNodeTelemetry(ctx)
	if len(ns) != 2 || ns[0].Machine != "m-1" {
		t.Fatalf("nodes: %+v", ns)
	}
	got, _ := s.PowerDays(ctx, "m-1", "2026-12-01")
	if len(got) != 1 || string(got[0].Buckets) != "b" {
		t.Errorf("m-1 from 12-01: %+v (m-10's days must not show)", got)
	}
	if n, err := s.DeletePowerDaysBefore(ctx, "2026-12-01"); n != 1 || err != nil {
		t.Errorf("DeletePowerDaysBefore: %d, %v", n, err)
	}
	sums := []store.PowerDay{{Machine: "m-1", Day: "2025-12-01", Buckets: []byte("old")}, {Machine: "m-1", Day: "2026-12-01", Buckets: []byte("s")},
		{Machine: "m-10", Day: "2026-12-01", Buckets: []byte("t")}}
	if err := s.PutPowerSummaries(ctx, sums); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPowerSummaries(ctx, []store.PowerDay{{Machine: "m/1", Day: "2026-12-01"}}); err == nil {
		t.Error("a summary of a machine ID with a slash was stored")
	}
	if got, _ := s.PowerSummaries(ctx, "m-1", ""); len(got) != 2 || string(got[1].Buckets) != "s" {
		t.Errorf("m-1's summaries: %+v", got)
	}
	if got, _ := s.PowerDays(ctx, "m-1", "2026-12-01"); len(got) != 1 || string(got[0].Buckets) != "b" {
		t.Errorf("m-1's days after summaries were put: %+v (kept apart)", got)
	}
	if n, err := s.DeletePowerSummariesBefore(ctx, "2025-12-02"); n != 1 || err != nil {
		t.Errorf("DeletePowerSummariesBefore: %d, %v", n, err)
	}
	if err := s.DeleteTelemetry(ctx, "m-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.PowerDays(ctx, "m-1", ""); len(got) != 0 {
		t.Errorf("m-1's days after DeleteTelemetry: %+v", got)
	}
	if got, _ := s.PowerDays(ctx, "m-10", ""); len(got) != 1 {
		t.Errorf("m-10's days: %+v", got)
	}
	if got, _ := s.PowerSummaries(ctx, "m-1", ""); len(got) != 0 {
		t.Errorf("m-1's summaries after DeleteTelemetry: %+v", got)
	}
	if got, _ := s.PowerSummaries(ctx, "m-10", ""); len(got) != 1 {
		t.Errorf("m-10's summaries: %+v", got)
	}
}
