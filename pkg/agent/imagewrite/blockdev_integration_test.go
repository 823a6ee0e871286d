//go:build integration

package imagewrite

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// TestIntegrationLoopDevice writes an image onto a real block device (a loop
// device over a file filled with garbage): BLKGETSIZE64, BLKZEROOUT for the
// zero runs (so the garbage under them must come back as zeros), O_DIRECT
// and BLKFLSBUF.
func TestIntegrationLoopDevice(t *testing.T) {
	netnstest.NeedRoot(t, "a loop device")
	backing := filepath.Join(t.TempDir(), "backing.img")
	junk := bytes.Repeat([]byte{0xa5}, 96<<20)
	if err := os.WriteFile(backing, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", backing).CombinedOutput()
	if err != nil {
		netnstest.Missing(t, "no loop device here: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	defer exec.Command("losetup", "-d", dev).Run()

	raw := testImage(t, 32<<20)
	zst := compress(t, raw)
	srv := newImageServer(t, zst, len(zst)/2, false)
	tgt, err := OpenTarget(dev, "/sys")
	if err != nil {
		t.Fatal(err)
	}
	if !tgt.Block || tgt.Size != 96<<20 {
		t.Fatalf("target %+v: want a 96 MiB block device", tgt)
	}
	t.Logf("zero mode %s, O_DIRECT %v", tgt.Zero, tgt.Direct)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Write(ctx, tgt, Options{URL: srv.URL + "/img", SHA256: sum(zst), Format: "raw.zst", RetryBackoff: time.Millisecond})
	tgt.Close()
	if err != nil {
		t.Fatal(err)
	}
	if tgt.Zero == ZeroOut && res.ZeroBytes == 0 {
		t.Errorf("BLKZEROOUT mode but no zero runs handled")
	}
	exec.Command("losetup", "-d", dev).Run()
	got, err := os.ReadFile(backing)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(raw)], raw) {
		t.Fatalf("the device does not hold the image (zero runs left as garbage?)")
	}
	if !bytes.Equal(got[len(raw):], junk[len(raw):]) {
		t.Errorf("bytes past the image were changed")
	}
}
