//go:build ignore

// Command genv7 writes pkg/store/bolt/testdata/schema-v7/ingot.db with the
// store code of commit a5064ea (schema v7, the last before v8): one of every
// record, then a lease written to the lease log and the process ended
// without closing the store, as a crash leaves it (the lease only in
// ingot.db.lease-log.N). Run it in a checkout of a5064ea (git archive
// a5064ea | tar -x -C DIR; this file as DIR/cmd/genv7/main.go without its
// build line), then keep the file gzipped (bbolt grows a file by 16 MiB of
// zeros):
//
//	go run ./cmd/genv7 OUT_DIR && gzip -9 -n OUT_DIR/ingot.db
//
// TestMigrateFromV7 (schema_upgrade_test.go) reads what it wrote.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/ingot-dev/ingot/pkg/machine"
	"github.com/ingot-dev/ingot/pkg/store"
	"github.com/ingot-dev/ingot/pkg/store/bolt"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genv7:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	s, err := bolt.Open(filepath.Join(dir, "ingot.db"), store.Options{Now: now})
	if err != nil {
		return err
	}
	for i, name := range []string{"gpu-01", "gpu-02", "gpu-03"} {
		m := &machine.Machine{ID: fmt.Sprintf("m-00000000%02d", i+1), Name: name, MACs: []string{fmt.Sprintf("52:54:00:07:00:%02x", i+1)},
			Serial: fmt.Sprintf("SN-V7-%d", i+1), Recipe: "h100", State: machine.StateReady, Rack: "r7", Index: i + 1,
			BMC: machine.BMC{Endpoint: fmt.Sprintf("https://10.7.0.%d", i+1), CredentialRef: "secret:" + name + "-bmc"}}
		if err := s.CreateMachine(ctx, m, machine.Event{Kind: "enrolled", Actor: "operator:alice", Message: "enrolled " + name}); err != nil {
			return err
		}
		if _, err := s.AppendEvent(ctx, machine.Event{Machine: m.ID, Kind: "state", Actor: "engine", From: machine.StateEnrolled, To: machine.StateReady}); err != nil {
			return err
		}
		if _, err := s.PutInventory(ctx, m.ID, machine.Inventory{Source: "redfish", GPUs: []machine.GPU{{Vendor: "NVIDIA", Model: "H100"}}}); err != nil {
			return err
		}
		if err := s.PutSecret(ctx, store.Secret{Name: name + "-bmc", KeyID: "k-v7", Sealed: []byte("sealed-" + name)}); err != nil {
			return err
		}
		if err := s.PutLease(ctx, store.Lease{MAC: m.MACs[0], IP: netip.AddrFrom4([4]byte{10, 7, 1, byte(i + 1)}), MachineID: m.ID,
			State: "bound", Expires: clock.Add(time.Hour)}); err != nil {
			return err
		}
	}
	spec, _ := json.Marshal(map[string]string{"recipe": "h100"})
	for i, st := range []store.JobState{store.JobSucceeded, store.JobRunning} {
		j := &store.Job{ID: fmt.Sprintf("j-v7-%d", i+1), Kind: "reimage", Machines: []string{"m-0000000001"}, State: st, Step: "boot", Spec: spec}
		if err := s.CreateJob(ctx, j); err != nil {
			return err
		}
	}
	toks := []store.Token{
		{ID: "t-operator", Name: "alice", Hash: fmt.Sprintf("%064x", 1), Scope: "operator", Created: clock},
		{ID: "mb-boot", Name: "boot m-0000000001", Hash: fmt.Sprintf("%064x", 2), Scope: "machine:m-0000000001", JobID: "j-v7-2", Kind: "boot", Address: "10.7.1.1", Created: clock},
	}
	for _, t := range toks {
		if err := s.PutToken(ctx, t); err != nil {
			return err
		}
	}
	if err := s.PutTelemetry(ctx, []store.NodeTelemetry{{Machine: "m-0000000001", State: []byte(`{"up":true}`)}},
		[]store.PowerDay{{Machine: "m-0000000001", Day: "2026-11-30", Buckets: []byte("buckets")}}); err != nil {
		return err
	}
	if err := s.SwapFence(ctx, "job/j-v7-2", "", "instance-a"); err != nil {
		return err
	}
	if err := s.Close(); err != nil { // applies the lease log
		return err
	}
	if s, err = bolt.Open(filepath.Join(dir, "ingot.db"), store.Options{Now: now}); err != nil {
		return err
	}
	// A lease written to the log and never applied: the process ends here,
	// without Close, as a crash would end it.
	if err := s.PutLease(ctx, store.Lease{MAC: "52:54:00:07:00:99", IP: netip.MustParseAddr("10.7.1.99"), State: "bound", Expires: clock.Add(time.Hour)}); err != nil {
		return err
	}
	os.Exit(0)
	return nil
}
