package imagewrite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
)

// testImage is a 64 MiB disk-like image: zero runs (aligned and not),
// random data and repeating text.
func testImage(t testing.TB, size int) []byte {
	t.Helper()
	img := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	const blk = 1 << 20
	for off := 0; off < size; off += blk {
		b := img[off:min(off+blk, size)]
		switch (off / blk) % 4 {
		case 0: // zeros
		case 1:
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
		case 2:
			for i := 0; i < len(b); {
				i += copy(b[i:], fmt.Sprintf("line %d of a config file\n", i))
			}
		case 3: // data, then a zero run not aligned to 64 KiB
			for i := range b[:65536+123] {
				b[i] = byte(rng.Uint32())
			}
		}
	}
	return img
}

func compress(t testing.TB, raw []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(raw, nil)
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// imageServer serves body at /img. dropAt > 0: the first full GET sends
// dropAt bytes of the body and then drops the connection. noRange: Range
// headers are ignored (always 200 with the whole body).
type imageServer struct {
	*httptest.Server
	mu     sync.Mutex
	ranges []string
}

func newImageServer(t testing.TB, body []byte, dropAt int, noRange bool) *imageServer {
	s := &imageServer{}
	dropped := false
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		drop := dropAt > 0 && !dropped
		dropped = dropped || drop
		s.mu.Unlock()
		if r.URL.Path != "/img" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		if noRange {
			r.Header.Del("Range")
		}
		if drop {
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(http.StatusOK)
			w.Write(body[:dropAt])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection is closed mid-body
		}
		http.ServeContent(w, r, "img", time.Unix(0, 0), bytes.NewReader(body))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *imageServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

func TestWriteZstdResumesAfterDrop(t *testing.T) {
	raw := testImage(t, 64<<20)
	zst := compress(t, raw)
	drop := len(zst) / 3
	srv := newImageServer(t, zst, drop, false)
	path := filepath.Join(t.TempDir(), "disk.img")
	tgt, err := OpenTarget(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	var reports []Progress
	res, err := Write(context.Background(), tgt, Options{URL: srv.URL + "/img", SHA256: sum(zst), Format: "raw.zst",
		Size: int64(len(zst)), RetryBackoff: time.Millisecond, Progress: func(p Progress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw) {
		t.Fatalf("written image differs from the source (len %d vs %d)", len(got), len(raw))
	}
	if res.Resumes != 1 || res.SHA256 != sum(zst) || res.Received != int64(len(zst)) || res.Written != int64(len(raw)) {
		t.Errorf("result %+v: want 1 resume, the stream's sha256, %d received, %d written", res, len(zst), len(raw))
	}
	if diff := cmp.Diff([]string{"", fmt.Sprintf("bytes=%d-", drop)}, srv.seen()); diff != "" {
		t.Errorf("requests' Range headers (-want +got):\n%s", diff)
	}
	if res.ZeroBytes < 16<<20 {
		t.Errorf("zero bytes skipped = %d, want at least the 16 MiB of aligned zero runs", res.ZeroBytes)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err == nil && st.Blocks*512 >= int64(len(raw)) {
		t.Errorf("target file uses %d bytes on disk: zero runs were written, not skipped", st.Blocks*512)
	}
	if len(reports) == 0 || reports[len(reports)-1].Received != int64(len(zst)) || reports[len(reports)-1].Written != int64(len(raw)) {
		t.Errorf("last progress report %+v: want the full stream", reports[len(reports)-1])
	}
}

func TestWriteRawRangeIgnored(t *testing.T) {
	raw := testImage(t, 8<<20)
	srv := newImageServer(t, raw, 3<<20+17, true)
	path := filepath.Join(t.TempDir(), "disk.img")
	tgt, err := OpenTarget(path, "")
	if err != nil {
		t.Fatal(err)
	}
	tgt.Zero = ZeroWrite // as for a block device of unknown contents
	defer tgt.Close()
	res, err := Write(context.Background(), tgt, Options{URL: srv.URL + "/img", SHA256: sum(raw), RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, raw) || res.Resumes != 1 || res.ZeroBytes != 0 {
		t.Fatalf("identical=%v result=%+v: want identical, 1 resume, no zero bytes skipped", bytes.Equal(got, raw), res)
	}
	if n := len(srv.seen()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestWriteChecksumMismatch(t *testing.T) {
	raw := testImage(t, 4<<20)
	zst := compress(t, raw)
	srv := newImageServer(t, zst, 0, false)
	path := filepath.Join(t.TempDir(), "disk.img")
	tgt, err := OpenTarget(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	wrong := strings.Repeat("0", 64)
	res, err := Write(context.Background(), tgt, Options{URL: srv.URL + "/img", SHA256: wrong, Format: "raw.zst"})
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ChecksumError", err)
	}
	if ce.Expected != wrong || ce.Found != sum(zst) || ce.Bytes != int64(len(zst)) {
		t.Errorf("checksum error %+v: want expected %s found %s", ce, wrong, sum(zst))
	}
	if res.SHA256 == wrong {
		t.Errorf("result claims the expected sha256")
	}
	got, _ := os.ReadFile(path)
	if len(got) >= 1<<20 && !bytes.Equal(got[:1<<20], make([]byte, 1<<20)) {
		t.Errorf("the first MiB of a mismatched image was not wiped")
	}
}

func TestWriteErrors(t *testing.T) {
	raw := testImage(t, 1<<20)
	srv := newImageServer(t, raw, 0, false)
	tests := map[string]struct {
		o    Options
		want string
	}{
		"not found":   {Options{URL: srv.URL + "/nope", SHA256: sum(raw)}, "404"},
		"raw as zstd": {Options{URL: srv.URL + "/img", SHA256: sum(raw), Format: "raw.zst"}, "magic number"},
		"wrong size":  {Options{URL: srv.URL + "/img", SHA256: sum(raw), Size: 5}, "expected 5 bytes"},
		"bad format":  {Options{URL: srv.URL + "/img", SHA256: sum(raw), Format: "qcow2"}, "format"},
		"no sha":      {Options{URL: srv.URL + "/img"}, "sha256"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tgt, err := OpenTarget(filepath.Join(t.TempDir(), "d"), "")
			if err != nil {
				t.Fatal(err)
			}
			defer tgt.Close()
			_, err = Write(context.Background(), tgt, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestProgressAtMostEvery(t *testing.T) {
	raw := testImage(t, 16<<20)
	srv := newImageServer(t, raw, 0, false)
	tgt, err := OpenTarget(filepath.Join(t.TempDir(), "d"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	clock := time.Unix(0, 0)
	var got []time.Duration
	o := Options{URL: srv.URL + "/img", SHA256: sum(raw), BufferSize: 1 << 20,
		Progress: func(p Progress) { got = append(got, p.Elapsed) },
		now:      func() time.Time { clock = clock.Add(200 * time.Millisecond); return clock }}
	if _, err := Write(context.Background(), tgt, o); err != nil {
		t.Fatal(err)
	}
	// 16 buffers, the clock moves 200 ms per look: reports every 3rd buffer, plus the last.
	for i := 1; i < len(got)-1; i++ {
		if got[i]-got[i-1] < 500*time.Millisecond {
			t.Errorf("reports %d and %d only %v apart", i-1, i, got[i]-got[i-1])
		}
	}
	if len(got) < 4 || len(got) > 9 {
		t.Errorf("%d reports for 16 buffers, want 4-9", len(got))
	}
}

func TestParseContentRange(t *testing.T) {
	tests := map[string]struct {
		in           string
		start, total int64
		bad          bool
	}{
		"full":     {in: "bytes 100-199/200", start: 100, total: 200},
		"unknown":  {in: "bytes 5-9/*", start: 5, total: -1},
		"no unit":  {in: "100-199/200", bad: true},
		"no total": {in: "bytes 100-199", bad: true},
		"negative": {in: "bytes -1-5/9", bad: true},
		"garbage":  {in: "bytes a-b/c", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, tot, err := parseContentRange(tc.in)
			if (err != nil) != tc.bad || (!tc.bad && (s != tc.start || tot != tc.total)) {
				t.Fatalf("parseContentRange(%q) = %d, %d, %v", tc.in, s, tot, err)
			}
		})
	}
}
