package serve

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// TestRunSupervisesDepsServices: the caller's services (the engine in
// cmd/ingot) run under Run's supervisor: started once the sockets are
// bound, restarted when they stop, drained on shutdown, and a critical one
// that stops ends Run with an error naming it.
func TestRunSupervisesDepsServices(t *testing.T) {
	tests := map[string]struct {
		fails    int
		critical bool
		wantRuns int
	}{
		"runs and drains": {fails: 0, wantRuns: 1},
		"restarted":       {fails: 2, wantRuns: 3},
		"critical stops":  {fails: 1, critical: true, wantRuns: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, d := httpOnly(t)
			serving := make(chan struct{})
			svc := failing("engine", tc.fails, errors.New("listing running jobs: store busy"), serving)
			d.Services = []Service{svc}
			if tc.critical {
				d.Services = []Service{Critical(svc)}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Serve(ctx, cfg, d) }()
			if tc.critical {
				checkStoppedBy(t, wait(t, done), "engine")
			} else {
				waitClosed(t, serving, "the engine serving")
				cancel()
				if err := wait(t, done); err != nil {
					t.Fatalf("Run after cancel: %v", err)
				}
			}
			if got := int(svc.runs.Load()); got != tc.wantRuns || svc.returned.Load() != svc.runs.Load() {
				t.Errorf("engine ran %d times (%d returned), want %d, all returned", got, svc.returned.Load(), tc.wantRuns)
			}
		})
	}
}

// checkStoppedBy fails unless err is a *StoppedError for service and every
// other service drained.
func checkStoppedBy(t *testing.T, err error, service string) {
	t.Helper()
	var se *StoppedError
	if !errors.As(err, &se) || se.Service != service {
		t.Fatalf("Run = %v, want a *StoppedError for %s", err, service)
	}
	if strings.Contains(err.Error(), "did not stop") {
		t.Errorf("Run = %v: the boot services did not drain", err)
	}
}

// TestRunBindErrorBeforeServing: a socket that cannot be bound fails Run
// before any service starts or Ready is called.
func TestRunBindErrorBeforeServing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg, d := httpOnly(t)
	cfg.HTTPAddr = taken.Addr().String()
	svc := failing("engine", 0, nil, nil)
	d.Services = []Service{svc}
	d.Ready = func(Addrs) { t.Error("Ready called although the HTTP socket was taken") }
	err = Serve(context.Background(), cfg, d)
	if err == nil || !strings.Contains(err.Error(), "http: listening on "+cfg.HTTPAddr) {
		t.Fatalf("Run = %v, want the HTTP bind error", err)
	}
	if svc.runs.Load() != 0 {
		t.Errorf("the engine ran %d times before the sockets were bound", svc.runs.Load())
	}
}
