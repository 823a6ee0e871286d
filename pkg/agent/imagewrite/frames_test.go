package imagewrite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// multiFrame compresses raw in independent frames of chunk bytes each, as
// pzstd does; each frame declares its content size.
func multiFrame(t testing.TB, raw []byte, chunk int) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for off := 0; off < len(raw); off += chunk {
		out = enc.EncodeAll(raw[off:min(off+chunk, len(raw))], out)
	}
	return out
}

func TestReadFrame(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithZeroFrames(true))
	for _, n := range []int{0, 1, 200, 300, 70000, 5 << 20} {
		raw := bytes.Repeat([]byte("ingot "), n/6+1)[:n]
		frame := enc.EncodeAll(raw, nil)
		r := bytes.NewReader(append(append([]byte(nil), frame...), frame...))
		for i := 0; i < 2; i++ {
			f, err := readFrame(r, nil, 64<<20)
			if err != nil {
				t.Fatalf("size %d frame %d: %v", n, i, err)
			}
			// Tiny frames may leave the content size out (-1).
			if !bytes.Equal(f.data, frame) || (f.contentSize != int64(n) && !(n < 256 && f.contentSize == -1)) {
				t.Fatalf("size %d frame %d: %d bytes, content %d; want %d bytes, content %d", n, i, len(f.data), f.contentSize, len(frame), n)
			}
		}
		if _, err := readFrame(r, nil, 64<<20); err != io.EOF {
			t.Fatalf("size %d: after two frames: %v, want io.EOF", n, err)
		}
	}
	// A skippable frame, then garbage.
	skip := binary.LittleEndian.AppendUint32(nil, 0x184D2A53)
	skip = binary.LittleEndian.AppendUint32(skip, 3)
	skip = append(skip, "abcjunk!"...)
	r := bytes.NewReader(skip)
	if f, err := readFrame(r, nil, 1<<20); err != nil || !f.skippable || len(f.data) != 11 {
		t.Fatalf("skippable: %+v %v", f, err)
	}
	if _, err := readFrame(r, nil, 1<<20); !errors.Is(err, errNotZstd) && err != io.ErrUnexpectedEOF {
		t.Fatalf("garbage: %v", err)
	}
	// A frame over the limit.
	big := enc.EncodeAll(testImage(t, 2<<20), nil) // the second MiB is random
	if _, err := readFrame(bytes.NewReader(big), nil, 1000); err == nil || !strings.Contains(err.Error(), "over 1000") {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestWriteMultiFrameParallel(t *testing.T) {
	raw := testImage(t, 40<<20+12345)
	zst := multiFrame(t, raw, 4<<20)
	srv := newImageServer(t, zst, len(zst)/2+7, false)
	path := filepath.Join(t.TempDir(), "disk.img")
	tgt, err := OpenTarget(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	res, err := Write(context.Background(), tgt, Options{URL: srv.URL + "/img", SHA256: sum(zst), Format: "raw.zst", RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, raw) || res.Resumes != 1 || res.Written != int64(len(raw)) {
		t.Fatalf("identical=%v result %+v: want identical, 1 resume, %d written", bytes.Equal(got, raw), res, len(raw))
	}
}

func TestWriteMultiFrameErrors(t *testing.T) {
	raw := testImage(t, 8<<20)
	good := multiFrame(t, raw, 1<<20)
	tests := map[string]struct {
		body []byte
		want string
	}{
		"trailing garbage": {append(append([]byte(nil), good...), "garbage!"...), "not a frame"},
		"truncated":        {good[:len(good)-100], "unexpected EOF"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := newImageServer(t, tc.body, 0, false)
			tgt, err := OpenTarget(filepath.Join(t.TempDir(), "d"), "")
			if err != nil {
				t.Fatal(err)
			}
			defer tgt.Close()
			_, err = Write(context.Background(), tgt, Options{URL: srv.URL + "/img", SHA256: sum(tc.body), Format: "raw.zst"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeAndWriteSizeMismatch(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	frame := enc.EncodeAll([]byte("twelve bytes"), nil)
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	tgt, err := OpenTarget(filepath.Join(t.TempDir(), "d"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	if _, err := decodeAndWrite(dec, tgt, frame, 0, 13, make(chan []byte, 1)); err == nil || !strings.Contains(err.Error(), "header says 13") {
		t.Fatalf("err = %v", err)
	}
	if _, err := decodeAndWrite(dec, tgt, frame[:len(frame)-3], 0, 12, make(chan []byte, 1)); err == nil || !strings.Contains(err.Error(), "decompressing") {
		t.Fatalf("truncated frame: err = %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	enc, _ := zstd.NewWriter(nil)
	f.Add(enc.EncodeAll([]byte("hello hello hello"), nil))
	f.Add([]byte{0x50, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 'h', 'i'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for i := 0; i < 4; i++ {
			fr, err := readFrame(r, nil, 1<<20)
			if err != nil {
				return
			}
			if len(fr.data) > 1<<20 || len(fr.data) < 4 {
				t.Fatalf("frame of %d bytes", len(fr.data))
			}
		}
	})
}

// With little memory, a stream of frames is decoded by the streaming path.
func TestWriteMultiFrameLowMemory(t *testing.T) {
	raw := testImage(t, 9<<20)
	zst := multiFrame(t, raw, 4<<20)
	srv := newImageServer(t, zst, 0, false)
	path := filepath.Join(t.TempDir(), "disk.img")
	tgt, err := OpenTarget(path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	if _, err := Write(context.Background(), tgt, Options{URL: srv.URL + "/img", SHA256: sum(zst), Format: "raw.zst", Memory: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, raw) {
		t.Fatal("written image differs")
	}
	if m := defaultMemory(); m <= 0 || m > maxInFlight {
		t.Errorf("defaultMemory() = %d", m)
	}
}
