// Package artifact is ingot's content-addressed file store: kernels, initrds
// and golden images kept on disk under their SHA-256.
//
// Layout under the store's directory:
//
//	sha256/<64 hex>   the content, named by its hash, read-only (0444)
//	names/<name>      a human name ("agent-vmlinuz") -> one line: the hex hash
//	tmp/              uploads in progress
//
// Put streams into tmp/, hashes while writing, fsyncs, checks the size on
// disk and (when the caller names one) the expected hash, and only then
// renames the file under sha256/. A reader therefore never sees a partial
// file under a hash name: the name appears atomically with full content.
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ingot-dev/ingot/pkg/durable"
)

// Errors. Test with errors.Is.
var (
	ErrNotFound = errors.New("artifact not found")
	ErrMismatch = errors.New("artifact hash mismatch")
	ErrBadName  = errors.New("invalid artifact name")
)

// Ref names one stored artifact.
type Ref struct {
	SHA256 string `json:"sha256"` // 64 lowercase hex digits
	Size   int64  `json:"size"`
}

// Store is a content-addressed store rooted in one directory.
type Store struct {
	dir string
}

// Open opens (creating if needed) the store in dir.
func Open(dir string) (*Store, error) {
	for _, sub := range []string{"sha256", "names", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("opening artifact store %s: %w", dir, err)
		}
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// ValidSHA256 reports whether h is 64 lowercase hex digits.
func ValidSHA256(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}$`)

// ValidName reports whether name may be used as a human name.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Path returns where the artifact with hash sha lives (whether or not it exists).
func (s *Store) Path(sha string) string { return filepath.Join(s.dir, "sha256", sha) }

// Put stores r's content and returns its reference.
func (s *Store) Put(ctx context.Context, r io.Reader) (Ref, error) {
	return s.PutVerified(ctx, r, "")
}

// PutVerified stores r's content and fails with ErrMismatch (storing
// nothing) unless its SHA-256 is want. An empty want accepts any content.
func (s *Store) PutVerified(ctx context.Context, r io.Reader, want string) (Ref, error) {
	if want != "" && !ValidSHA256(want) {
		return Ref{}, fmt.Errorf("storing artifact: expected sha256 %q is not 64 lowercase hex digits", want)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "put-*")
	if err != nil {
		return Ref{}, fmt.Errorf("storing artifact: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	ref, err := writeHashed(ctx, tmp, r)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", tmp.Name(), cerr)
	}
	if err != nil {
		return Ref{}, fmt.Errorf("storing artifact: %w", err)
	}
	if want != "" && ref.SHA256 != want {
		return Ref{}, fmt.Errorf("storing artifact: content has sha256 %s, expected %s: %w", ref.SHA256, want, ErrMismatch)
	}
	if err := s.commit(tmp.Name(), ref); err != nil {
		return Ref{}, err
	}
	return ref, nil
}

// writeHashed copies r into f while hashing, fsyncs f and checks the size
// on disk against the bytes copied.
func writeHashed(ctx context.Context, f *os.File, r io.Reader) (Ref, error) {
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err != nil {
		return Ref{}, fmt.Errorf("copying into %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return Ref{}, fmt.Errorf("syncing %s: %w", f.Name(), err)
	}
	fi, err := f.Stat()
	if err != nil {
		return Ref{}, err
	}
	if fi.Size() != n {
		return Ref{}, fmt.Errorf("%s holds %d bytes on disk, expected %d", f.Name(), fi.Size(), n)
	}
	return Ref{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// commit moves a verified temp file under its hash and syncs the directory.
func (s *Store) commit(tmp string, ref Ref) error {
	dst := s.Path(ref.SHA256)
	if err := os.Chmod(tmp, 0o444); err != nil {
		return fmt.Errorf("storing artifact %s: %w", ref.SHA256, err)
	}
	if fi, err := os.Stat(dst); err == nil && fi.Size() == ref.Size {
		return nil // already stored: content addressing makes this a no-op
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("storing artifact %s: %w", ref.SHA256, err)
	}
	return durable.SyncDir(filepath.Dir(dst))
}

// PutFile stores the file at path.
func (s *Store) PutFile(ctx context.Context, path string) (Ref, error) {
	f, err := os.Open(path)
	if err != nil {
		return Ref{}, fmt.Errorf("storing artifact from %s: %w", path, err)
	}
	defer f.Close()
	ref, err := s.Put(ctx, f)
	if err != nil {
		return Ref{}, fmt.Errorf("storing artifact from %s: %w", path, err)
	}
	return ref, nil
}

// Open opens the artifact with hash sha for reading.
func (s *Store) Open(sha string) (*os.File, error) {
	if !ValidSHA256(sha) {
		return nil, fmt.Errorf("artifact %q: expected 64 lowercase hex digits: %w", sha, ErrNotFound)
	}
	f, err := os.Open(s.Path(sha))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("artifact %s: %w", sha, ErrNotFound)
	}
	return f, err
}

// Has reports whether the artifact with hash sha is stored.
func (s *Store) Has(sha string) bool {
	if !ValidSHA256(sha) {
		return false
	}
	fi, err := os.Stat(s.Path(sha))
	return err == nil && fi.Mode().IsRegular()
}

// Stat returns the reference of a stored artifact.
func (s *Store) Stat(sha string) (Ref, error) {
	if !ValidSHA256(sha) {
		return Ref{}, fmt.Errorf("artifact %q: %w", sha, ErrNotFound)
	}
	fi, err := os.Stat(s.Path(sha))
	if err != nil {
		return Ref{}, fmt.Errorf("artifact %s: %w", sha, ErrNotFound)
	}
	return Ref{SHA256: sha, Size: fi.Size()}, nil
}

// List returns every stored artifact, sorted by hash.
func (s *Store) List() ([]Ref, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "sha256"))
	if err != nil {
		return nil, fmt.Errorf("listing artifacts: %w", err)
	}
	var refs []Ref
	for _, e := range ents {
		if !ValidSHA256(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		refs = append(refs, Ref{SHA256: e.Name(), Size: fi.Size()})
	}
	return refs, nil
}

// Verify re-reads a stored artifact and checks its hash (bit rot, tampering).
func (s *Store) Verify(ctx context.Context, sha string) error {
	f, err := s.Open(sha)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return fmt.Errorf("verifying artifact %s: %w", sha, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sha {
		return fmt.Errorf("verifying artifact %s: content hashes to %s: %w", sha, got, ErrMismatch)
	}
	return nil
}

// SetName points the human name at a stored artifact, atomically.
func (s *Store) SetName(name, sha string) error {
	if !ValidName(name) {
		return fmt.Errorf("naming artifact %q: expected letters, digits, '.', '_', '+', '-' (not starting with '.'): %w", name, ErrBadName)
	}
	if !s.Has(sha) {
		return fmt.Errorf("naming artifact %s as %s: %w", sha, name, ErrNotFound)
	}
	dir := filepath.Join(s.dir, "names")
	tmp, err := os.CreateTemp(dir, ".name-*")
	if err != nil {
		return fmt.Errorf("naming artifact %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(sha + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return fmt.Errorf("naming artifact %s: %w", name, err)
	}
	return durable.SyncDir(dir)
}

// Resolve turns a hash or a human name into a hash of a stored artifact.
func (s *Store) Resolve(nameOrSHA string) (string, error) {
	if ValidSHA256(nameOrSHA) {
		if !s.Has(nameOrSHA) {
			return "", fmt.Errorf("artifact %s: %w", nameOrSHA, ErrNotFound)
		}
		return nameOrSHA, nil
	}
	if !ValidName(nameOrSHA) {
		return "", fmt.Errorf("artifact %q: %w", nameOrSHA, ErrBadName)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "names", nameOrSHA))
	if err != nil {
		return "", fmt.Errorf("artifact name %s: %w", nameOrSHA, ErrNotFound)
	}
	sha := strings.TrimSpace(string(b))
	if !s.Has(sha) {
		return "", fmt.Errorf("artifact name %s points at %q, which is not stored: %w", nameOrSHA, sha, ErrNotFound)
	}
	return sha, nil
}

// Names returns every human name and the hash it points at, sorted by name.
func (s *Store) Names() ([]Named, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "names"))
	if err != nil {
		return nil, fmt.Errorf("listing artifact names: %w", err)
	}
	var out []Named
	for _, e := range ents {
		if !ValidName(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "names", e.Name()))
		if err != nil {
			continue
		}
		out = append(out, Named{Name: e.Name(), SHA256: strings.TrimSpace(string(b))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Named is one human name of an artifact.
type Named struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
