package telemetry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// recorder is a Notifier that keeps what it was sent.
type recorder struct {
	mu  sync.Mutex
	got []Transition
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Notify(_ context.Context, t Transition) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, t)
	return nil
}

func (r *recorder) wait(t *testing.T, n int) []Transition {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		got := append([]Transition(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
	}
	t.Fatalf("the notifier got fewer than %d transitions", n)
	return nil
}

// TestServiceAlert: a service alert (the etcd quota) is listed with the
// machines' alerts without a machine, is delivered when it fires and when
// it clears (once each, however often it is set), and is remembered as
// cleared.
func TestServiceAlert(t *testing.T) {
	rec := &recorder{}
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	s, err := New(Config{Machines: func(context.Context) ([]machine.Machine, error) { return nil, nil },
		Read: func(context.Context, *machine.Machine) Sample { return Sample{} }, Notify: []Notifier{rec}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a := Alert{Rule: "etcd-quota", Name: "etcd store", Severity: "critical", Summary: "etcd database 1700 MiB of its 2048 MiB quota"}
	fired := now
	s.SetServiceAlert(t.Context(), a, true)
	now = now.Add(time.Minute)
	s.SetServiceAlert(t.Context(), a, true) // already firing: nothing new
	b := a
	b.Summary = "etcd database 1800 MiB of its 2048 MiB quota"
	s.SetServiceAlert(t.Context(), b, true) // still firing: it says the new summary, nobody is told again
	got := s.Alerts()
	if len(got) != 1 || got[0].Rule != "etcd-quota" || got[0].State != Firing || got[0].Machine != "" || !got[0].FiredAt.Equal(fired) {
		t.Fatalf("Alerts() = %+v, want the firing etcd-quota alert without a machine, fired at %s", got, fired)
	}
	if got[0].Summary != b.Summary {
		t.Errorf("the firing alert says %q, want its latest summary %q", got[0].Summary, b.Summary)
	}
	if trs := rec.wait(t, 1); !trs[0].Fired || trs[0].Alert.Name != "etcd store" {
		t.Errorf("delivered %+v, want the alert fired", trs[0])
	}
	now = now.Add(time.Hour)
	s.SetServiceAlert(t.Context(), a, false)
	s.SetServiceAlert(t.Context(), a, false)
	if got := s.Alerts(); len(got) != 0 {
		t.Errorf("Alerts() after clearing = %+v, want none", got)
	}
	trs := rec.wait(t, 2)
	if len(trs) != 2 || trs[1].Fired {
		t.Errorf("delivered %+v, want fired then cleared, once each", trs)
	}
	if c := s.RecentlyCleared(); len(c) != 1 || c[0].Rule != "etcd-quota" || !c[0].ClearedAt.Equal(now) {
		t.Errorf("RecentlyCleared() = %+v, want the etcd-quota alert cleared at %s", c, now)
	}
}
