package firmware

import (
	"context"
	"io"

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
