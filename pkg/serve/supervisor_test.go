package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fake is a Service whose n-th Run (from 1) does what act says; runs
// counts the calls and returned the calls that have returned.
type fake struct {
	name           string
	act            func(ctx context.Context, n int) error
	runs, returned atomic.Int32
}

func (f *fake) Name() string { return f.name }

func (f *fake) Run(ctx context.Context) error {
	defer f.returned.Add(1)
	return f.act(ctx, int(f.runs.Add(1)))
}

// failing fails its first fails runs with err (nil: returns nil early),
// then serves until ctx ends, closing serving once.
func failing(name string, fails int, err error, serving chan<- struct{}) *fake {
	var once sync.Once
	return &fake{name: name, act: func(ctx context.Context, n int) error {
		if n <= fails {
			return err
		}
		if serving != nil {
			once.Do(func() { close(serving) })
		}
		<-ctx.Done()
		return nil
	}}
}

// lockedBuf is a log sink safe for the supervisor's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// recClock is the wall clock with a record of every wait asked of it.
type recClock struct {
	mu     sync.Mutex
	waits  []time.Duration
	now    func() time.Time
	actual func(time.Duration) time.Duration
}

func (c *recClock) Now() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *recClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return time.After(d)
}

func (c *recClock) Waits() []time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.waits }

// logLine is how the text handler writes msg followed by attrs.
func logLine(msg, attrs string) string { return fmt.Sprintf("msg=%q %s", msg, attrs) }

// firstN is ds[:n], or all of ds when shorter.
func firstN(ds []time.Duration, n int) []time.Duration { return ds[:min(n, len(ds))] }

// testSupervisor has fast backoff and drain and logs into log.
func testSupervisor(log *lockedBuf, svcs ...Service) Supervisor {
	return Supervisor{
		Services: svcs, Logger: slog.New(slog.NewTextHandler(log, nil)),
		Backoff: Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}, MaxFailures: 5, Window: time.Hour,
		DrainTimeout: 100 * time.Millisecond,
	}
}

// start runs s in the background; the channel gets Run's result.
func start(ctx context.Context, s Supervisor) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return done
}

// wait is what done delivers within 5s.
func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the supervisor did not return within 5s")
		return nil
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen within 5s", what)
	}
}

// TestSupervisorRestarts: a service that stops while serving, with an
// error or with nil, is logged and started again after a growing backoff,
// and shutdown afterwards is clean.
func TestSupervisorRestarts(t *testing.T) {
	tests := map[string]struct {
		err     error
		fails   int
		wantErr string // in each restart's log line
	}{
		"error":     {err: errors.New("socket gone"), fails: 3, wantErr: `err="socket gone"`},
		"nil early": {err: nil, fails: 2, wantErr: "err=\"stopped while serving"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var log lockedBuf
			serving := make(chan struct{})
			svc := failing("worker", tc.fails, tc.err, serving)
			clock := &recClock{}
			sup := testSupervisor(&log, svc)
			sup.Clock = clock
			ctx, cancel := context.WithCancel(context.Background())
			done := start(ctx, sup)
			waitClosed(t, serving, "serving after restarts")
			cancel()
			if err := wait(t, done); err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
			if got, want := int(svc.runs.Load()), tc.fails+1; got != want {
				t.Errorf("Run called %d times, want %d", got, want)
			}
			wantWaits := []time.Duration{1, 2, 4, 4}[:tc.fails]
			for i := range wantWaits {
				wantWaits[i] *= time.Millisecond
			}
			if diff := cmp.Diff(wantWaits, firstN(clock.Waits(), tc.fails)); diff != "" {
				t.Errorf("backoff waits (-want +got):\n%s", diff)
			}
			restarts := strings.Count(log.String(), logLine("service stopped; restarting it", "service=worker "+tc.wantErr))
			if restarts != tc.fails {
				t.Errorf("%d restart log lines with service=worker %s, want %d; log:\n%s", restarts, tc.wantErr, tc.fails, log.String())
			}
		})
	}
}

// TestSupervisorStops: a critical service that stops, or a restartable one
// that stops more than MaxFailures times, stops the supervisor with a
// *StoppedError naming it, and the other services are shut down.
func TestSupervisorStops(t *testing.T) {
	tests := map[string]struct {
		svc       *fake
		critical  bool
		wantRuns  int
		wantStops int
		wantMsg   []string
		wantIs    error
	}{
		"critical error": {
			svc: failing("http", 1, errors.New("accept: too many open files"), nil), critical: true, wantRuns: 1, wantStops: 1,
			wantMsg: []string{"service http", "critical", "accept: too many open files"},
		},
		"critical nil early": {
			svc: failing("dhcp", 1, nil, nil), critical: true, wantRuns: 1, wantStops: 1,
			wantMsg: []string{"service dhcp", "critical"}, wantIs: ErrStopped,
		},
		"past the limit": {
			svc: &fake{name: "engine", act: func(_ context.Context, n int) error { return fmt.Errorf("attempt %d", n) }},
			// MaxFailures 5: the 6th stop within the window is one too many.
			wantRuns: 6, wantStops: 6,
			wantMsg: []string{"service engine", "6 times", "attempt 6"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var log lockedBuf
			bystander := failing("bystander", 0, nil, nil)
			var svc Service = tc.svc
			if tc.critical {
				svc = Critical(svc)
			}
			err := wait(t, start(context.Background(), testSupervisor(&log, bystander, svc)))
			var se *StoppedError
			if !errors.As(err, &se) {
				t.Fatalf("Run = %v, want a *StoppedError", err)
			}
			if se.Service != tc.svc.name || se.Critical != tc.critical || se.Failures != tc.wantStops {
				t.Errorf("StoppedError = %+v, want service %s critical %v failures %d", se, tc.svc.name, tc.critical, tc.wantStops)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v is not %v", err, tc.wantIs)
			}
			if got := int(tc.svc.runs.Load()); got != tc.wantRuns {
				t.Errorf("Run called %d times, want %d", got, tc.wantRuns)
			}
			if bystander.returned.Load() != 1 {
				t.Errorf("the bystander's Run has not returned: not drained")
			}
			if !strings.Contains(log.String(), logLine("service stopped; stopping ingot", "service="+tc.svc.name)) {
				t.Errorf("no log line stopping ingot for service=%s:\n%s", tc.svc.name, log.String())
			}
		})
	}
}

// TestSupervisorWindowForgetsOldStops: stops further apart than Window do
// not add up to MaxFailures, so a service that fails rarely keeps being
// restarted (and its backoff starts over).
func TestSupervisorWindowForgetsOldStops(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	clock := &recClock{now: func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Hour); return now }}
	serving := make(chan struct{})
	svc := failing("poller", 4, errors.New("bmc timeout"), serving)
	var log lockedBuf
	sup := testSupervisor(&log, svc)
	sup.Clock, sup.MaxFailures, sup.Window = clock, 1, time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	done := start(ctx, sup)
	waitClosed(t, serving, "serving after four stops an hour apart")
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("Run = %v, want nil: no two stops were within the window", err)
	}
	if diff := cmp.Diff([]time.Duration{1, 1, 1, 1}, scale(firstN(clock.Waits(), 4), time.Millisecond)); diff != "" {
		t.Errorf("backoff waits in ms (-want +got):\n%s", diff)
	}
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

// TestSupervisorDrain: shutdown cancels every Run and waits for each to
// return; one that ignores ctx is logged and named in the error once
// DrainTimeout has passed, and a failed shutdown is reported.
func TestSupervisorDrain(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	tests := map[string]struct {
		extra   Service
		wantErr []string // empty: nil
		wantLog string
	}{
		"clean": {},
		"ignores ctx": {
			extra:   ServiceFunc("stuck", func(context.Context) error { <-release; return nil }),
			wantErr: []string{"stuck", "did not stop within 100ms"},
			wantLog: logLine("service did not stop within the drain timeout; leaving it behind", "service=stuck"),
		},
		"failed shutdown": {
			extra:   ServiceFunc("flush", func(ctx context.Context) error { <-ctx.Done(); return errors.New("flushing: disk full") }),
			wantErr: []string{"flush: shutting down: flushing: disk full"},
			wantLog: logLine("service failed to shut down cleanly", "service=flush"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var log lockedBuf
			a, b := failing("a", 0, nil, nil), failing("b", 0, nil, nil)
			svcs := []Service{a, Critical(b)}
			if tc.extra != nil {
				svcs = append(svcs, tc.extra)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := start(ctx, testSupervisor(&log, svcs...))
			time.Sleep(10 * time.Millisecond)
			began := time.Now()
			cancel()
			err := wait(t, done)
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("shutdown took %s, want about the 100ms drain timeout at most", took)
			}
			checkErr(t, err, tc.wantErr)
			if a.returned.Load() != 1 || b.returned.Load() != 1 {
				t.Errorf("returned: a %d, b %d; want every Run returned", a.returned.Load(), b.returned.Load())
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("log lacks %q:\n%s", tc.wantLog, log.String())
			}
		})
	}
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("Run = nil, want an error saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestSupervisorCancelsLeftovers: the ctx of a Run that returned is
// cancelled, so what it left running stops before the restart.
func TestSupervisorCancelsLeftovers(t *testing.T) {
	leftover := make(chan struct{})
	serving := make(chan struct{})
	svc := &fake{name: "engine", act: func(ctx context.Context, n int) error {
		if n == 1 {
			go func() { <-ctx.Done(); close(leftover) }()
			return errors.New("store unavailable")
		}
		close(serving)
		<-ctx.Done()
		return nil
	}}
	var log lockedBuf
	ctx, cancel := context.WithCancel(context.Background())
	done := start(ctx, testSupervisor(&log, svc))
	waitClosed(t, leftover, "the first Run's ctx being cancelled")
	waitClosed(t, serving, "the restart")
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestSupervisorNames: names key the logs, so an empty or repeated one is
// refused before anything starts.
func TestSupervisorNames(t *testing.T) {
	for name, svcs := range map[string][]Service{
		"empty":    {failing("", 0, nil, nil)},
		"repeated": {failing("dhcp", 0, nil, nil), failing("dhcp", 0, nil, nil)},
	} {
		t.Run(name, func(t *testing.T) {
			var log lockedBuf
			err := wait(t, start(context.Background(), testSupervisor(&log, svcs...)))
			if err == nil || !strings.Contains(err.Error(), "empty or used twice") {
				t.Fatalf("Run = %v, want a refusal of the names", err)
			}
			if f := svcs[0].(*fake); f.runs.Load() != 0 {
				t.Errorf("a service ran although the names were refused")
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Minute}
	got := []time.Duration{}
	for n := 1; n <= 9; n++ {
		got = append(got, b.Delay(n)/time.Second)
	}
	if diff := cmp.Diff([]time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}, got); diff != "" {
		t.Errorf("delays in s (-want +got):\n%s", diff)
	}
}

func TestRecentStops(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(mins ...int) []time.Time {
		var ts []time.Time
		for _, m := range mins {
			ts = append(ts, t0.Add(time.Duration(m)*time.Minute))
		}
		return ts
	}
	tests := map[string]struct{ stops, want []time.Time }{
		"none":         {nil, nil},
		"all recent":   {at(5, 8, 9), at(5, 8, 9)},
		"old dropped":  {at(0, 2, 9), at(2, 9)},
		"edge dropped": {at(1), nil},
	}
	for name, tc := range tests {
		got := recentStops(tc.stops, t0.Add(10*time.Minute), 9*time.Minute)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmp.Comparer(time.Time.Equal)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
