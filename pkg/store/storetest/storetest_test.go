package storetest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/storetest"
)

func TestOpenGivesAWorkingStore(t *testing.T) {
	s := storetest.Open(t)
	m := &machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if loc := s.Location(); !strings.Contains(loc, os.TempDir()) {
		t.Errorf("store at %s, want it under the temporary directory", loc)
	}
}

func TestFailAll(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("disk on fire")
	var s store.Store = storetest.FailAll(boom)
	if err := s.CreateMachine(ctx, &machine.Machine{Name: "x"}); !errors.Is(err, boom) {
		t.Errorf("CreateMachine: %v", err)
	}
	if _, err := s.MachineByMAC(ctx, "52:54:00:00:00:01"); !errors.Is(err, boom) {
		t.Errorf("MachineByMAC: %v", err)
	}
	if err := s.PutLease(ctx, store.Lease{}); !errors.Is(err, boom) {
		t.Errorf("PutLease: %v", err)
	}
	if _, err := storetest.FailAll(nil).GetJob(ctx, "j"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("FailAll(nil): %v, want ErrClosed", err)
	}
}

func TestFailEveryNthWrite(t *testing.T) {
	ctx := context.Background()
	s := storetest.FailEveryNthWrite(storetest.Open(t), 2, storetest.ErrInjected)
	m := &machine.Machine{Name: "gpu-01"}
	if err := s.CreateMachine(ctx, m); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if _, err := s.GetMachine(ctx, "gpu-01"); err != nil {
		t.Fatalf("a read between writes: %v", err)
	}
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "x"}); !errors.Is(err, storetest.ErrInjected) {
		t.Errorf("second write: %v; want the injected failure", err)
	}
	if _, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "x"}); err != nil {
		t.Errorf("third write: %v", err)
	}
}
