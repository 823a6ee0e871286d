package vbmc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// check rejects fault settings that cannot mean anything.
func (f Faults) check() error {
	for name, p := range map[string]float64{"Error503": f.Error503, "DropConn": f.DropConn} {
		if p < 0 || p > 1 {
			return fmt.Errorf("fault %s = %v: expected a probability between 0 and 1", name, p)
		}
	}
	if f.MaxInFlight < 0 {
		return fmt.Errorf("fault MaxInFlight = %d: expected 0 (no limit) or more", f.MaxInFlight)
	}
	if f.Latency < 0 {
		return fmt.Errorf("fault Latency = %v: expected a duration >= 0", f.Latency)
	}
	for _, h := range f.Hang {
		if !strings.HasPrefix(h, "/") {
			return fmt.Errorf("fault Hang path %q: expected a path starting with / (e.g. /redfish/v1/Systems)", h)
		}
	}
	return nil
}

// faulter injects Faults into requests; its randomness is seeded so a test
// sees the same sequence of faults for the same sequence of requests.
type faulter struct {
	f   Faults
	mu  sync.Mutex
	rng *rand.Rand
}

func newFaulter(f Faults, seed int64) *faulter {
	return &faulter{f: f, rng: rand.New(rand.NewPCG(uint64(seed), 0x1f07))}
}

// roll draws the drop and 503 dice for one request (both always drawn, so
// the sequence does not depend on which faults are enabled).
func (f *faulter) roll() (drop, unavailable bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, u := f.rng.Float64(), f.rng.Float64()
	return d < f.f.DropConn, u < f.f.Error503
}

// apply injects the faults into one request, in order latency, hang, drop,
// 503. It returns "" when the request should be served normally, else what
// it did.
func (f *faulter) apply(ctx context.Context, w http.ResponseWriter, r *http.Request) string {
	if f.f.Latency > 0 {
		t := time.NewTimer(f.f.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "client gone during latency"
		}
	}
	p := cleanPath(r.URL.Path)
	for _, h := range f.f.Hang {
		if p == cleanPath(h) || strings.HasPrefix(p, strings.TrimSuffix(h, "/")+"/") {
			<-ctx.Done()
			return "hang"
		}
	}
	if f.f.DropConn == 0 && f.f.Error503 == 0 {
		return ""
	}
	drop, unavailable := f.roll()
	switch {
	case drop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			// HTTP/2 cannot hand over its connection: abort the stream.
			panic(http.ErrAbortHandler)
		}
		conn.Close()
		return "drop"
	case unavailable:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, msgUnavailable())
		return "503"
	}
	return ""
}
