//go:build integration

package storm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ingot-dev/ingot/pkg/initramfs"
	"github.com/ingot-dev/ingot/pkg/lab"
	"github.com/ingot-dev/ingot/pkg/netns"
	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
	"github.com/ingot-dev/ingot/pkg/storm"
)

// stormEnv is what every storm needs: the ingot binary, the agent's real
// kernel and initramfs, and the sums of every file a machine fetches.
type stormEnv struct {
	root, bin      string
	kernel, initrd string
	files          storm.Files
}

// firstStages are the iPXE binaries ingot and the peers serve by TFTP
// (Debian's ipxe package).
var firstStages = []string{"undionly.kpxe", "snponly.efi"}

func newStormEnv(t testing.TB) *stormEnv {
	t.Helper()
	netnstest.Need(t)
	e := &stormEnv{root: repoRoot(t)}
	e.bin = binary(t, e.root, "INGOT_BIN", "ingot")
	agent := binary(t, e.root, "INGOT_AGENT_BIN", "ingot-agent")
	// The agent's kernel and initramfs as `make lab` builds them, from the
	// same cache (built once per machine, then reused).
	out, err := lab.AgentBoot(context.Background(), initramfs.CacheDir(os.Getenv), "", agent)
	if err != nil {
		t.Fatalf("building the agent's kernel and initramfs as the lab does: %v", err)
	}
	e.kernel, e.initrd = out.Vmlinuz, out.Initrd
	e.files = storm.Files{FirstStage: map[string]storm.Sum{}}
	for _, f := range firstStages {
		e.files.FirstStage[f] = sum(t, filepath.Join("/usr/lib/ipxe", f))
	}
	e.files.Kernel, e.files.Initrd = sum(t, e.kernel), sum(t, e.initrd)
	return e
}

// net makes a server and a client namespace joined by a veth pair,
// removed when the test ends.
func (e *stormEnv) net(t testing.TB) (srv, cli *netns.NS) {
	t.Helper()
	srv, cli = netnstest.New(t, "storm-s"), netnstest.New(t, "storm-c")
	if err := storm.Link(context.Background(), srv, cli); err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

func sum(t testing.TB, path string) storm.Sum {
	t.Helper()
	s, err := storm.SumFile(path)
	if err != nil {
		t.Fatalf("%v (the ipxe package ships the first stages; 'make deps')", err)
	}
	return s
}

// startIngot starts `ingot serve` in the server namespace, stopped (and
// its log shown, on failure) when the test ends.
func (e *stormEnv) startIngot(t testing.TB, ctx context.Context, srv *netns.NS) *storm.Ingot {
	t.Helper()
	g, err := storm.StartIngot(ctx, storm.IngotConfig{NS: srv, Bin: e.bin, Dir: t.TempDir(), Kernel: e.kernel, Initrd: e.initrd,
		Mockup: filepath.Join(e.root, "testdata", "redfish-mockups", "dmtf-public-rackmount1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Errorf("stopping ingot serve: %v", err)
		}
		if t.Failed() {
			t.Logf("vbmc.log (tail):\n%s", g.Tail("vbmc", 1500))
		}
	})
	return g
}

// repoRoot is the module root (testdata/).
func repoRoot(t testing.TB) string {
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// binary is $env (make test-integration sets INGOT_BIN), else name beside
// it, else cmd/name built into the test's folder.
func binary(t testing.TB, root, env, name string) string {
	t.Helper()
	if b := os.Getenv(env); b != "" {
		return b
	}
	if b := os.Getenv("INGOT_BIN"); b != "" {
		if p := filepath.Join(filepath.Dir(b), name); fileExists(p) {
			return p
		}
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
