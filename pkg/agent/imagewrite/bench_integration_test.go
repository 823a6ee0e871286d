//go:build integration

package imagewrite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/ingot-dev/ingot/pkg/netns/netnstest"
)

// benchImage writes a 1 GiB disk-like raw image: 40% zero runs, 35%
// text-like blocks with scattered changes, 15% low-entropy bytes, 10%
// random, in 1 MiB blocks, so zstd -3 compresses it well but not trivially.
func benchImage(b *testing.B, path string, size int) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(7, 9))
	text := make([]byte, 64<<10)
	for i := 0; i < len(text); {
		i += copy(text[i:], "Nov 29 12:00:01 node systemd[1]: Started session-1234.scope - Session of user root.\n")
	}
	blk := make([]byte, 1<<20)
	for off := 0; off < size; off += len(blk) {
		clear(blk)
		switch r := rng.IntN(100); {
		case r < 40: // zeros
		case r < 75:
			for i := 0; i < len(blk); i += len(text) {
				copy(blk[i:], text)
			}
			for i := 0; i < len(blk); i += 48 + rng.IntN(32) {
				blk[i] = byte(rng.Uint32())
			}
		case r < 90:
			for i := 0; i+8 <= len(blk); i += 8 {
				x := rng.Uint64() & 0x0f0f0f0f0f0f0f0f
				for k := 0; k < 8; k++ {
					blk[i+k] = byte(x >> (8 * k))
				}
			}
		default:
			for i := 0; i+8 <= len(blk); i += 8 {
				x := rng.Uint64()
				for k := 0; k < 8; k++ {
					blk[i+k] = byte(x >> (8 * k))
				}
			}
		}
		if _, err := f.Write(blk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkImageWrite compares the agent's write (HTTP -> zstd -> sha256 ->
// file, fsync) with `curl -s URL | zstd -d | dd of=FILE bs=4M conv=fsync`
// on the same 1 GiB image (zstd -3) from the same loopback HTTP server
// (net/http FileServer), in three interleaved rounds; the fastest of each
// side counts. Also reports the CPU-time ratio, steadier on a busy machine.
// Reports agent/curl-zstd-dd = curl pipeline time / agent time (goal >= 1.2),
// and the same with the suffix -multiframe for the image cut into 32 MiB
// frames (both sides read that same file).
func BenchmarkImageWrite(b *testing.B) {
	netnstest.NeedPrograms(b, "curl", "zstd", "dd", "sh")
	dir := b.TempDir()
	raw := filepath.Join(dir, "img.raw")
	const size = 1 << 30
	benchImage(b, raw, size)
	if out, err := exec.Command("zstd", "-3", "-T0", "-q", "-f", raw, "-o", raw+".zst").CombinedOutput(); err != nil {
		b.Fatalf("zstd: %v: %s", err, out)
	}
	// The same image in independent 32 MiB frames that declare their size
	// (what ingot's image builder can emit; any zstd tool reads it): the
	// agent decodes those on all cores.
	multiFrameFile(b, raw, raw+".mzst", 32<<20)
	os.Remove(raw)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir))}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String() + "/"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, v := range []struct{ file, metric string }{{"img.raw.zst", ""}, {"img.raw.mzst", "-multiframe"}} {
			compareWrite(b, base+v.file, filepath.Join(dir, v.file), filepath.Join(dir, "out.img"), size, v.metric)
		}
	}
}

// compareWrite runs the agent's write and the curl pipeline on one file in
// three interleaved rounds (the fastest of each side counts: this machine is
// shared, so the slower runs measure the neighbours) and reports the ratios.
func compareWrite(b *testing.B, url, file, out string, size int64, metric string) {
	zf, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	zsize, _ := io.Copy(h, zf)
	zf.Close()
	sum := hex.EncodeToString(h.Sum(nil))
	var direct bool
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// agent returns wall time and CPU time (this process: the write plus the
	// in-process HTTP server's share, which the pipeline side does not pay).
	agent := func() (time.Duration, time.Duration) {
		os.Remove(out)
		c0, start := cpu(), time.Now()
		t, err := OpenTarget(out, "")
		if err != nil {
			b.Fatal(err)
		}
		direct = t.Direct
		res, err := Write(context.Background(), t, Options{URL: url, SHA256: sum, Format: "raw.zst", Size: zsize})
		t.Close()
		if err != nil || res.Written != size {
			b.Fatalf("agent write: %v (%+v)", err, res)
		}
		return time.Since(start), cpu() - c0
	}
	// pipeline returns wall time and the CPU time of sh and its children.
	pipeline := func() (time.Duration, time.Duration) {
		os.Remove(out)
		start := time.Now()
		cmd := exec.Command("sh", "-c", `curl -sSf "$1" | zstd -d -q | dd of="$2" bs=4M conv=fsync status=none`, "sh", url, out)
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("curl | zstd -d | dd: %v: %s", err, o)
		}
		d := time.Since(start)
		if st, err := os.Stat(out); err != nil || st.Size() != size {
			b.Fatalf("pipeline wrote %v bytes (%v)", st.Size(), err)
		}
		return d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	ta, tc := time.Duration(1<<62), time.Duration(1<<62)
	ca, cc := ta, tc
	for r := 0; r < 3; r++ {
		w, c := pipeline()
		tc, cc = min(tc, w), min(cc, c)
		w, c = agent()
		ta, ca = min(ta, w), min(ca, c)
	}
	b.ReportMetric(tc.Seconds()/ta.Seconds(), "agent/curl-zstd-dd"+metric)
	b.ReportMetric(cc.Seconds()/ca.Seconds(), "cpu-agent/curl-zstd-dd"+metric)
	b.ReportMetric(float64(size)/ta.Seconds()/1e6, "agent-MB/s"+metric)
	b.ReportMetric(float64(size)/tc.Seconds()/1e6, "curl-zstd-dd-MB/s"+metric)
	b.Logf("%s: %d bytes raw, %d compressed; agent %v wall %v CPU (O_DIRECT %v), curl|zstd -d|dd %v wall %v CPU",
		filepath.Base(file), size, zsize, ta, ca, direct, tc, cc)
}

// multiFrameFile compresses raw into dst as independent frames of chunk
// bytes, each declaring its content size (klauspost/compress, level 3).
func multiFrameFile(b *testing.B, raw, dst string, chunk int) {
	in, err := os.Open(raw)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	buf := make([]byte, chunk)
	var frame []byte
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			frame = enc.EncodeAll(buf[:n], frame[:0])
			if _, err := out.Write(frame); err != nil {
				b.Fatal(err)
			}
		}
		if err != nil {
			break
		}
	}
}
