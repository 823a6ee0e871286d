package firmware

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ingot-dev/ingot/pkg/artifact"
)

// StoreImages gives Apply packages from ingot's content store.
type StoreImages struct {
	Store *artifact.Store
	// URLFor is where the BMC fetches a package (SimpleUpdate): the engine
	// gives an unguessable per-job URL on a listener the BMC network
	// reaches (--firmware-url). nil or "": the package is pushed.
	URLFor func(ctx context.Context, sha string) (string, error)
}

// URL implements Images.
func (s StoreImages) URL(ctx context.Context, sha string) (string, error) {
	if s.URLFor == nil {
		return "", nil
	}
	return s.URLFor(ctx, sha)
}

// Open implements Images.
func (s StoreImages) Open(_ context.Context, sha string) (io.ReadCloser, error) {
	return s.Store.Open(sha)
}

// Imported is a package put into the content store.
type Imported struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Import puts a firmware package (a vendor's update file or bundle) into
// the content store under its sha256 and names it (default: the file's
// base name); a recipe pin's package is that sha256.
func Import(ctx context.Context, dataDir, file, name string) (Imported, error) {
	if name == "" {
		name = filepath.Base(file)
	}
	if !artifact.ValidName(name) {
		return Imported{}, fmt.Errorf("importing firmware %s: name %q: expected letters, digits, '.', '_', '+' and '-' (give --name)", file, name)
	}
	st, err := artifact.Open(dataDir)
	if err != nil {
		return Imported{}, err
	}
	ref, err := st.PutFile(ctx, file)
	if err != nil {
		return Imported{}, fmt.Errorf("importing firmware %s: %w", file, err)
	}
	if err := st.SetName(name, ref.SHA256); err != nil {
		return Imported{}, fmt.Errorf("importing firmware %s: %w", file, err)
	}
	return Imported{Name: name, SHA256: ref.SHA256, Size: ref.Size}, nil
}
