package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/store/bolt"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "ingot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := bolt.Open(filepath.Join(dir, "ingot.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	m := &machine.Machine{Name: "gpu-01", MACs: []string{"52-54-00-12-34-56"}, Recipe: "lab-qemu"}
	if err := s.CreateMachine(ctx, m); err != nil {
		log.Fatal(err)
	}
	got, err := s.MachineByMAC(ctx, "52:54:00:12:34:56")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Name, got.MACs[0], got.State, got.ID == m.ID)
	// Output: gpu-01 52:54:00:12:34:56 enrolled true
}

// A read-modify-write that must not overwrite a change made between the
// read and the write: read the record and its revision together, decide,
// and write only if the revision still holds; on ErrStale, read again.
// The change and the event that tells of it are one write.
func ExampleStore_ChangeMachine() {
	dir, err := os.MkdirTemp("", "ingot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := store.NewRegistry("bolt", bolt.Backend()).Open(ctx, "bolt://"+filepath.Join(dir, "ingot.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateMachine(ctx, &machine.Machine{Name: "gpu-01"}); err != nil {
		log.Fatal(err)
	}

	m, rev, err := s.GetMachineRev(ctx, "gpu-01")
	if err != nil {
		log.Fatal(err)
	}
	// Meanwhile someone else writes the machine.
	if _, err := s.ChangeMachine(ctx, "gpu-01", store.Change{Edit: store.Edit(func(m *machine.Machine) error { m.Rack = "r7"; return nil })}); err != nil {
		log.Fatal(err)
	}
	setRecipe := func(m *machine.Machine) ([]machine.Event, error) {
		m.Recipe = "h100"
		return []machine.Event{{Kind: "recipe", Actor: "example", Message: "recipe (none) -> h100"}}, nil
	}
	_, err = s.ChangeMachine(ctx, m.ID, store.Change{Rev: rev, Edit: setRecipe})
	fmt.Println("stale:", errors.Is(err, store.ErrStale))

	_, rev, _ = s.GetMachineRev(ctx, m.ID) // read again, decide again
	c, err := s.ChangeMachine(ctx, m.ID, store.Change{Rev: rev, Edit: setRecipe})
	fmt.Println(c.Machine.Rack, c.Machine.Recipe, c.Events[0].Seq, c.Events[0].Message, err)
	// Output:
	// stale: true
	// r7 h100 1 recipe (none) -> h100 <nil>
}
