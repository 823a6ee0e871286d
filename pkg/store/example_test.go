package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "ingot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(filepath.Join(dir, "ingot.db"), store.Options{})
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
