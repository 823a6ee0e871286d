package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func TestPutOpenListNames(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("kernel bytes")
	ref, err := s.Put(context.Background(), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Ref{SHA256: sum(data), Size: int64(len(data))}, ref); diff != "" {
		t.Fatalf("ref (-want +got):\n%s", diff)
	}
	// Storing the same content again is a no-op that returns the same ref.
	if ref2, err := s.Put(context.Background(), bytes.NewReader(data)); err != nil || ref2 != ref {
		t.Fatalf("second Put = %v, %v; want %v", ref2, err, ref)
	}
	f, err := s.Open(ref.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %q, want %q", got, data)
	}
	if err := s.SetName("agent-vmlinuz", ref.SHA256); err != nil {
		t.Fatal(err)
	}
	if sha, err := s.Resolve("agent-vmlinuz"); err != nil || sha != ref.SHA256 {
		t.Fatalf("Resolve(agent-vmlinuz) = %q, %v", sha, err)
	}
	list, _ := s.List()
	names, _ := s.Names()
	if diff := cmp.Diff([]Ref{ref}, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Named{{"agent-vmlinuz", ref.SHA256}}, names); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	if err := s.Verify(context.Background(), ref.SHA256); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestErrors(t *testing.T) {
	s, _ := Open(t.TempDir())
	tests := map[string]struct {
		err  error
		want error
	}{
		"open unknown hash": {err: func() error { _, err := s.Open(strings.Repeat("a", 64)); return err }(), want: ErrNotFound},
		"open bad hash":     {err: func() error { _, err := s.Open("../../etc/passwd"); return err }(), want: ErrNotFound},
		"resolve traversal": {err: func() error { _, err := s.Resolve("../x"); return err }(), want: ErrBadName},
		"name dotfile":      {err: s.SetName(".hidden", strings.Repeat("a", 64)), want: ErrBadName},
		"name unknown":      {err: s.SetName("x", strings.Repeat("a", 64)), want: ErrNotFound},
	}
	for name, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error %v, want %v", name, tc.err, tc.want)
		}
	}
}

func TestPutVerifiedRejectsMismatch(t *testing.T) {
	s, _ := Open(t.TempDir())
	wrong := sum([]byte("something else"))
	_, err := s.PutVerified(context.Background(), strings.NewReader("content"), wrong)
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("PutVerified with wrong hash: %v, want ErrMismatch", err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("mismatched content was stored: %v", list)
	}
	if tmp, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(tmp) != 0 {
		t.Fatalf("temp files left behind: %v", tmp)
	}
	if _, err := s.PutVerified(context.Background(), strings.NewReader("content"), sum([]byte("content"))); err != nil {
		t.Fatalf("PutVerified with right hash: %v", err)
	}
}

// TestPutAtomic streams content slowly while a reader polls the hash path:
// the reader must never see the file before it is complete.
func TestPutAtomic(t *testing.T) {
	s, _ := Open(t.TempDir())
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	want := sum(data)
	pr, pw := io.Pipe()
	go func() {
		for off := 0; off < len(data); off += 64 << 10 {
			pw.Write(data[off : off+64<<10])
			time.Sleep(2 * time.Millisecond)
		}
		pw.Close()
	}()
	done := make(chan error, 1)
	go func() { _, err := s.Put(context.Background(), pr); done <- err }()
	seen := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(s.Path(want)); err != nil || sum(b) != want {
				t.Fatalf("after Put: %v, content hash mismatch", err)
			}
			t.Logf("polled the path %d times while it existed during Put", seen)
			return
		default:
		}
		if b, err := os.ReadFile(s.Path(want)); err == nil {
			seen++
			if len(b) != len(data) || sum(b) != want {
				t.Fatalf("a reader saw a partial file: %d of %d bytes", len(b), len(data))
			}
		}
	}
}

func TestPutCancelled(t *testing.T) {
	s, _ := Open(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled context: %v", err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Fatalf("stored after cancel: %v", list)
	}
}
