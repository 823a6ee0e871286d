package telemetry

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

// A day's summary by hand: 20 five-minute spans at 500 W and 80 at 1000 W
// (one sample each): mean 900, median 1000, p95 1000, max 1000; a span at
// 2000 W makes the max and, past 5 % of the spans, the p95.
func TestSummarizeByHand(t *testing.T) {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	a := NewAggregator()
	at := func(i int) time.Time { return day.Add(time.Duration(i) * BucketSize) }
	for i := range 100 {
		w := 1000.0
		if i < 20 {
			w = 500
		}
		a.Add(Sample{Machine: "m", Time: at(i), Up: true, Watts: w, InletC: 24, GPUMaxC: 70})
	}
	a.Add(Sample{Machine: "m", Time: at(150), Up: true, Watts: 2000, InletC: 31, GPUMaxC: 83})
	a.Add(Sample{Machine: "m", Time: day.Add(24*time.Hour + time.Minute), Up: true, Watts: 10}) // the next day, not over yet
	got := a.summarize(day.Add(24*time.Hour + 10*time.Minute))
	if len(got["m"]) != 1 {
		t.Fatalf("summaries: %+v, want the one finished day", got)
	}
	s := got["m"][0]
	wantMean := (20*500.0 + 80*1000 + 2000) / 101
	if s.Buckets() != 101 || math.Abs(s.MeanWatts()-wantMean) > 0.01 || s.MedianWatts() != 1000 || s.P95Watts() != 1000 ||
		s.MaxWatts() != 2000 || s.MaxInletC() != 31 || s.MaxGPUC() != 83 || !s.Day().Equal(day) {
		t.Errorf("summary %+v; want 101 spans, mean %.2f, median 1000, p95 1000, max 2000 W, inlet 31, GPU 83", s, wantMean)
	}
	if again := a.summarize(day.Add(25 * time.Hour)); len(again) != 0 {
		t.Errorf("a day summarized twice: %+v", again)
	}
	// A year and half a day later the summary is gone; the next day is summarized and kept.
	a.summarize(day.Add(SummaryRetention + 12*time.Hour))
	if ss := a.Summaries("m", day.Add(-time.Hour), day.Add(400*24*time.Hour)); len(ss) != 1 || ss[0].Day().Equal(day) {
		t.Errorf("summaries after a year: %+v, want only the next day's", ss)
	}
	out, err := decodeSummary(encodeSummary(s))
	if err != nil || out != s {
		t.Errorf("round trip: %+v, %v", out, err)
	}
	if _, err := decodeSummary(make([]byte, summaryBytes-1)); err == nil {
		t.Error("a damaged summary decoded")
	}
}

// Thirty days at a steady 800 W on a 4-GPU machine, polled every 5 minutes
// with an injected clock: the 5-minute days older than 7 are dropped from
// the store, the daily summaries stay, survive a restart, and a 30-day
// report reads them: 19.2 kWh a day, 0.2/kWh x PUE 1.5 / 4 GPUs = 0.06 an
// hour per GPU.
func TestMonthReportFromSummaries(t *testing.T) {
	st := storetest.OpenWith(t, store.Options{Timeout: time.Second})
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	clk := &clock{t: start}
	ms := []machine.Machine{{ID: "m-1", Name: "gpu-01", Recipe: "h", State: machine.StateReady, BMC: machine.BMC{Endpoint: "x"}}}
	rc := &recipe.Recipe{Name: "h", Hardware: recipe.Hardware{GPUs: []recipe.GPUSpec{{Count: 4}}}}
	mk := func() *Service {
		s, err := New(Config{Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
			Read: func(context.Context, *machine.Machine) Sample {
				return Sample{Up: true, PowerOn: true, Watts: 800, InletC: 22, MemCorrectable: -1, MemUncorrectable: -1}
			},
			Recipes: func(string) (*recipe.Recipe, error) { return rc, nil },
			Store:   st, Now: clk.Now, Interval: BucketSize})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	s1 := mk()
	for clk.Now().Before(start.Add(30 * 24 * time.Hour)) {
		if err := s1.PollAll(ctx); err != nil {
			t.Fatal(err)
		}
		if clk.Now().Minute() == 0 && clk.Now().Hour() == 0 {
			if err := s1.flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(BucketSize)
	}
	if err := s1.flush(ctx); err != nil {
		t.Fatal(err)
	}
	days, _ := st.PowerDays(ctx, "m-1", "")
	sums, _ := st.PowerSummaries(ctx, "m-1", "")
	if len(days) > 8 || len(sums) != 30 {
		t.Fatalf("stored %d power days (want at most 8) and %d summaries (want 30)", len(days), len(sums))
	}
	s2 := mk()
	if err := s2.load(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := s2.Report(ctx, 30*24*time.Hour, "", 0.2, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Nodes) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	n := rep.Nodes[0]
	if n.Buckets != 30*288 || n.MedianW != 800 || n.P95W != 800 || math.Abs(n.KWhPerDay-19.2) > 1e-9 || math.Abs(n.CostPerGPUHour-0.06) > 1e-9 {
		t.Errorf("30-day node line: %+v; want %d spans, 800 W, 19.2 kWh a day, 0.06 per GPU-hour", n, 30*288)
	}
	if _, err := s2.Report(ctx, 400*24*time.Hour, "", 0, 0); err == nil {
		t.Error("a report over more than a year was made")
	}
}
