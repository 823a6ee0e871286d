//go:build integration

package burnin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/api"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The burn-in tools Debian has, run for real: stress-ng loads the CPUs and
// memory, fio reads a file with direct I/O. Their real output goes through
// the same parsers and thresholds as on a GPU node.
func TestIntegrationRealBurnInTools(t *testing.T) {
	netnstest.NeedPrograms(t, "stress-ng", "fio")
	// fio --direct=1 needs a filesystem with O_DIRECT: the repository's, not tmpfs.
	dir, err := os.MkdirTemp(".", "fio-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(data, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	q := func(s string) recipe.Quantity {
		v, err := recipe.ParseQuantity(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	plan := Plan{BurnIn: recipe.BurnIn{Duration: recipe.Duration(3 * time.Second)}, DataDisks: []string{data},
		Checks: []recipe.Check{{Name: "stress-ng"}, {Name: "fio", Min: q("1MB/s")}, {Name: "dcgm-diag", Optional: true}}}
	r := Runner{StressMem: "32M", Logf: t.Logf}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := r.Run(ctx, plan)
	if len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
	stress, fio, dcgm := res[0], res[1], res[2]
	if !stress.OK || !strings.Contains(stress.Detail, "bogo ops/s") {
		t.Errorf("stress-ng: %+v", stress)
	}
	if !fio.OK || fio.Value < 1e6 {
		t.Errorf("fio: %+v, want at least 1MB/s read", fio)
	}
	if !dcgm.Skipped || dcgm.Detail != "dcgmi: not found in the installed system" {
		t.Errorf("dcgm-diag on a machine without DCGM: %+v", dcgm)
	}
	// A threshold the disk cannot reach fails with the measured number.
	plan.Checks = []recipe.Check{{Name: "fio", Min: q("1PB/s")}}
	if res := r.Run(ctx, plan); res[0].OK || !strings.Contains(res[0].Detail, "want at least 1PB/s") {
		t.Errorf("fio at 1PB/s: %+v", res[0])
	}
}

// Two nodes' iperf3 burn-in for real, on loopback: a pairer standing in for
// ingot's makes the first runner listen and the second connect to it.
func TestIntegrationRealIperf3Pair(t *testing.T) {
	netnstest.NeedPrograms(t, "iperf3")
	floor, err := recipe.ParseQuantity("100Mbps")
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{BurnIn: recipe.BurnIn{Duration: recipe.Duration(2 * time.Second)}, Checks: []recipe.Check{{Name: "iperf3", Min: floor}}}
	var mu sync.Mutex
	first := ""
	pair := func(node string) Pairer {
		return func(context.Context, string, string) (api.Peer, error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case first == "":
				first = node
				return api.Peer{Role: "wait"}, nil
			case first == node:
				return api.Peer{Role: "server", Address: "127.0.0.1"}, nil
			}
			return api.Peer{Role: "client", Address: "127.0.0.1"}, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results := make([]api.CheckResult, 2)
	var wg sync.WaitGroup
	for i, node := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := Runner{Pair: pair(node), PairEvery: 200 * time.Millisecond, Logf: t.Logf}
			results[i] = r.Run(ctx, plan)[0]
		}()
		time.Sleep(300 * time.Millisecond) // a asks first and listens
	}
	wg.Wait()
	for i, res := range results {
		if !res.OK || res.Value < 1e8 {
			t.Errorf("node %d: %+v, want at least 100Mbps measured", i, res)
		}
	}
	if !strings.Contains(results[0].Detail, "as server") || !strings.Contains(results[1].Detail, "as client") {
		t.Errorf("roles: %q / %q", results[0].Detail, results[1].Detail)
	}
}
