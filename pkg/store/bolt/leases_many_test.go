package bolt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/store"
)

// PutLeases stores a round in one transaction; a conflicting lease fails
// alone, an invalid one fails alone, the rest are stored.
func TestPutLeases(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := openTest(t, store.Options{Now: func() time.Time { return now }})
	bound := func(mac, ip string) store.Lease {
		return store.Lease{MAC: mac, IP: mustAddr(ip), State: "bound", Expires: now.Add(time.Hour)}
	}
	if err := s.PutLease(ctx, bound("52:54:00:00:00:01", "10.0.0.10")); err != nil {
		t.Fatal(err)
	}
	errs := s.PutLeases(ctx, []store.Lease{
		bound("52:54:00:00:00:02", "10.0.0.11"),
		bound("52:54:00:00:00:03", "10.0.0.10"), // taken by :01
		{MAC: "not-a-mac", IP: mustAddr("10.0.0.12")},
		bound("52:54:00:00:00:04", "10.0.0.13"),
	})
	if errs[0] != nil || !errors.Is(errs[1], store.ErrConflict) || errs[2] == nil || errs[3] != nil {
		t.Fatalf("PutLeases errors = %v; want nil, ErrConflict, invalid MAC, nil", errs)
	}
	ls, err := s.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 {
		t.Errorf("stored %d leases, want 3: %+v", len(ls), ls)
	}
	if l, err := s.LeaseByIP(ctx, mustAddr("10.0.0.13")); err != nil || l.MAC != "52:54:00:00:00:04" {
		t.Errorf("LeaseByIP(10.0.0.13) = %+v, %v", l, err)
	}
}
