package vbmc

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// With a fixed seed the 503 rate is close to the probability and the
// sequence repeats exactly.
func TestFault503(t *testing.T) {
	const n = 400
	seq := func() []int {
		_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Faults.Error503 = 0.3; cfg.Seed = 7 })
		var out []int
		for range n {
			r := c.do(http.MethodGet, "/redfish/v1/Systems", nil)
			if r.status == 503 {
				if r.header.Get("Retry-After") == "" {
					t.Fatal("503 without Retry-After")
				}
				if !slices.Equal(errorMessageIDs(r.body), []string{"Base.1.0.ServiceTemporarilyUnavailable"}) {
					t.Fatalf("503 body: %s", r.raw)
				}
			} else if r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			out = append(out, r.status)
		}
		return out
	}
	a, b := seq(), seq()
	if !slices.Equal(a, b) {
		t.Error("same seed, different fault sequence")
	}
	fails := 0
	for _, s := range a {
		if s == 503 {
			fails++
		}
	}
	if rate := float64(fails) / n; rate < 0.22 || rate > 0.38 {
		t.Errorf("503 rate %.2f over %d requests, want about 0.30", rate, n)
	}
}

func TestFaultLatency(t *testing.T) {
	_, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) { cfg.Faults.Latency = 150 * time.Millisecond })
	t0 := time.Now()
	c.get("/redfish/v1")
	if d := time.Since(t0); d < 150*time.Millisecond {
		t.Errorf("answered in %v, want >= 150ms", d)
	}
}

// A hung path never answers; the handler returns when the client gives up.
// Other paths still answer.
func TestFaultHang(t *testing.T) {
	b, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Faults.Hang = []string{"/redfish/v1/Systems"} })
	c.get("/redfish/v1/Chassis")
	for _, p := range []string{"/redfish/v1/Systems", "/redfish/v1/Systems/437XR1238R2/Bios"} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+p, nil)
		req.SetBasicAuth(testUser, testPass)
		t0 := time.Now()
		_, err := c.hc.Do(req)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GET %s: err %v, want the client's deadline", p, err)
		}
		if d := time.Since(t0); d < 200*time.Millisecond {
			t.Errorf("GET %s returned after %v", p, d)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.inFlight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d hung handlers still running after the clients gave up", b.inFlight.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFaultDrop(t *testing.T) {
	_, c := start(t, "dmtf-public-tower", func(cfg *Config) { cfg.Faults.DropConn = 1 })
	req, _ := http.NewRequest(http.MethodGet, c.base+"/redfish/v1", nil)
	resp, err := c.hc.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a dropped connection", resp.StatusCode)
	}
}

func TestFaultsCheck(t *testing.T) {
	root := filepath.Join(mockupDir(t), "dmtf-public-tower")
	for name, f := range map[string]Faults{
		"503 > 1":       {Error503: 1.5},
		"drop < 0":      {DropConn: -0.1},
		"latency < 0":   {Latency: -time.Second},
		"relative hang": {Hang: []string{"redfish/v1"}},
	} {
		if _, err := New(Config{Root: root, Faults: f}); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// A mockup folder without redfish/v1/index.json is refused with a message
// naming the expected layout.
func TestNewBadRoot(t *testing.T) {
	_, err := New(Config{Root: t.TempDir()})
	if err == nil {
		t.Fatal("New accepted an empty folder")
	}
}

// Beyond MaxInFlight requests at once the BMC answers 503 (busy); Stats
// records the most requests a client had in flight.
func TestFaultMaxInFlight(t *testing.T) {
	b, c := start(t, "dmtf-public-rackmount1", func(cfg *Config) {
		cfg.Faults.Latency = 300 * time.Millisecond
		cfg.Faults.MaxInFlight = 2
	})
	codes := make(chan int, 4)
	for range 4 {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, c.base+"/redfish/v1", nil)
			resp, err := c.hc.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	for range 4 {
		got[<-codes]++
	}
	if got[200] != 2 || got[503] != 2 {
		t.Errorf("statuses %v, want two 200 and two 503", got)
	}
	// The refused ones leave at once, so not all four need overlap.
	if m := b.Stats().MaxInFlight; m < 3 {
		t.Errorf("Stats().MaxInFlight = %d, want >= 3", m)
	}
}
