//go:build integration

package burnin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/recipe"
)

// The burn-in tools Debian has, run for real: stress-ng loads the CPUs and
// memory, fio reads a file with direct I/O. Their real output goes through
// the same parsers and thresholds as on a GPU node.
func TestIntegrationRealBurnInTools(t *testing.T) {
	for _, bin := range []string{"stress-ng", "fio"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (make deps)", bin)
		}
	}
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
	if !dcgm.Skipped || dcgm.Detail != "dcgmi not found in the installed system" {
		t.Errorf("dcgm-diag on a machine without DCGM: %+v", dcgm)
	}
	// A threshold the disk cannot reach fails with the measured number.
	plan.Checks = []recipe.Check{{Name: "fio", Min: q("1PB/s")}}
	if res := r.Run(ctx, plan); res[0].OK || !strings.Contains(res[0].Detail, "want at least 1PB/s") {
		t.Errorf("fio at 1PB/s: %+v", res[0])
	}
}
