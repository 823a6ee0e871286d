package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The service polls machines with a BMC, judges them against their
// recipe's alert limits, records each transition as an event and delivers
// it to a webhook and an Alertmanager, and exports readings and alerts.
func TestServiceAlertsDeliveredAndExported(t *testing.T) {
	clk := &clock{t: t0}
	inlet := 25.0
	var mu sync.Mutex
	var events []string
	hooks := make(chan map[string]any, 10)
	am := make(chan []map[string]any, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		json.NewDecoder(r.Body).Decode(&v)
		hooks <- v
	}))
	defer hook.Close()
	amSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v2/alerts" {
			http.NotFound(w, r)
			return
		}
		var v []map[string]any
		json.NewDecoder(r.Body).Decode(&v)
		am <- v
	}))
	defer amSrv.Close()
	ms := []machine.Machine{
		{ID: "m-1", Name: "gpu-01", Recipe: "h100", Rack: "r12", State: machine.StateReady, BMC: machine.BMC{Endpoint: "https://10.0.0.5"}},
		{ID: "m-2", Name: "no-bmc", State: machine.StateReady},
	}
	svc, err := New(Config{
		Machines: func(context.Context) ([]machine.Machine, error) { return ms, nil },
		Read: func(_ context.Context, m *machine.Machine) Sample {
			mu.Lock()
			defer mu.Unlock()
			return Sample{Up: true, PowerOn: true, Watts: 5200, InletC: inlet, GPUMaxC: 61, MemCorrectable: 3, MemUncorrectable: 0,
				PSUInputWatts: 5400, PSUOutputWatts: 5200}
		},
		Recipes: func(string) (*recipe.Recipe, error) {
			return &recipe.Recipe{Name: "h100", Alerts: recipe.Alerts{InletCelsiusMax: 30, For: recipe.Duration(2 * time.Minute)}}, nil
		},
		Event: func(_ context.Context, id, msg string) {
			mu.Lock()
			events = append(events, id+": "+msg)
			mu.Unlock()
		},
		Notify: []Notifier{Webhook{URL: hook.URL}, Alertmanager{URL: amSrv.URL}},
		Now:    clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	poll := func(c float64) {
		mu.Lock()
		inlet = c
		mu.Unlock()
		if err := svc.PollAll(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}
	for _, c := range []float64{25, 33, 33, 33, 33} {
		poll(c)
	}
	if a := svc.Alerts(); len(a) != 1 || a[0].State != Firing || a[0].Name != "gpu-01" || a[0].Rack != "r12" || !strings.Contains(a[0].Threshold, "30") {
		t.Fatalf("alerts: %+v", a)
	}
	h := <-hooks
	if h["status"] != "firing" || !strings.Contains(h["message"].(string), "inlet-temperature") {
		t.Errorf("webhook: %v", h)
	}
	got := <-am
	labels := got[0]["labels"].(map[string]any)
	if labels["alertname"] != "inlet-temperature" || labels["machine"] != "gpu-01" || labels["rack"] != "r12" || got[0]["endsAt"] != nil {
		t.Errorf("alertmanager: %v", got)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.Collector())
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n < 8 {
		t.Errorf("metrics: %d series, %v", n, err)
	}
	out, _ := reg.Gather()
	var names []string
	for _, mf := range out {
		names = append(names, mf.GetName())
	}
	for _, want := range []string{MetricUp, MetricWatts, MetricTemperature, MetricPSUWatts, MetricAlerts} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("metrics lack %s: %v", want, names)
		}
	}

	for _, c := range []float64{25, 25, 25, 25} {
		poll(c)
	}
	if a := svc.Alerts(); len(a) != 0 {
		t.Errorf("after the excursion: %+v", a)
	}
	if h := <-hooks; h["status"] != "resolved" {
		t.Errorf("webhook resolve: %v", h)
	}
	if got := <-am; got[0]["endsAt"] == nil {
		t.Errorf("alertmanager resolve without endsAt: %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || !strings.Contains(events[0], "FIRING") || !strings.Contains(events[1], "resolved") {
		t.Errorf("events: %q", events)
	}
	if bs := svc.Aggregates().Window("m-1", t0, t0.Add(time.Hour)); len(bs) != 2 || bs[0].MeanWatts() != 5200 {
		t.Errorf("buckets: %+v", bs)
	}
}
